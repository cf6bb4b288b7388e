"""Reciprocal rank fusion (Cormack et al., 2009) and the hybrid BM25 + dense retriever.

RRF needs no score calibration between retrievers: a passage's fused score is
``sum over rankings of 1 / (k + rank)`` (rank 1-based), so a passage ranked well by
either retriever rises, and one ranked well by both rises most. ``k = 60`` is the
constant of the original paper.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from typed_rag.retrieval.base import Passage, Retriever

# The RRF constant of the original paper; k = 10 was tried offline and not kept
# (docs/experiments.md, "other fusions").
RRF_K = 60
# Candidates each retriever gives the hybrid before fusion; 200 was tried offline and not kept.
FUSION_DEPTH = 100


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], k: int = RRF_K
) -> list[tuple[str, float]]:
    """Fuse ranked id lists (best first) into ``(id, score)`` pairs, best first.

    Ties on the fused score are broken by the best rank the id got in any single list,
    then by the id, so the order is deterministic. An id repeated inside one list counts
    at its first (best) position only.
    """
    if k < 0:
        raise ValueError(f"RRF k must be >= 0, got {k}")
    score: dict[str, float] = {}
    best: dict[str, int] = {}
    for ranking in rankings:
        seen: set[str] = set()
        for rank, pid in enumerate(ranking, 1):
            if pid in seen:
                continue
            seen.add(pid)
            score[pid] = score.get(pid, 0.0) + 1.0 / (k + rank)
            best[pid] = min(best.get(pid, rank), rank)
    order = sorted(score, key=lambda pid: (-score[pid], best[pid], pid))
    return [(pid, score[pid]) for pid in order]


class HybridRetriever:
    """BM25 and one or more dense retrievers fused by RRF; ``Passage.score`` is the fused
    score.

    Each retriever returns ``max(depth, k)`` candidates per query; the fused list is cut
    to ``k``. A passage found by only one retriever still competes (with one term).
    """

    def __init__(
        self,
        bm25: Retriever,
        dense: Sequence[Retriever],
        rrf_k: int = RRF_K,
        depth: int = FUSION_DEPTH,
    ) -> None:
        if depth <= 0:
            raise ValueError(f"fusion depth must be positive, got {depth}")
        self.bm25 = bm25
        self.dense = list(dense)
        self.rrf_k = rrf_k
        self.depth = depth
        self.folder: Path | None = getattr(bm25, "folder", None)

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """Top-``k`` fused passages per query, best first."""
        if isinstance(queries, str):
            raise TypeError("search() takes a sequence of queries, not one string")
        if k <= 0 or not queries:
            return [[] for _ in queries]
        depth = max(self.depth, k)
        per_retriever = [self.bm25.search(queries, depth)]
        per_retriever += [d.search(queries, depth) for d in self.dense]
        out: list[list[Passage]] = []
        for lists in zip(*per_retriever, strict=True):
            by_id: dict[str, Passage] = {}
            for hits in reversed(lists):  # BM25's copy of a passage wins
                by_id.update({p.id: p for p in hits})
            fused = reciprocal_rank_fusion([[p.id for p in hits] for hits in lists], self.rrf_k)
            out.append(
                [  # a copy keeps a collection passage's source, page and section
                    replace(by_id[pid], score=score, rerank_score=None) for pid, score in fused[:k]
                ]
            )
        return out

    def close(self) -> None:
        for part in (self.bm25, *self.dense):
            close = getattr(part, "close", None)
            if close is not None:
                close()
