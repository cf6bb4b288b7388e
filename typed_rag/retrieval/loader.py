"""``open_retriever``: the retriever that ``retrieval.kind`` names, opened from the index folder.

``bm25`` is the BM25 index itself; ``dense`` the exact dense index in ``<index_dir>/dense``; ``hybrid`` both,
fused by reciprocal rank fusion. :func:`~typed_rag.retrieval.reranked.with_reranking`
wraps any of them so every query is reranked (``retrieval.rerank_depth`` > 0).
"""

from __future__ import annotations

from pathlib import Path

from typed_rag.config import Settings
from typed_rag.retrieval.bm25 import BM25Index
from typed_rag.retrieval.dense import DenseIndex
from typed_rag.retrieval.fusion import HybridRetriever


def open_retriever(
    settings: Settings, folder: str | Path | None = None
) -> BM25Index | DenseIndex | HybridRetriever:
    """The retriever of ``settings.retrieval.kind`` over ``folder`` (default: settings.index_dir).

    A missing dense index raises :class:`UserError` naming the folder and the build command.
    """
    r = settings.retrieval
    if r.kind == "dense":
        return DenseIndex.from_settings(settings, folder)
    bm25 = BM25Index.from_settings(settings, folder)
    if r.kind == "bm25":
        return bm25
    return HybridRetriever(bm25, DenseIndex.from_settings(settings, folder))
