"""The interfaces of the retrieval layer: passages, retrievers and rerankers.

Pipelines only need ``search(queries, k)`` returning passages with text and title, and a
reranker's ``score``; the implementations live beside this module (BM25, dense, fusion)
and in :mod:`typed_rag.rerank` (the reranker models).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol


@dataclass
class Passage:
    """One retrieved passage. ``score`` is the retriever's; ``rerank_score`` the reranker's.

    ``source`` (file path), ``page`` (1-based, PDF) and ``section`` are set for passages of
    a document collection (:mod:`typed_rag.retrieval.collections`), None for Wikipedia's.
    """

    id: str
    title: str
    text: str
    score: float = 0.0
    rerank_score: float | None = None
    source: str | None = None
    page: int | None = None
    section: str | None = None


class Retriever(Protocol):
    """Anything that maps a batch of queries to ranked passages."""

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """Top-``k`` passages for each query, best first."""
        ...


def unknown_words(retriever: object, text: str) -> list[str]:
    """The words of ``text`` the lexical index under ``retriever`` never saw ([] where there
    is none to ask: a dense-only index cannot tell)."""
    seen: set[int] = set()
    while retriever is not None and id(retriever) not in seen:
        seen.add(id(retriever))
        ask = getattr(retriever, "unknown_words", None)
        if ask is not None:
            return list(ask(text))
        retriever = getattr(retriever, "base", None) or getattr(retriever, "bm25", None)
    return []


def rerank_batch_size(device: str | None) -> int:
    """(query, passage) pairs or passages per reranker forward pass: 64 on a CUDA device
    (the GPU profile's BGE setting), 32 elsewhere, where a bigger batch only costs memory."""
    return 64 if (device or "cpu").startswith("cuda") else 32


class Reranker(abc.ABC):
    """Scores (query, passage) pairs and reorders passages by that score."""

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
