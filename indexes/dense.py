"""Building the dense index: every passage of a BM25 index folder, encoded.

``build_dense`` encodes the passages of a BM25 index folder's passage store, in store
document order, into ``<index_dir>/dense/embeddings.npy``: float16, L2-normalised, shape
``[n, dim]``, written through a memory map. The text encoded for a passage is
``"title. text"`` (just the text when it has no title), as the bi-encoder reranker sees
it, after the model's document prompt if it declares one (e5: ``"passage: "``, added by
:func:`typed_rag.encoder.encode`; queries get its query prompt). ``dense/manifest.json``
records the model (name and a fingerprint of its files), dim, n, dtypes, max length, the
text shown and how many passages are done; it is rewritten after every chunk, so an
interrupted build resumes at the last finished chunk when run again. With ``ann`` an ANN index of the finished embeddings is
built (or resumed) beside them (:mod:`indexes.ann`).

Searching it is :class:`typed_rag.retrieval.dense.DenseIndex`, which owns the format
constants and the encoder settings used here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

import typed_rag.retrieval.manifest as mf
from indexes.ann import AnnBuildReport, build_ann
from typed_rag.config import Settings
from typed_rag.encoder import embedding_dim, encode, model_fingerprint, prompt_of
from typed_rag.errors import UserError
from typed_rag.retrieval.ann import (
    ANN_FILE,
    ANN_MANIFEST,
    AnnKind,
    dense_identity,
    faiss_module,
)
from typed_rag.retrieval.dense import (
    EMBEDDINGS_FILE,
    FORMAT_VERSION,
    STORED_DTYPE,
    dense_folder,
    load_dense_encoder,
    store_identity,
)
from typed_rag.retrieval.dense_dtype import BATCH_SIZE, MAX_LENGTH, compute_dtype, with_index_dtype
from typed_rag.retrieval.store import PassageStore
from typed_rag.retrieval.text import encoder_text

log = logging.getLogger(__name__)


@dataclass
class DenseBuildReport:
    """What ``build_dense`` did; ``skipped`` when a complete, matching index was kept."""

    out: Path
    skipped: bool = False
    reason: str = ""
    passages: int = 0
    encoded: int = 0  # passages encoded by this run
    resumed_from: int = 0
    dim: int = 0
    seconds: float = 0.0
    passages_per_s: float = 0.0
    ann: AnnBuildReport | None = None  # the ANN index built after the encode (``ann``)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["out"] = str(self.out)
        return d


def _mismatch(old: dict[str, Any] | None, new: dict[str, Any], folder: Path) -> str | None:
    """Why an existing (partial) dense index cannot be continued; None when it can."""
    if old is None:
        return "no dense manifest"
    if not (folder / EMBEDDINGS_FILE).is_file():
        return f"{EMBEDDINGS_FILE} missing"
    for key in ("format_version", "model_fingerprint", "dim", "n", "dtype", "compute_dtype"):
        if old.get(key) != new.get(key):
            return f"{key} changed ({old.get(key)} -> {new.get(key)})"
    for key in ("max_length", "store"):
        if old.get(key) != new.get(key):
            return f"{key} changed"
    return None


def build_dense(
    settings: Settings,
    index_dir: str | Path | None = None,
    *,
    if_missing: bool = False,
    show_progress: bool = True,
    chunk_size: int = 4096,
    on_chunk: Callable[[int], None] | None = None,
    ann: AnnKind = "none",
) -> DenseBuildReport:
    """Encode the passages of the BM25 index in ``index_dir`` (default ``settings.index_dir``).

    An unfinished build with the same model and parameters is continued from its last
    finished chunk; a finished one is kept with ``if_missing`` and rebuilt otherwise.
    ``on_chunk(done)`` is called after each chunk is flushed (progress hooks, tests).
    ``ann`` (``auto``, ``hnsw``, ``ivfpq``; ``none``: the exact scan only, and an ANN
    index left by an earlier build is removed) then builds or resumes the ANN index of the
    finished embeddings (:func:`indexes.ann.build_ann`).
    """
    if ann not in ("auto", "hnsw", "ivfpq", "none"):
        raise UserError(f"--ann must be auto, hnsw, ivfpq or none, not {ann!r}")
    if ann in ("hnsw", "ivfpq"):
        faiss_module()  # before hours of encoding: a UserError naming what to install
    index_dir = Path(index_dir).expanduser() if index_dir is not None else settings.index_dir
    if mf.read_manifest(index_dir) is None:
        raise UserError(
            f"no BM25 index at {index_dir}: the dense index encodes its passage store; "
            f"run `typed-rag index build --dense --out {index_dir}`"
        )
    if chunk_size <= 0:
        raise ValueError("chunk_size must be positive")
    store = PassageStore(index_dir)
    folder = dense_folder(index_dir, settings.retrieval.dense_model)
    t0 = time.perf_counter()
    try:
        old = mf.read_manifest(folder)
        # an existing index keeps its dtype under `auto` (no probe, no rebuild for a new one)
        settings = with_index_dtype(settings, old)
        model, model_dir = load_dense_encoder(settings)
        r = settings.retrieval
        n = len(store)
        dim = embedding_dim(model)
        wanted: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "model": r.dense_model,
            "model_fingerprint": model_fingerprint(model_dir),
            "dim": dim,
            "n": n,
            "dtype": STORED_DTYPE,
            "compute_dtype": compute_dtype(settings),
            "max_length": MAX_LENGTH,
            "text": prompt_of(model, "document") + "title. text",
            "normalized": True,
            "store": store_identity(index_dir, n),
        }
        reason = _mismatch(old, wanted, folder)
        done = 0
        if reason is None and old is not None:
            done = int(old.get("done", 0))
            if done >= n:
                if if_missing:
                    return DenseBuildReport(
                        out=folder,
                        skipped=True,
                        reason="dense index is up to date",
                        passages=n,
                        dim=dim,
                        ann=_build_ann(folder, old, ann, show_progress),
                    )
                done = 0
                reason = "rebuilding a complete index"
        if done == 0:
            log.info("dense build from scratch (%s)", reason)
            emb = _start_over(folder, n, dim)
        else:
            log.info("resuming dense build at passage %d of %d", done, n)
            emb = np.load(folder / EMBEDDINGS_FILE, mmap_mode="r+")
            if emb.shape != (n, dim) or emb.dtype != np.dtype(STORED_DTYPE):
                log.info("%s has shape %s; starting over", EMBEDDINGS_FILE, emb.shape)
                del emb
                done, reason = 0, "embeddings file damaged"
                emb = _start_over(folder, n, dim)
        resumed_from = done
        with tqdm(
            total=n,
            initial=done,
            unit="psg",
            unit_scale=True,
            desc="dense: encode",
            disable=not show_progress,
            smoothing=0.05,
        ) as bar:
            while done < n:
                stop = min(n, done + chunk_size)
                texts = [encoder_text(store.get(i)) for i in range(done, stop)]
                emb[done:stop] = encode(model, texts, BATCH_SIZE, "document").astype(STORED_DTYPE)
                emb.flush()
                done = stop
                mf.write_manifest(
                    folder,
                    {
                        **wanted,
                        "done": done,
                        "complete": done >= n,
                        "updated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    },
                )
                bar.update(stop - bar.n)
                if on_chunk is not None:
                    on_chunk(done)
        del emb
        ann_report = _build_ann(folder, mf.read_manifest(folder) or {}, ann, show_progress)
    finally:
        store.close()
    seconds = time.perf_counter() - t0
    encoded = n - resumed_from
    return DenseBuildReport(
        ann=ann_report,
        out=folder,
        reason=reason or "",
        passages=n,
        encoded=encoded,
        resumed_from=resumed_from,
        dim=dim,
        seconds=seconds,
        passages_per_s=encoded / seconds if seconds > 0 else 0.0,
    )


def _build_ann(
    folder: Path, manifest: dict[str, Any], ann: AnnKind, show_progress: bool
) -> AnnBuildReport:
    embeddings = np.load(folder / EMBEDDINGS_FILE, mmap_mode="r")
    return build_ann(
        folder, embeddings, ann, identity=dense_identity(manifest), show_progress=show_progress
    )


def _start_over(folder: Path, n: int, dim: int) -> np.memmap:
    """An empty embeddings file; the manifest goes first, so a crash never looks resumable."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / mf.MANIFEST_FILE).unlink(missing_ok=True)
    for name in (ANN_FILE, ANN_MANIFEST):  # it described the embeddings being replaced
        (folder / name).unlink(missing_ok=True)
    return np.lib.format.open_memmap(
        folder / EMBEDDINGS_FILE, mode="w+", dtype=STORED_DTYPE, shape=(n, dim)
    )
