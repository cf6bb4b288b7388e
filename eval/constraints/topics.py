"""Topic text shared by set building, the judge and the report.

Topics are matched on content words (lower-cased, stopwords and a plural 's'
dropped), so "health effects" and "effects on health" count as one topic.
"""

from __future__ import annotations

import re

_STOPWORDS = frozenset(
    "a an and are as at be by for from how in into is it its of on or over the their to "
    "was were what when where which who why with".split()
)


def content_words(text: str) -> list[str]:
    """Content words, lower-cased, with a plural 's' dropped: the unit of topic matching."""
    out = []
    for w in re.findall(r"[a-z0-9]+", text.lower()):
        if w in _STOPWORDS:
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.append(w)
    return out


def topics_overlap(a: str, b: str, threshold: float = 0.5) -> bool:
    """Same topic in other words? One's content words contain the other's, or Jaccard >= threshold."""
    wa, wb = set(content_words(a)), set(content_words(b))
    if not wa or not wb:
        return False
    if wa <= wb or wb <= wa:
        return True
    return len(wa & wb) / len(wa | wb) >= threshold


def as_sentence(question: str) -> str:
    q = " ".join(question.split())
    return q if q.endswith(("?", ".", "!")) else q + "?"
