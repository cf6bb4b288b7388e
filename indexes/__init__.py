"""Corpus reading, index building and the retrievers.

``build_index(settings, ...)`` writes a BM25 index folder and ``build_dense`` adds
passage embeddings to it; ``load_retriever(settings)`` opens it memory-mapped as the
retriever ``retrieval.kind`` names (:class:`BM25Index`, :class:`DenseIndex` or the
RRF-fused :class:`HybridRetriever`), each with ``search(queries, k)``.
"""

from __future__ import annotations

from indexes.bm25 import BM25Index
from indexes.build import BuildReport, build_index
from indexes.corpus import CorpusReader, CorpusRow, read_corpus
from indexes.dense import DenseBuildReport, DenseIndex, build_dense
from indexes.fusion import HybridRetriever, reciprocal_rank_fusion
from indexes.loader import load_retriever

__all__ = [
    "BM25Index",
    "BuildReport",
    "CorpusReader",
    "CorpusRow",
    "DenseBuildReport",
    "DenseIndex",
    "HybridRetriever",
    "build_dense",
    "build_index",
    "load_retriever",
    "read_corpus",
    "reciprocal_rank_fusion",
]
