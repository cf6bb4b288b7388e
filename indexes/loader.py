"""``load_retriever``: the retriever that ``retrieval.kind`` names, opened from the index folder.

``bm25`` is the BM25 index itself (with RM3 expansion when ``retrieval.expansion`` is
``rm3``); ``dense`` the exact dense index in ``<index_dir>/dense``; ``hybrid`` both,
fused by reciprocal rank fusion. :func:`with_reranking` wraps any of them so every
query is reranked (``retrieval.rerank_depth`` > 0).
"""

from __future__ import annotations

from pathlib import Path

from indexes.bm25 import BM25Index
from indexes.bm25 import load_retriever as load_bm25
from indexes.dense import DenseIndex
from indexes.fusion import HybridRetriever
from indexes.prf import RM3Retriever
from typed_rag.config import Settings
from typed_rag.rerank.base import Reranker
from typed_rag.rerank.retriever import RerankedRetriever
from typed_rag.retrieval import Retriever


def load_retriever(
    settings: Settings, folder: str | Path | None = None
) -> BM25Index | RM3Retriever | DenseIndex | HybridRetriever:
    """The retriever of ``settings.retrieval.kind`` over ``folder`` (default: settings.index_dir).

    A missing dense index raises :class:`UserError` naming the folder and the build command.
    """
    r = settings.retrieval
    if r.kind == "dense":
        return DenseIndex.from_settings(settings, folder)
    bm25: BM25Index | RM3Retriever = load_bm25(settings, folder)
    if r.expansion == "rm3":
        bm25 = RM3Retriever(bm25, r.rm3_fb_docs, r.rm3_fb_terms, r.rm3_orig_weight)
    if r.kind == "bm25":
        return bm25
    dense = DenseIndex.from_settings(settings, folder)
    return HybridRetriever(bm25, dense, r.rrf_k, r.fusion_depth)


def with_reranking(
    settings: Settings, retriever: Retriever, reranker: Reranker | None
) -> Retriever:
    """``retriever`` with every query reranked, when ``retrieval.rerank_depth`` asks for it."""
    r = settings.retrieval
    if r.rerank_depth <= 0 or reranker is None:
        return retriever
    return RerankedRetriever(
        retriever, reranker, r.rerank_depth, r.rerank_order, r.rrf_k, r.rerank_floor
    )
