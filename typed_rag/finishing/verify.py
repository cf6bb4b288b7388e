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

FENCE = "```"


@dataclass
class Verified:
    answer: str
    unverified: list[Unverified]


def verify_spans(answer: str, passages: Sequence[str], drop: bool) -> Verified:
    """``answer`` with its unverified sentences found, and removed when ``drop`` says so;
    an answer every sentence of which is unverified is kept whole (and recorded): removing
    it all would leave nothing to correct. A sentence inside or across a fenced code block
    stays (recorded): cutting it would break the block."""
    pieces = answer_pieces(answer)
    found: list[tuple[int, Unverified]] = []
    in_fence = False
    for i, piece in enumerate(pieces):
        fences = piece.count(FENCE)
        # a piece that opens, closes or sits inside a code block is never cut: what is left
        # would be broken markdown (a fence without its pair)
        whole = not in_fence and fences % 2 == 0
        in_fence ^= fences % 2 == 1
        missing = check_spans(piece, passages).missing
        if missing:
            found.append((i, Unverified(sentence=piece.strip(), missing=list(missing))))
            found[-1][1].removed = whole  # provisional: confirmed below
    unverified = [u for _, u in found]
    gone = {i for i, u in found if u.removed}
    kept = "".join(p for i, p in enumerate(pieces) if i not in gone)
    if not drop or not gone or not kept.strip():
        for u in unverified:
            u.removed = False
        return Verified(answer, unverified)
    return Verified(re.sub(r"[ \t]+\n", "\n", kept).strip(), unverified)
