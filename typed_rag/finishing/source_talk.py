"""Sentences about the answer's sources rather than its subject (``method.drop_source_talk``).

The 1.5B generator often ends an answer by vouching for it: "This can be found in references
[1] and [3].", "This answer directly addresses the question and is supported by the
references provided.", "The evidence for this cause is supported by [1], [2], and [3]." The
user sees the passages and the citations beside the answer; such a sentence says nothing
about the question, and the prompt's words ("question-answer pairs", "Answer 1") mean
nothing to the reader.

A sentence counts when it opens with a pointer ("This", "These", "The evidence for this",
"The reference [1]", ...) followed by a verb of attestation ("is supported", "can be found",
"comes from", "addresses", ...), and either names the sources ("references", "the passage",
"question-answer pairs", "the information provided") or has nothing after the verb but
citation numbers. A sentence that reports what a source says ("The passage mentions that
...", a quote, a colon) or that a source lacks something ("... does not mention ...") is
content and stays.
"""

from __future__ import annotations

import re

_NOUN = (
    r"(?:answer|information|statement|claim|evidence|conclusion|citation|points?|facts?"
    r"|view|perspective|cause|reason|explanation)"
)
# "This", "This answer", "The evidence for this cause", "The references", "Reference [2]",
# after any list marker or bold label.
_POINTER = (
    r"^[\s\-*\d.]*(?:\*\*[^*]*\*\*:?\s*)?"
    rf"(?:(?:This|These|That|It)(?: {_NOUN})?"
    rf"|The (?:above|evidence|information|answer)(?: (?:for|supporting) (?:this|these|it)"
    rf"(?: {_NOUN})?)?"
    r"|(?:The |These |This )?(?:references?|passages?|sources?|citations?)(?: \[[\d, \]\[]+\])*"
    r"|Reference (?:numbers? )?\[?\d+\]?(?: and \[?\d+\]?)?)"
)
_ATTEST = (
    r"\s+(?:is|are|was|were|can be|could be|has been|have been)?\s*"
    r"(?:also |all |directly |clearly |explicitly |further |fully )*"
    r"(?:stated|found|mentioned|supported|confirmed|described|given|derived|based|backed"
    r"|evidenced|documented|indicated|noted|cited|drawn|taken|comes?|provides?|supports?"
    r"|confirms?|address(?:es)?|covers?|answers?|correct|clear|concise)\b"
)
_TALK = re.compile(_POINTER + _ATTEST, re.IGNORECASE)
# Nothing after the verb but (where) and citation numbers: "This perspective is supported
# by [1] and [4]."
_ONLY_CITATIONS = re.compile(
    _POINTER
    + _ATTEST
    + r"\s*(?:by|in|from)?\s*(?:the )?(?:references?|sources?)?\s*"
    + r"(?:\[\d+\](?:\s*,?\s*(?:and\s*)?)?)+\s*\.?\s*$",
    re.IGNORECASE,
)
_SOURCES = re.compile(
    r"\b(?:references?|passages?|question-answer pairs?|answer \d|sources?|the text"
    r"|texts? provided|(?:information|details|facts) (?:provided|given)"
    r"|(?:provided|given) (?:information|text)|citations?)\b",
    re.IGNORECASE,
)
# What a source says or lacks is content: "... mentions that ...", a quote, a colon, "not".
_REPORTS = re.compile(r"\bthat\b|[\"“:]|\b(?:not|no)\b", re.IGNORECASE)


def is_source_talk(sentence: str) -> bool:
    """Whether ``sentence`` (one sentence or list item) talks about the sources, not the
    subject."""
    s = sentence.strip()
    if _ONLY_CITATIONS.search(s):
        return True
    return bool(_TALK.search(s) and _SOURCES.search(s) and not _REPORTS.search(s))
