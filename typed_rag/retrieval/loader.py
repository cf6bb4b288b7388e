"""``open_retriever``: the retriever that ``retrieval.kind`` names, opened from the index folder.

``bm25`` is the BM25 index itself (sharded or not: :mod:`typed_rag.retrieval.sharded`);
``dense`` the exact dense index in ``<index_dir>/dense``;
``hybrid`` BM25 and the dense index of ``retrieval.dense_model`` (and of each of
``retrieval.fuse_models``), fused by reciprocal rank fusion; ``auto`` hybrid where the folder
holds all of those dense indexes finished and BM25 otherwise, so one setting serves every
collection. :func:`~typed_rag.retrieval.reranked.with_reranking` wraps any of them so
every query is reranked (``retrieval.rerank_depth`` > 0).
"""

from __future__ import annotations

import logging
from pathlib import Path

import typed_rag.retrieval.manifest as mf
from typed_rag.config import Settings
from typed_rag.config_sections import Served as Served
from typed_rag.retrieval.bm25 import BM25Index
from typed_rag.retrieval.dense import DenseIndex, dense_folder
from typed_rag.retrieval.fusion import HybridRetriever
from typed_rag.retrieval.sharded import ShardedBM25Index, open_bm25

log = logging.getLogger(__name__)


def dense_models(settings: Settings, kind: str | None = None) -> list[str]:
    """The dense encoders a retrieval ``kind`` (default ``retrieval.kind``) searches:
    ``dense_model`` alone for ``dense``; for hybrid (and ``auto``, ``bm25`` built with dense
    indexes) ``dense_model`` then ``fuse_models``. The one place that decides it."""
    r = settings.retrieval
    if (kind or r.kind) == "dense":
        return [r.dense_model]
    return [r.dense_model] + [m for m in r.fuse_models if m != r.dense_model]


def dense_missing(settings: Settings, folder: str | Path | None = None) -> str | None:
    """Why ``folder`` lacks a finished dense index of an encoder hybrid search fuses (None:
    it has them all), from the manifests alone: no model is loaded to decide."""
    index_dir = Path(folder) if folder is not None else settings.index_dir
    for model in dense_models(settings, "hybrid"):
        dense = dense_folder(index_dir, model)
        manifest = mf.read_manifest(dense)
        if manifest is None:
            return f"no dense index in {dense}"
        if not manifest.get("complete"):
            return f"the dense index in {dense} is unfinished"
        if manifest.get("model") != model:
            return f"the dense index in {dense} is of {manifest.get('model')!r}, not of {model!r}"
    return None


def served_kind(settings: Settings, folder: str | Path | None = None) -> Served:
    """``retrieval.kind`` in force for ``folder``: the retriever that answers (resolved
    settings hold it; declared ones apply the rule, ``RetrievalSettings.kind_over``)."""
    return settings.retrieval.kind_over(lambda: dense_missing(settings, folder))


def open_retriever(
    settings: Settings, folder: str | Path | None = None
) -> BM25Index | ShardedBM25Index | DenseIndex | HybridRetriever:
    """The retriever of ``settings.retrieval.kind`` over ``folder`` (default: settings.index_dir).

    A missing dense index raises :class:`UserError` naming the folder and the build command
    (with ``auto`` it means BM25 alone, and the log says why).
    """
    kind = served_kind(settings, folder)
    if kind == "dense":
        return DenseIndex.from_settings(settings, folder)
    bm25 = open_bm25(settings, folder)
    if kind == "bm25":
        if settings.declared().retrieval.kind == "auto":
            log.info("retrieval.kind=auto: BM25 alone (%s)", dense_missing(settings, folder))
        return bm25
    dense = [
        DenseIndex.from_settings(settings.with_section("retrieval", dense_model=m), folder)
        for m in dense_models(settings)
    ]
    return HybridRetriever(bm25, dense)
