"""Every query reranked: BM25's top ``depth`` candidates, reordered, cut to ``k``, floored.

Wrapping the retriever (rather than each pipeline) reranks every query a pipeline
issues -- the question, each sub-query, keyword and perspective -- and a round's
queries are scored in one batched call (``Reranker.score_many``). Two orders (the
settings use ``rrf``, :data:`ORDER`; ``index eval`` specs may name either):

- ``rerank``: the reranker's score alone;
- ``rrf``: reciprocal rank fusion of the first-stage rank and the reranker's rank
  (``1/(rrf_k + r_first) + 1/(rrf_k + r_rerank)``), which keeps BM25's exact-match
  evidence when the reranker is weak.

``floor``: passages whose reranker score is below it are not returned, so a query can
come back with fewer than ``k`` passages, or none (pipelines then answer that query
without passages and record it in the trace).

:func:`with_reranking` wraps a retriever as the settings ask (``retrieval.rerank_depth``).

This module decides every reranking of the request path. Besides every query (above),
:func:`rerank_pool` reorders a pool (several queries' lists merged, or one wide list)
against one query: COMPARISON's (the items' passages against the question, the paper),
EXPERIENCE's (a wide pool against the keywords, the paper's 3.3) and the pooled fallback
when every sub-answer said nothing (against the question). With the defaults (BM25,
``rerank_depth`` auto) those pools are reranked twice: each query's passages against
that query here (RRF, floored), then the pool against another query by the reranker's
score alone. The two score different (query, passage) pairs, and the first one's floor
decides which passages reach the pool, so neither is redundant: dropping either would
change the passages shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

from typed_rag.config import Settings
from typed_rag.retrieval.base import Passage, Reranker, Retriever
from typed_rag.retrieval.fusion import RRF_K
from typed_rag.retrieval.loader import served_kind

Order = Literal["rerank", "rrf"]
# The order every query is reranked in when the settings ask for it: the reranker's order
# alone lost R@1 against BM25 (0.184 vs 0.197, bm25+minilm-rerank@20; docs/experiments.md).
ORDER: Order = "rrf"


class RerankedRetriever:
    """``search(queries, k)``: first-stage top ``depth`` per query, reranked, best ``k``."""

    def __init__(
        self,
        base: Retriever,
        reranker: Reranker,
        depth: int = 50,
        order: Order = "rrf",
        rrf_k: int = RRF_K,
        floor: float | None = None,
    ) -> None:
        if depth < 1:
            raise ValueError(f"rerank depth must be at least 1, got {depth}")
        if order not in ("rerank", "rrf"):
            raise ValueError(f"rerank order must be 'rerank' or 'rrf', got {order!r}")
        self.base = base
        self.reranker = reranker
        self.depth = depth
        self.order = order
        self.rrf_k = rrf_k
        self.floor = floor
        self.folder: Path | None = getattr(base, "folder", None)

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """Top-``k`` reranked passages per query (fewer under the floor), best first."""
        if isinstance(queries, str):
            raise TypeError("search() takes a sequence of queries, not one string")
        if k <= 0 or not queries:
            return [[] for _ in queries]
        pools = self.base.search(list(queries), max(self.depth, k))
        # Only the top ``depth`` are reranked; when ``k`` is larger (an evaluation asking
        # for 100) the rest follow in first-stage order, so depth alone sets the cost.
        # Under a floor they are left out: they have no reranker score to pass it.
        heads = [pool[: self.depth] for pool in pools]
        scores = self.reranker.score_many(list(queries), heads)
        out = []
        for head, pool, s in zip(heads, pools, scores, strict=True):
            tail = [] if self.floor is not None else list(pool[self.depth :])
            out.append((self._order(head, s) + tail)[:k])
        return out

    def _order(self, pool: Sequence[Passage], scores: Sequence[float]) -> list[Passage]:
        scored = [replace(p, rerank_score=float(s)) for p, s in zip(pool, scores, strict=True)]
        by_rerank = sorted(range(len(scored)), key=lambda i: -scores[i])  # stable: ties by BM25
        if self.order == "rrf":
            rerank_rank = {i: r for r, i in enumerate(by_rerank, 1)}
            fused = {
                i: 1 / (self.rrf_k + i + 1) + 1 / (self.rrf_k + rerank_rank[i]) for i in rerank_rank
            }
            ranked = sorted(fused, key=lambda i: (-fused[i], i))
        else:
            ranked = by_rerank
        out = [scored[i] for i in ranked]
        if self.floor is not None:
            out = [p for p in out if (p.rerank_score or 0.0) >= self.floor]
        return out

    def close(self) -> None:
        close = getattr(self.base, "close", None)
        if close is not None:
            close()


def with_reranking(
    settings: Settings, retriever: Retriever, reranker: Reranker | None
) -> Retriever:
    """``retriever`` with every query reranked, when ``retrieval.rerank_depth`` asks for it."""
    depth = rerank_depth(settings)
    if depth <= 0 or reranker is None:
        return retriever
    floor = settings.retrieval.floor_for(settings.reranker)
    return RerankedRetriever(retriever, reranker, depth, ORDER, floor=floor)


def rerank_depth(settings: Settings) -> int:
    """How deep every query of ``open_retriever(settings)`` is reranked (0: not at all)."""
    return settings.retrieval.depth_over(served_kind(settings))


def rerank_pool(
    reranker: Reranker, query: str, passages: Sequence[Passage], k: int
) -> list[Passage]:
    """A pool's top ``k`` by ``reranker``'s score against ``query``: its score alone, not
    fused with first-stage ranks, which were ranks for other queries."""
    return reranker.rerank(query, list(passages), k)
