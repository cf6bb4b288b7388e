"""Retrieval for one question: the retriever's top passages per query, and pool reranking.

Which passages are reranked is decided in :mod:`typed_rag.retrieval.reranked`: every
query through the retriever it wraps (``retrieval.rerank_depth``), and the pools that
COMPARISON, EXPERIENCE and the pooled fallback rerank against one query
(:func:`~typed_rag.retrieval.reranked.rerank_pool`). This part runs both off the event
loop, times them and records what they could not find.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from typed_rag.constraints import named_in
from typed_rag.pipelines.trace import Trace
from typed_rag.retrieval import Passage, Reranker, Retriever
from typed_rag.retrieval.reranked import rerank_pool


@dataclass
class Search:
    """The question's retriever (None: answered without passages) and the reranker of its
    pools (None: pools keep their order)."""

    trace: Trace
    retriever: Retriever | None = None
    reranker: Reranker | None = None

    async def retrieve(
        self, queries: Sequence[str], k: int, exclude: Sequence[str] = ()
    ) -> list[list[Passage]]:
        """Top-``k`` per query, off the event loop (BM25 is CPU-bound).

        With ``exclude`` (subtopics the asker does not want), twice as many are fetched and
        the passages that name one go last, so they are only used when nothing else was found.
        """
        if self.retriever is None:
            return [[] for _ in queries]
        exclude = list(exclude)
        depth = 2 * k if exclude else k
        with self.trace.timed("retrieve"):
            hits = await asyncio.to_thread(self.retriever.search, list(queries), depth)
        floor = getattr(self.retriever, "floor", None)  # every query reranked, with a floor
        for query, ranked in zip(queries, hits, strict=True):
            if floor is not None and not ranked:
                self.trace.fallback(
                    f"retrieval: no passage for {query!r} reaches the floor {floor:g}"
                )
        if not exclude:
            return hits
        out = []
        for ranked in hits:
            named = [bool(named_in(f"{p.title} {p.text}", exclude)) for p in ranked]
            order = sorted(range(len(ranked)), key=lambda i: named[i])  # stable
            out.append([ranked[i] for i in order][:k])
        return out

    async def rerank(self, query: str, passages: Sequence[Passage], k: int) -> list[Passage]:
        """A pool's top ``k`` reranked against ``query``; without a reranker, its order kept."""
        if self.reranker is None or not passages:
            return list(passages)[:k]
        with self.trace.timed("rerank"):
            return await asyncio.to_thread(rerank_pool, self.reranker, query, passages, k)
