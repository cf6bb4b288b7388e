"""The reranker interface: score (query, passage) pairs and reorder passages."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import replace

from typed_rag.retrieval import Passage


class Reranker(abc.ABC):
    name: str = "reranker"

    @abc.abstractmethod
    def score(self, query: str, passages: Sequence[Passage]) -> list[float]:
        """Relevance of each passage to ``query``; higher is better."""

    def rerank(self, query: str, passages: Sequence[Passage], top_k: int) -> list[Passage]:
        """The ``top_k`` passages by reranker score, best first, with ``rerank_score`` set."""
        if not passages:
            return []
        scores = self.score(query, passages)
        scored = [replace(p, rerank_score=float(s)) for p, s in zip(passages, scores, strict=True)]
        scored.sort(key=lambda p: p.rerank_score, reverse=True)  # type: ignore[arg-type,return-value]
        return scored[:top_k]

    def score_many(
        self, queries: Sequence[str], pools: Sequence[Sequence[Passage]]
    ) -> list[list[float]]:
        """``score`` for each (query, pool) pair; rerankers that can batch them override it."""
        return [self.score(q, pool) for q, pool in zip(queries, pools, strict=True)]
