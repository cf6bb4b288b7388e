"""Passages and the retriever interface that pipelines see.

The BM25 implementation lives in :mod:`indexes`; pipelines only need
``search(queries, k)`` returning passages with text and title.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass
class Passage:
    """One retrieved passage. ``score`` is the retriever's; ``rerank_score`` the reranker's."""

    id: str
    title: str
    text: str
    score: float = 0.0
    rerank_score: float | None = None


class Retriever(Protocol):
    """Anything that maps a batch of queries to ranked passages."""

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """Top-``k`` passages for each query, best first."""
        ...
