"""Sub-answers without a generation: which carry no information, and quoted evidence.

A small model answering a sub-query from passages that do not cover it often
writes nothing useful: an empty reply, the sub-query restated ("Energy boost
from coffee"), a "the passages do not say" disclaimer, or only a references
list. Passed on, the aggregator or mediator treats such a reply as a finding.
:func:`uninformative` names the reason (or None); it is pure and cheap.
:func:`extract_evidence` replaces the generated sub-answers altogether (the
default ``fast`` profile), :func:`anchor` attaches the question to a vague sub-query.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from typed_rag.finishing.sentences import passage_sentences
from typed_rag.messages import CITATION_GROUP

# Content words an answer must add beyond its query to count as saying something.
MIN_NEW_WORDS = 2
# Beyond a "no information" disclaimer, the rest must add this many to count.
MIN_NEW_WORDS_BESIDE_DISCLAIMER = 4

STOPWORDS = frozenset(
    """a an and are as at be been being but by can could did do does for from had has have
    how i if in into is it its may might more most of on or our so such than that the their
    them then there these they this those to was were what when where which while who whom
    why will with would you your about also just very""".split()
)

_NO_INFO = re.compile(
    r"\b(?:no|not enough|insufficient|any) (?:relevant |specific |direct |such )?"
    r"(?:information|details?|mention|data|evidence)\b"
    r"|\b(?:does|do|did) not (?:provide|contain|mention|say|state|include|address|specify"
    r"|discuss|offer|give|cover)\b"
    r"|\b(?:doesn't|don't|didn't) (?:provide|contain|mention|say|state|include|address"
    r"|specify|discuss|offer|give|cover)\b"
    r"|\b(?:cannot|can't|can not|unable to|not able to) (?:be )?(?:answer|determine|find|tell"
    r"|say|provide|answered|determined|found)\b"
    r"|\bnot (?:mentioned|specified|stated|provided|addressed|covered|discussed)\b"
    r"|\bi (?:do not|don't) know\b|\bnot possible to (?:answer|determine|say)\b",
    re.IGNORECASE,
)

# A trailing "References:" / "Sources:" block (heading, then citation lines).
_REFERENCES = re.compile(
    r"^[ \t]*(?:#+[ \t]*)?(?:\*\*)?(?:references?|sources?|citations?)(?:\*\*)?[ \t]*:?"
    r"[ \t]*(?:\*\*)?[ \t]*(?=\n|\Z|\[).*\Z",
    re.IGNORECASE | re.MULTILINE | re.DOTALL,
)


def content_words(text: str) -> list[str]:
    """Lower-cased words of 3+ letters that are not stopwords, citations removed."""
    text = CITATION_GROUP.sub(" ", text)
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2 and w not in STOPWORDS]


def stem(word: str) -> str:
    """Crude plural/ing folding, so "boosts" restates "boost"."""
    for suffix in ("ing", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def body(answer: str) -> str:
    """The answer without a trailing references list."""
    return _REFERENCES.sub("", answer).strip()


def uninformative(query: str, answer: str) -> str | None:
    """Why ``answer`` says nothing about ``query``: "empty", "references-only",
    "restates-query" or "no-information"; None when it carries information.

    An answer whose every sentence beyond the query's own words is a "no
    information" disclaimer counts as none; one informative sentence keeps it.
    """
    if not answer or not answer.strip():
        return "empty"
    text = body(answer)
    words = content_words(text)
    if not words:
        return "references-only"
    asked = {stem(w) for w in content_words(query)}
    if len({stem(w) for w in words} - asked) < MIN_NEW_WORDS and len(words) <= 2 * max(
        1, len(asked)
    ):
        return "restates-query"
    sentences = [s for s in passage_sentences(text) if s.strip()]
    informative = [s for s in sentences if not says_unknown(s)]
    if len(informative) < len(sentences):
        added = {stem(w) for s in informative for w in content_words(s)} - asked
        if len(added) < MIN_NEW_WORDS_BESIDE_DISCLAIMER:
            return "no-information"
    return None


def says_unknown(text: str) -> bool:
    """Whether ``text`` disclaims knowing ("not mentioned", "cannot determine")."""
    return _NO_INFO.search(text) is not None


# A sub-query sharing fewer content words than this with its question is too vague
# to search alone ("what was the bill about?").
MIN_SHARED_WITH_QUESTION = 2


def anchor(question: str, query: str) -> str:
    """``query`` as is when it names the question's subject, else with the question attached."""
    asked = {stem(w) for w in content_words(question)}
    shared = asked & {stem(w) for w in content_words(query)}
    if len(shared) >= min(MIN_SHARED_WITH_QUESTION, len(asked)):
        return query
    return f"{query} (context: {question})"


# Extracted sub-answers (``method.sub_answers = "extract"``): sentences shorter than
# this are headings or fragments; longer ones are cut, so the aggregator's prompt stays short.
MIN_SENTENCE_WORDS = 5
MAX_SENTENCE_WORDS = 50


Sources = Sequence[tuple[int, str]]  # (citation number, passage text), in rank order


def extract_evidence(items: Sequence[tuple[str, Sources]], max_sentences: int = 3) -> list[str]:
    """For each ``(query, passages)``: the sentences that best match the query, each
    followed by its ``[n]``, in passage order.

    A sentence scores the number of the query's content words (stemmed) it
    contains; ties go to the better-ranked passage, then the earlier sentence.
    The queries pick in turns, one sentence per round, and a sentence goes to one
    query only, so sub-queries that retrieve the same passages still bring
    different evidence. A query left with no matching sentence gets its best
    remaining one (without any, its best one, shared).
    Why: a sub-answer written by a small model costs a full generation and often
    only copies (or misreads) its passages; the sentences themselves are cheaper
    and cannot misquote.
    """
    ranked = [_ranked_sentences(query, passages) for query, passages in items]
    picked: list[list[_Sentence]] = [[] for _ in items]
    taken: set[str] = set()
    for _round in range(max_sentences):
        for mine, candidates in zip(picked, ranked, strict=True):
            pick = next((c for c in candidates if c.hits and c.text not in taken), None)
            if pick is not None:
                mine.append(pick)
                taken.add(pick.text)
    for mine, candidates in zip(picked, ranked, strict=True):
        if not mine and candidates:
            mine.append(next((c for c in candidates if c.text not in taken), candidates[0]))
    return [
        " ".join(f"{_clip(c.text)} [{c.number}]" for c in sorted(mine, key=lambda c: c.order))
        for mine in picked
    ]


@dataclass(frozen=True)
class _Sentence:
    hits: int
    order: tuple[int, int]  # (passage rank, position in the passage)
    text: str
    number: int


def _ranked_sentences(query: str, passages: Sources) -> list[_Sentence]:
    """The passages' sentences, best match for ``query`` first."""
    asked = {stem(w) for w in content_words(query)}
    out = [
        _Sentence(len(asked & {stem(w) for w in content_words(text)}), (rank, pos), text, number)
        for rank, (number, passage) in enumerate(passages)
        for pos, sentence in enumerate(passage_sentences(passage))
        if len((text := sentence.strip()).split()) >= MIN_SENTENCE_WORDS
    ]
    return sorted(out, key=lambda c: (-c.hits, c.order))


def _clip(sentence: str) -> str:
    words = sentence.split()
    if len(words) <= MAX_SENTENCE_WORDS:
        return sentence
    return " ".join(words[:MAX_SENTENCE_WORDS]) + " ..."
