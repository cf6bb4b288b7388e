"""``open_retriever``: the retriever that ``retrieval.kind`` names, opened from the index folder.

``bm25`` is the BM25 index itself; ``dense`` the exact dense index in ``<index_dir>/dense``;
``hybrid`` both, fused by reciprocal rank fusion; ``auto`` hybrid where the folder holds a
finished dense index of ``retrieval.dense_model`` and BM25 otherwise, so one setting serves
every collection. :func:`~typed_rag.retrieval.reranked.with_reranking` wraps any of them so
every query is reranked (``retrieval.rerank_depth`` > 0).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

import typed_rag.retrieval.manifest as mf
from typed_rag.config import Settings
from typed_rag.retrieval.bm25 import BM25Index
from typed_rag.retrieval.dense import DenseIndex, dense_folder
from typed_rag.retrieval.fusion import HybridRetriever

log = logging.getLogger(__name__)
Served = Literal["bm25", "dense", "hybrid"]


def dense_missing(settings: Settings, folder: str | Path | None = None) -> str | None:
    """Why ``folder`` has no finished dense index of ``retrieval.dense_model`` (None: it has
    one), from its manifest alone: no model is loaded to decide."""
    dense = dense_folder(
        Path(folder) if folder is not None else settings.index_dir, settings.retrieval.dense_model
    )
    manifest = mf.read_manifest(dense)
    if manifest is None:
        return f"no dense index in {dense}"
    if not manifest.get("complete"):
        return f"the dense index in {dense} is unfinished"
    if manifest.get("model") != settings.retrieval.dense_model:
        return (
            f"the dense index in {dense} is of {manifest.get('model')!r}, not of "
            f"retrieval.dense_model {settings.retrieval.dense_model!r}"
        )
    return None


def served_kind(settings: Settings, folder: str | Path | None = None) -> Served:
    """``retrieval.kind`` with ``auto`` resolved for ``folder``: the retriever that answers."""
    kind = settings.retrieval.kind
    if kind != "auto":
        return kind
    return "hybrid" if dense_missing(settings, folder) is None else "bm25"


def open_retriever(
    settings: Settings, folder: str | Path | None = None
) -> BM25Index | DenseIndex | HybridRetriever:
    """The retriever of ``settings.retrieval.kind`` over ``folder`` (default: settings.index_dir).

    A missing dense index raises :class:`UserError` naming the folder and the build command
    (with ``auto`` it means BM25 alone, and the log says why).
    """
    kind = served_kind(settings, folder)
    if kind == "dense":
        return DenseIndex.from_settings(settings, folder)
    bm25 = BM25Index.from_settings(settings, folder)
    if kind == "bm25":
        if settings.retrieval.kind == "auto":
            log.info("retrieval.kind=auto: BM25 alone (%s)", dense_missing(settings, folder))
        return bm25
    return HybridRetriever(bm25, DenseIndex.from_settings(settings, folder))
