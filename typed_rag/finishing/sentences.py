"""Where a sentence ends: not at the full stop of an initial or a common abbreviation.

Splitting at every ". " cut "John F. Kennedy" and "(c. 1510)" in two: extracted
evidence then quoted the fragment "... Giorgione's Sleeping Venus (c. [1]", and
post-citing wrote "Robert L [1]. Goldberg" into answers. Every splitter that looks
for sentence ends puts :data:`NOT_ABBREVIATION` before its own rule.
"""

from __future__ import annotations

import re

# Titles and abbreviations written with a full stop inside a sentence (case as written).
ABBREVIATIONS = (
    "Mr", "Mrs", "Ms", "Dr", "St", "Jr", "Sr", "vs", "Prof", "Gen", "Col", "Lt", "Capt",
    "Sgt", "Rev", "Mt", "Ft", "No", "Nos", "Vol", "Jan", "Feb", "Aug", "Sept", "Oct", "Nov",
    "Dec", "c", "ca", "approx", "e.g", "i.e", "cf",
)  # fmt: skip
# Put before a lookbehind for the sentence's end punctuation: no end right after an initial
# ("John F."; a capital letter alone at the start or after a space, "(" or a quote) or an
# abbreviation.
NOT_ABBREVIATION = r"(?<![\s(\"'][A-Z]\.)(?<!^[A-Z]\.)" + "".join(
    rf"(?<!\b{re.escape(a)}\.)" for a in ABBREVIATIONS
)
# An answer's sentence end: . ! or ? (not an initial's or abbreviation's full stop, with
# closing quotes or brackets) and any citation groups, before white space or the end.
_SENTENCE_END = re.compile(rf"[.!?]{NOT_ABBREVIATION}[\"')\]*]*(?:[ \t]*\[[\d,; ]+\])*(?=\s|$)")
_LIST_MARKER = re.compile(r"(?:^|\n)[ \t]*\d{1,2}$")


def sentence_ends(answer: str) -> list[re.Match[str]]:
    """The sentence ends of ``answer`` in order; a list marker ("3.") is not one."""
    return [
        m for m in _SENTENCE_END.finditer(answer) if not _LIST_MARKER.search(answer, 0, m.start())
    ]


def answer_pieces(answer: str) -> list[str]:
    """``answer`` cut after each sentence end (a piece keeps the white space before it, so
    the pieces join back into ``answer``): the sentences or list items the finishing cuts
    keep or drop whole."""
    starts = [0, *(m.end() for m in sentence_ends(answer))]
    return [answer[a:b] for a, b in zip(starts, [*starts[1:], len(answer)], strict=True)]


# A passage's sentence ends at ".", "!" or "?" and white space before anything but a
# lower-case letter ("approx. two"), or at a line break.
_PASSAGE_BREAK = re.compile(rf"{NOT_ABBREVIATION}(?<=[.!?])\s+(?![a-z])|\n+")


def passage_sentences(text: str) -> list[str]:
    """``text`` cut into sentences (pieces may be empty or only white space)."""
    return _PASSAGE_BREAK.split(text)
