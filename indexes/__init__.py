"""Corpus reading, BM25 index building and the BM25 retriever.

``build_index(settings, ...)`` writes an index folder; ``load_retriever(settings)``
opens it memory-mapped as a :class:`BM25Index` with ``search(queries, k)``.
"""

from __future__ import annotations

from indexes.bm25 import BM25Index, load_retriever
from indexes.build import BuildReport, build_index
from indexes.corpus import CorpusReader, CorpusRow, read_corpus

__all__ = [
    "BM25Index",
    "BuildReport",
    "CorpusReader",
    "CorpusRow",
    "build_index",
    "load_retriever",
    "read_corpus",
]
