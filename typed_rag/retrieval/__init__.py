"""Retrieval: the interfaces pipelines see and the searches behind them.

- :mod:`~typed_rag.retrieval.base`: :class:`Passage`, the :class:`Retriever` protocol
  (``search(queries, k)``) and the :class:`Reranker` interface;
- :mod:`~typed_rag.retrieval.bm25` (with :mod:`~typed_rag.retrieval.rescore`),
  :mod:`~typed_rag.retrieval.dense` and
  :mod:`~typed_rag.retrieval.fusion`: the searches over an index folder, whose files are
  described by :mod:`~typed_rag.retrieval.store`, ``vocab``, ``manifest`` and ``analyzer``;
- :func:`open_retriever` opens the one ``retrieval.kind`` names and :func:`with_reranking`
  reranks its every query.

Building the folders is offline work and lives in the ``indexes`` package.
"""

from __future__ import annotations

from typed_rag.retrieval.base import Passage, Reranker, Retriever
from typed_rag.retrieval.bm25 import BM25Index
from typed_rag.retrieval.dense import DenseIndex
from typed_rag.retrieval.fusion import HybridRetriever, reciprocal_rank_fusion
from typed_rag.retrieval.loader import open_retriever
from typed_rag.retrieval.reranked import RerankedRetriever, with_reranking

__all__ = [
    "BM25Index",
    "DenseIndex",
    "HybridRetriever",
    "Passage",
    "RerankedRetriever",
    "Reranker",
    "Retriever",
    "open_retriever",
    "reciprocal_rank_fusion",
    "with_reranking",
]
