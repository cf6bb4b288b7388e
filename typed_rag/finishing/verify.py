"""The answer checked against the passages it showed, after generation (issue 77).

Over documentation the answers that mislead are the ones that state a command, option, file
name or number the cited page does not give (``git reset HEAD <file>`` where the page says
``git reset --soft HEAD^``). Such a claim is checkable without a judge
(:mod:`typed_rag.finishing.code_spans`): every sentence whose technical spans no shown
passage holds is recorded, and with ``method.drop_unshown_spans`` removed, so what is left
states only commands and numbers the user can find in the cited pages.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from typed_rag.finishing.code_spans import check_spans
from typed_rag.finishing.sentences import answer_pieces
from typed_rag.result import Unverified


@dataclass
class Verified:
    answer: str
    unverified: list[Unverified]


def verify_spans(answer: str, passages: Sequence[str], drop: bool) -> Verified:
    """``answer`` with its unverified sentences found, and removed when ``drop`` says so;
    an answer every sentence of which is unverified is kept whole (and recorded): removing
    it all would leave nothing to correct."""
    pieces = answer_pieces(answer)
    found: list[tuple[int, Unverified]] = []
    for i, piece in enumerate(pieces):
        missing = check_spans(piece, passages).missing
        if missing:
            found.append((i, Unverified(sentence=piece.strip(), missing=list(missing))))
    unverified = [u for _, u in found]
    if not drop or not found or len(found) == len(pieces):
        return Verified(answer, unverified)
    gone = {i for i, _ in found}
    kept = "".join(p for i, p in enumerate(pieces) if i not in gone)
    if not kept.strip():
        return Verified(answer, unverified)
    for u in unverified:
        u.removed = True
    return Verified(re.sub(r"[ \t]+\n", "\n", kept).strip(), unverified)
