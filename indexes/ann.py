"""Building the ANN index of a dense index (``index build --dense --ann KIND``), resumably.

The rows of ``embeddings.npy`` (float16, L2-normalised) are added to a FAISS index in
chunks; after every ``checkpoint`` rows the index is written to ``ann.faiss`` (through a
temporary file and a rename) and ``ann.json`` records how many rows it holds, so a killed
build resumes from the last checkpoint, as the dense encode does. IVF-PQ is trained
first (on a seeded sample of at most 256 rows a list, at least 40) and the trained, empty
index is the first checkpoint. What each kind is and how it is searched:
:mod:`typed_rag.retrieval.ann`.

``auto`` (:func:`typed_rag.retrieval.ann.choose_kind`) keeps the exact scan below
``EXACT_BELOW`` rows and, where faiss is not installed, says so and keeps the exact scan;
``hnsw`` and ``ivfpq`` without faiss are an error naming the package to install.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from typed_rag.retrieval.ann import (
    ANN_FILE,
    ANN_FORMAT,
    ANN_MANIFEST,
    HNSW_PARAMS,
    INSTALL_HINT,
    IVFPQ_PARAMS,
    AnnKind,
    choose_kind,
    faiss_available,
    faiss_module,
    ivf_lists,
    read_ann_manifest,
)

log = logging.getLogger(__name__)


@dataclass
class AnnBuildReport:
    kind: str  # what was built: hnsw, ivfpq or none (the exact scan)
    reason: str = ""
    rows: int = 0
    added: int = 0  # rows added by this run
    resumed_from: int = 0
    seconds: float = 0.0
    train_s: float = 0.0
    params: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_ann(
    folder: Path,
    embeddings: np.ndarray,
    kind: AnnKind,
    *,
    identity: dict[str, Any] | None = None,
    params: dict[str, int] | None = None,
    threads: int | None = None,
    checkpoint: int | None = None,
    show_progress: bool = True,
    on_chunk: Callable[[int], None] | None = None,
    seed: int = 1234,
) -> AnnBuildReport:
    """Build (or resume) the ANN index of ``embeddings`` (rows x dim) in ``folder``.

    ``identity`` (what the ANN manifest records of the dense index, e.g.
    :func:`typed_rag.retrieval.ann.dense_identity`) and ``params`` (build and search
    parameters over the defaults of the kind) must match for a partial build to be
    continued; otherwise it starts over. A complete matching index is kept.
    """
    n, dim = int(embeddings.shape[0]), int(embeddings.shape[1])
    chosen = choose_kind(kind, n)
    if kind == "auto" and chosen != "none" and not faiss_available():
        log.warning("--ann auto: faiss is not installed, keeping the exact scan (%s)", INSTALL_HINT)
        chosen = "none"
        reason = f"faiss not installed ({INSTALL_HINT})"
    elif chosen == "none":
        reason = "exact scan" + (f" (auto: {n:,} rows)" if kind == "auto" else "")
    else:
        reason = ""
    if chosen == "none":
        for name in (ANN_FILE, ANN_MANIFEST):
            (folder / name).unlink(missing_ok=True)
        return AnnBuildReport(kind="none", reason=reason, rows=n)

    faiss = faiss_module()  # a UserError naming the package when it is missing
    if threads:
        faiss.omp_set_num_threads(int(threads))
    defaults = HNSW_PARAMS if chosen == "hnsw" else {**IVFPQ_PARAMS, "nlist": ivf_lists(n)}
    full = {**defaults, **(params or {})}
    build_keys = ("M", "ef_construction") if chosen == "hnsw" else ("nlist", "pq_m", "pq_bits")
    search_keys = ("ef_search", "refine") if chosen == "hnsw" else ("nprobe", "refine")
    wanted = {
        "format_version": ANN_FORMAT,
        "kind": chosen,
        "n": n,
        "dim": dim,
        "build": {key: int(full[key]) for key in build_keys},
        "dense": identity,
    }
    search = {key: int(full[key]) for key in search_keys}
    old = read_ann_manifest(folder)
    done = 0
    t0 = time.perf_counter()
    train_s = 0.0
    if (
        old is not None
        and (folder / ANN_FILE).is_file()
        and {key: old.get(key) for key in wanted} == wanted
    ):
        if old.get("complete"):
            if old.get("search") != search:  # search parameters only: no rebuild
                _write_manifest(folder, {**old, "search": search})
            return AnnBuildReport(kind=chosen, reason="up to date", rows=n, params=full)
        index = faiss.read_index(str(folder / ANN_FILE))
        done = int(index.ntotal)
        log.info("resuming the %s build at row %d of %d", chosen, done, n)
    else:
        (folder / ANN_MANIFEST).unlink(missing_ok=True)
        index = _new_index(faiss, chosen, dim, full)
        if chosen == "ivfpq":
            t = time.perf_counter()
            _train(index, embeddings, int(full["nlist"]), seed)
            train_s = time.perf_counter() - t
        _checkpoint(faiss, folder, index, {**wanted, "search": search}, done, n)
    resumed_from = done
    step = checkpoint or max(50_000, -(-n // 10))
    chunk = 20_000
    with tqdm(
        total=n,
        initial=done,
        unit="row",
        unit_scale=True,
        desc=f"ann: {chosen}",
        disable=not show_progress,
    ) as bar:
        next_save = done + step
        while done < n:
            stop = min(n, done + chunk, next_save)
            index.add(np.ascontiguousarray(embeddings[done:stop], dtype=np.float32))
            bar.update(stop - done)
            done = stop
            if done >= next_save or done >= n:
                _checkpoint(faiss, folder, index, {**wanted, "search": search}, done, n)
                next_save = done + step
                if on_chunk is not None:
                    on_chunk(done)
    if not (read_ann_manifest(folder) or {}).get("complete"):  # killed after the last write
        _checkpoint(faiss, folder, index, {**wanted, "search": search}, done, n)
    return AnnBuildReport(
        kind=chosen,
        rows=n,
        added=n - resumed_from,
        resumed_from=resumed_from,
        seconds=time.perf_counter() - t0,
        train_s=train_s,
        params=full,
    )


def _new_index(faiss: Any, kind: str, dim: int, p: dict[str, int]) -> Any:
    ip = faiss.METRIC_INNER_PRODUCT
    if kind == "hnsw":
        index = faiss.IndexHNSWSQ(dim, faiss.ScalarQuantizer.QT_fp16, int(p["M"]), ip)
        index.hnsw.efConstruction = int(p["ef_construction"])
        return index
    if dim % int(p["pq_m"]):
        raise ValueError(f"pq_m={p['pq_m']} must divide the dimension {dim}")
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFPQ(quantizer, dim, int(p["nlist"]), int(p["pq_m"]), int(p["pq_bits"]), ip)
    index.own_fields = True
    quantizer.this.disown()  # the IVF index owns (and frees) its quantizer
    return index


def _train(index: Any, embeddings: np.ndarray, nlist: int, seed: int) -> None:
    n = embeddings.shape[0]
    size = min(n, max(40 * nlist, min(256 * nlist, 200_000)))
    rows = np.sort(np.random.default_rng(seed).choice(n, size=size, replace=False))
    index.train(np.ascontiguousarray(embeddings[rows], dtype=np.float32))


def _checkpoint(
    faiss: Any, folder: Path, index: Any, manifest: dict[str, Any], done: int, n: int
) -> None:
    tmp = folder / (ANN_FILE + ".tmp")
    faiss.write_index(index, str(tmp))
    os.replace(tmp, folder / ANN_FILE)
    _write_manifest(
        folder,
        {
            **manifest,
            "added": done,
            "complete": done >= n,
            "updated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
    )


def _write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    import json

    tmp = folder / (ANN_MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, folder / ANN_MANIFEST)
