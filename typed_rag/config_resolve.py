"""``resolve_settings``: every ``auto`` (and unset default) turned into its value, once.

Why: ``auto`` means "decide from this machine and this index folder" (the CPU's cores and
bf16, whether numba is installed, which dense indexes the folder holds finished). Decided
once when the system is built, every stage reads the same concrete value, and
``typed-rag config show --resolved`` and ``GET /v1/config`` can say what is in force.

What each ``auto`` stands for is declared beside its setting
(:mod:`typed_rag.config_sections`, as rules that take the facts as arguments); the facts
come from small helpers (:mod:`typed_rag.cpuinfo`, the index folder's manifests, the
dense encoder's measured dtype). The settings as declared stay inside the resolved copy
(:meth:`~typed_rag.config.Settings.declared`): a collection is resolved again for its own
folder, and an evaluation's fingerprint records the declared values, so stored runs stay
comparable across machines.

Left as declared: ``method.*`` options (unset: the value of ``method.profile``, which a
variant may switch), ``reranker.device`` (unset: FlagEmbedding's choice),
``engine.server_bin`` (found when llama-server starts) and a vLLM ``engine.dtype`` of
``auto``, vLLM's own value, which it decides from the model's config as it loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from typed_rag.config import Settings
from typed_rag.config_sections import NFCATS_CHECKPOINT, DenseDtype, Served
from typed_rag.cpuinfo import llama_threads
from typed_rag.retrieval.bm25 import numba_available
from typed_rag.retrieval.dense import dense_folder
from typed_rag.retrieval.dense_dtype import compute_dtype, with_index_dtype
from typed_rag.retrieval.loader import dense_missing
from typed_rag.retrieval.manifest import read_manifest

S = TypeVar("S", bound=Settings)
RerankerKind = str  # "bge" | "biencoder" | "none": what build_reranker made


def resolve_settings(settings: S) -> S:
    """A copy of ``settings`` with every ``auto`` replaced by the value in force here, for
    the index folder ``settings.index_dir``; an explicit value is never changed. Resolved
    settings come back as they are, so calling it again costs nothing."""
    if settings.resolved:
        return settings
    r, rr, e, docs = settings.retrieval, settings.reranker, settings.engine, settings.documents
    kind = r.kind_over(lambda: dense_missing(settings))
    retrieval = r.model_copy(
        update={
            "index_dir": settings.index_dir,
            "backend": r.backend_with(numba_available),
            "kind": kind,
            "dense_dtype": _dense_dtype(settings, kind),
            "rerank_depth": r.depth_over(kind),
            # the floor follows the reranker asked for (declared), whichever one loads
            "rerank_floor": r.floor_for(rr),
        }
    )
    engine = e.model_copy(
        update={
            "n_threads": e.threads_with(llama_threads()),
            "dtype": e.dtype_in_force(),
            "model_source": ",".join(e.sources()),
        }
    )
    out = settings.model_copy(
        update={
            "retrieval": retrieval,
            "reranker": rr.model_copy(update={"kind": rr.kind_in_force()}),
            "classifier": settings.classifier.model_copy(update={"path": _classifier(settings)}),
            "engine": engine,
            "documents": docs.model_copy(
                update={"uploads": docs.uploads_with(settings.server.api_key)}
            ),
        }
    )
    out._declared = settings
    return out


def with_built_reranker(settings: S, kind: RerankerKind) -> S:
    """``settings`` saying which reranker was built: an ``auto`` that asked for BGE gets
    the bi-encoder where BGE does not load (:func:`typed_rag.rerank.build_reranker`)."""
    if not settings.resolved or settings.reranker.kind == kind:
        return settings
    reranker = settings.reranker.model_copy(update={"kind": kind})
    return settings.model_copy(update={"reranker": reranker})  # keeps the declared twin


def _dense_dtype(settings: Settings, kind: Served) -> DenseDtype:
    """The dense encoder's compute dtype: an existing index keeps the one it was encoded in;
    else the device's rule (a CPU with native bf16 times both once). Where no dense index
    is searched the encoder never runs, so nothing is measured: float32."""
    r = settings.retrieval
    built = with_index_dtype(
        settings, read_manifest(dense_folder(settings.index_dir, r.dense_model))
    )
    if built.retrieval.dense_dtype != "auto":
        return built.retrieval.dense_dtype
    if kind == "bm25":
        return "float32"
    return compute_dtype(settings)


def _classifier(settings: Settings) -> Path:
    """The trained classifier's folder, or for ``nfcats`` its checkpoint (folder or Hub id)."""
    c = settings.classifier
    if c.path is not None:
        return c.path
    return Path(NFCATS_CHECKPOINT) if c.kind == "nfcats" else settings.classifier_dir
