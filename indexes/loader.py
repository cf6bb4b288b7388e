"""``load_retriever``: the retriever that ``retrieval.kind`` names, opened from the index folder.

``bm25`` is the BM25 index itself; ``dense`` the exact dense index in
``<index_dir>/dense``; ``hybrid`` both, fused by reciprocal rank fusion.
"""

from __future__ import annotations

from pathlib import Path

from indexes.bm25 import BM25Index
from indexes.bm25 import load_retriever as load_bm25
from indexes.dense import DenseIndex
from indexes.fusion import HybridRetriever
from typed_rag.config import Settings


def load_retriever(
    settings: Settings, folder: str | Path | None = None
) -> BM25Index | DenseIndex | HybridRetriever:
    """The retriever of ``settings.retrieval.kind`` over ``folder`` (default: settings.index_dir).

    A missing dense index raises :class:`UserError` naming the folder and the build command.
    """
    r = settings.retrieval
    if r.kind == "bm25":
        return load_bm25(settings, folder)
    dense = DenseIndex.from_settings(settings, folder)
    if r.kind == "dense":
        return dense
    return HybridRetriever(load_bm25(settings, folder), dense, r.rrf_k, r.fusion_depth)
