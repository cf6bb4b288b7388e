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
# A passage's sentence ends at ".", "!" or "?" and white space before anything but a
# lower-case letter ("approx. two"), or at a line break.
_PASSAGE_BREAK = re.compile(rf"{NOT_ABBREVIATION}(?<=[.!?])\s+(?![a-z])|\n+")


def passage_sentences(text: str) -> list[str]:
    """``text`` cut into sentences (pieces may be empty or only white space)."""
    return _PASSAGE_BREAK.split(text)
