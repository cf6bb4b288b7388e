"""Offline index work: corpus reading and download, index building, retrieval evaluation.

``build_index(settings, ...)`` writes a BM25 index folder and ``build_dense`` adds
passage embeddings to it. Searching those folders is :mod:`typed_rag.retrieval`
(``open_retriever(settings)``); this package may import the core, never the reverse.
"""

from __future__ import annotations

from indexes.build import BuildReport, build_index
from indexes.corpus import CorpusReader, CorpusRow, read_corpus
from indexes.dense import DenseBuildReport, build_dense

__all__ = [
    "BuildReport",
    "CorpusReader",
    "CorpusRow",
    "DenseBuildReport",
    "build_dense",
    "build_index",
    "read_corpus",
]
