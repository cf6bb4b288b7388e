"""The scale benchmark's measurements, one per fresh process (``retrieval_bench.py --scale``
and ``--ann``); like :mod:`eval.retrieval.bm25_speed`, only the standard library at the top.

BM25 at the paper's corpus sizes (``--scale``):

- ``scale_corpus``: grow the synthetic corpus (:func:`indexes.derived_corpus.scale_corpus`:
  shuffled sentences of two real passages a row, distinct ids) to the largest size asked;
- ``sharded_build``: a sharded BM25 build (:func:`indexes.sharded.build_sharded`) of its
  first ``n`` rows: wall time, peak RSS of the building process and of its stemming workers,
  index size on disk; a rerun of a killed build resumes it (``resumed_shards``, and
  ``build_s`` adds the earlier runs' pass-1 seconds);
- ``sharded_query``: the index memory-mapped, one thread, single-query latency p50/p95.

Dense ANN against the exact scan (``--ann``):

- ``ann_vectors``: real all-MiniLM-L6-v2 encodings of a seeded sample of the default corpus
  (the project's own resumable dense build over a BM25 index of the sample), the Wiki-NFQA
  questions encoded as queries, and ``n`` vectors made from the sample: the sample itself,
  then rows ``normalise((1 - a) e_i + a e_j + s g)`` with ``e_i`` a random sample vector,
  ``e_j`` one of its 10 nearest sample neighbours, ``a ~ U(0, 0.5)`` and ``g`` Gaussian noise
  of norm ~``s`` (SMOTE-style oversampling: new points on the sample's own manifold), seeded,
  written in chunks (a rerun continues);
- ``ann_measure``: exact top-10 of every query (the ground truth), the exact scan's
  single-query p50, then each ANN kind built (resumable, :func:`indexes.ann.build_ann`) and
  its search parameter swept: recall@10 against the exact scan and single-query p50 for each
  setting, and the cheapest setting reaching the target recall.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path
from typing import Any


def _vm(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 2**20  # kB -> GB
    return float("nan")


def tree_gb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**30


def percentiles_ms(times_s: list[float]) -> dict[str, float]:
    import numpy as np

    arr = np.asarray(times_s) * 1000
    return {
        "p50": round(float(np.percentile(arr, 50)), 3),
        "p95": round(float(np.percentile(arr, 95)), 3),
    }


# ---------------------------------------------------------------- BM25 at scale


def work_scale_corpus(task: dict[str, Any]) -> dict[str, Any]:
    from indexes.derived_corpus import scale_corpus

    t0 = time.perf_counter()
    info = scale_corpus(task["source"], Path(task["dest"]), int(task["n"]), int(task["seed"]))
    return {**info, "seconds": time.perf_counter() - t0}


def work_sharded_build(task: dict[str, Any]) -> dict[str, Any]:
    from indexes.sharded import build_sharded
    from typed_rag.config import load_settings

    settings = load_settings(None, home=task["home"])
    t0 = time.perf_counter()
    report = build_sharded(
        settings,
        corpus=task["corpus"],
        out=task["out"],
        shard_size=int(task["shard_size"]),
        limit=int(task["n"]),
        if_missing=True,
        show_progress=False,
        workers=task.get("workers"),
    )
    wall = time.perf_counter() - t0
    out = Path(task["out"])
    manifest = json.loads((out / "manifest.json").read_text())
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    passages_gb = (
        sum(
            (out / e["folder"] / name).stat().st_size
            for e in manifest["shards"]
            for name in ("passages.bin", "passages.offsets")
        )
        / 2**30
    )
    row = {
        "passages": manifest["counts"]["passages"],
        "shards": manifest["counts"]["shards"],
        "shard_size": int(task["shard_size"]),
        "vocab_terms": manifest["counts"]["vocab"],
        "postings": manifest["counts"]["postings"],
        "index_gb": round(tree_gb(out), 3),
        "passage_store_gb": round(passages_gb, 3),
    }
    if report.skipped:  # an index of these inputs was there: its own build record
        row.update(
            {
                "build_s": manifest["build"]["seconds"],
                "build_reused": True,
            }
        )
        return row
    row.update(
        {
            "build_s": round(report.seconds + report.earlier_s, 1),
            "build_s_this_run": round(wall, 1),
            "resumed_shards": report.resumed_shards,
            "build_timings_s": report.timings,
            "peak_rss_gb": round(_vm("VmHWM"), 3),
            "workers_peak_rss_gb": round(kids.ru_maxrss / 2**20, 3),
            "cpu_s": round(
                sum(
                    getattr(resource.getrusage(who), f)
                    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                    for f in ("ru_utime", "ru_stime")
                ),
                1,
            ),
        }
    )
    return row


def work_sharded_query(task: dict[str, Any]) -> dict[str, Any]:
    from typed_rag.retrieval.sharded import ShardedBM25Index

    rss0 = _vm("VmRSS")
    t0 = time.perf_counter()
    index = ShardedBM25Index(task["out"], backend="numba", n_threads=1)
    load_s = time.perf_counter() - t0
    rss_load = _vm("VmRSS")
    index.warmup()
    queries = task["queries"][: int(task["single_n"])]
    k = int(task["k"])
    for q in queries[:20]:  # touch the pages of the common terms once
        index.search([q], k)
    times = []
    for q in queries:
        t = time.perf_counter()
        index.search([q], k)
        times.append(time.perf_counter() - t)
    ms = percentiles_ms(times)
    return {
        "query_ms_p50": ms["p50"],
        "query_ms_p95": ms["p95"],
        "queries": len(queries),
        "k": k,
        "load_s": round(load_s, 3),
        "rss_load_gb": round(rss_load - rss0, 3),
        "rss_after_queries_gb": round(_vm("VmRSS"), 3),
    }


# ---------------------------------------------------------------- dense ANN


def _sample_tsv(source: str, dest: Path, n: int, seed: int) -> None:
    import csv
    import random

    from indexes.corpus import read_corpus

    if dest.is_file():
        return
    rows = [(r.id, r.text, r.title) for r in read_corpus(source)]
    chosen = sorted(random.Random(seed).sample(range(len(rows)), n))
    tmp = dest.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(["id", "text", "title"])
        writer.writerows(rows[i] for i in chosen)
    os.replace(tmp, dest)


def work_ann_vectors(task: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    import typed_rag.retrieval.manifest as mf
    from indexes.build import build_index
    from indexes.dense import build_dense
    from typed_rag.config import load_settings
    from typed_rag.encoder import encode
    from typed_rag.retrieval.dense import EMBEDDINGS_FILE, dense_folder, load_dense_encoder

    root = Path(task["dir"])
    root.mkdir(parents=True, exist_ok=True)
    sample_n, seed = int(task["sample"]), int(task["seed"])
    tsv = root / f"sample-{sample_n}.tsv"
    _sample_tsv(task["source"], tsv, sample_n, seed)
    settings = load_settings(
        None,
        **{
            "home": task["home"],
            "corpus.path": str(tsv),
            "retrieval.index_dir": str(root / f"sample-{sample_n}-index"),
            "retrieval.dense_dtype": "float32",
        },
    )
    t0 = time.perf_counter()
    build_index(settings, if_missing=True, show_progress=False)
    budget = float(task.get("encode_budget_s", 0) or 0)  # 0: encode the whole sample

    class _Budget(Exception):
        pass

    def check(done: int) -> None:
        if budget and time.perf_counter() - t0 > budget:
            raise _Budget(done)

    folder = dense_folder(settings.index_dir)
    manifest = mf.read_manifest(folder) or {}
    encoded_now, pps = 0, 0.0
    if not (budget < 0 and manifest.get("done")):  # < 0: use what is encoded already
        try:
            dense = build_dense(settings, if_missing=True, show_progress=False, on_chunk=check)
            encoded_now, pps = dense.encoded, dense.passages_per_s
        except _Budget:
            pass
    encode_s = time.perf_counter() - t0
    manifest = mf.read_manifest(folder) or {}
    done = int(manifest.get("done", 0))
    if done == 0:
        raise RuntimeError("no passage of the sample is encoded yet")
    # the encoded rows so far (all of them once the encode is complete; a rerun continues it)
    basis = np.load(folder / EMBEDDINGS_FILE, mmap_mode="r")[:done].astype(np.float32)
    queries_path = root / "queries.npy"
    if not queries_path.is_file():
        model, _ = load_dense_encoder(settings)
        np.save(queries_path, encode(model, task["queries"], 64, "query").astype(np.float32))
    made = {}
    for n in sorted(int(x) for x in task["sizes"]):
        name = f"vectors-{n}-b{done}.npy"
        made[n] = _grow_vectors(root / name, basis, n, seed, float(task["noise"]))
    return {
        "sample": done,
        "sample_asked": sample_n,
        "encoded_now": encoded_now,
        "encode_passages_per_s": round(pps, 2),
        "encode_s": round(encode_s, 1),
        "queries": int(np.load(queries_path, mmap_mode="r").shape[0]),
        "vectors": {str(k): v for k, v in made.items()},
    }


def _grow_vectors(path: Path, basis: Any, n: int, seed: int, noise: float) -> str:
    """``n`` float16 rows: the basis, then SMOTE-style mixes (module doc); chunk ``c`` is
    seeded with ``(seed, c)`` and ``<path>.done`` counts the rows written, so a killed
    run continues and every size's rows are the same function of the row number."""
    import numpy as np

    from typed_rag.retrieval.dense import top_k_inner_product

    done_path = path.with_suffix(".done")
    s, dim = basis.shape
    if path.is_file() and done_path.is_file() and int(done_path.read_text()) >= n:
        return str(path)
    if not (path.is_file() and done_path.is_file()):
        arr = np.lib.format.open_memmap(path, mode="w+", dtype=np.float16, shape=(n, dim))
        done = min(n, s)
        arr[:done] = basis[:done].astype(np.float16)
        arr.flush()
        done_path.write_text(str(done))
    else:
        arr = np.load(path, mmap_mode="r+")
        done = int(done_path.read_text())
    nbrs, _ = top_k_inner_product(basis, basis, 11, fast=False)  # self + 10 neighbours
    chunk = 200_000
    while done < n:
        c = done // chunk
        start, stop = c * chunk, min(n, (c + 1) * chunk)
        rng = np.random.default_rng([seed, c])
        m = stop - start
        i = rng.integers(0, s, m)
        j = nbrs[i, rng.integers(1, nbrs.shape[1], m)]
        a = rng.uniform(0.0, 0.5, (m, 1)).astype(np.float32)
        x = (1 - a) * basis[i] + a * basis[j]
        x += (noise / np.sqrt(dim)) * rng.standard_normal((m, dim)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        lo = max(start, done)
        arr[lo:stop] = x[lo - start :].astype(np.float16)
        arr.flush()
        done = stop
        done_path.write_text(str(done))
    return str(path)


def work_ann_measure(task: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    import torch

    from indexes.ann import build_ann
    from typed_rag.retrieval.ann import AnnIndex
    from typed_rag.retrieval.dense import top_k_inner_product

    threads = int(task.get("threads", 1))
    torch.set_num_threads(threads)
    root = Path(task["dir"])
    n = int(task["n"])
    vectors_path = Path(task["vectors"])
    vectors = np.load(vectors_path, mmap_mode="r")
    queries = np.load(root / "queries.npy")[: int(task["queries"])]
    k = 10
    t0 = time.perf_counter()
    truth, _ = top_k_inner_product(vectors, queries, k, fast=False)
    truth_s = time.perf_counter() - t0
    exact_times = []
    for q in queries[: int(task["exact_single_n"])]:
        t = time.perf_counter()
        top_k_inner_product(vectors, q[None, :], k)
        exact_times.append(time.perf_counter() - t)
    exact_ms = percentiles_ms(exact_times)
    rows: list[dict[str, Any]] = []
    import faiss

    faiss.omp_set_num_threads(int(task.get("build_threads", 2)))
    for kind in task["kinds"]:
        folder = root / f"ann-{vectors_path.stem}-{kind}"
        folder.mkdir(exist_ok=True)
        params = dict(task.get("params", {}).get(kind, {}))
        t = time.perf_counter()
        report = build_ann(folder, vectors, kind, params=params, show_progress=False)
        build_s = time.perf_counter() - t
        faiss.omp_set_num_threads(threads)
        index = AnnIndex.open(folder, vectors)
        assert index is not None
        key = "ef_search" if kind == "hnsw" else "nprobe"
        sweep = []
        for value, refine in task["sweep"][kind]:
            index.set_search(**{key: int(value), "refine": int(refine)})
            found, _ = index.search(queries, k)
            recall = float(
                np.mean([len(set(a) & set(b)) / k for a, b in zip(found, truth, strict=True)])
            )
            times = []
            for q in queries[: int(task["ann_single_n"])]:
                t1 = time.perf_counter()
                index.search(q[None, :], k)
                times.append(time.perf_counter() - t1)
            ms = percentiles_ms(times)
            sweep.append(
                {
                    key: int(value),
                    "refine": int(refine),
                    "recall_at_10": round(recall, 4),
                    "query_ms_p50": ms["p50"],
                    "query_ms_p95": ms["p95"],
                }
            )
        target = float(task["target"])
        good = [s for s in sweep if s["recall_at_10"] >= target]
        best = (
            min(good, key=lambda s: s["query_ms_p50"])
            if good
            else max(sweep, key=lambda s: s["recall_at_10"])
        )
        faiss.omp_set_num_threads(int(task.get("build_threads", 2)))
        rows.append(
            {
                "passages": n,
                "kind": kind,
                "recall_at_10_vs_exact": best["recall_at_10"],
                "query_ms_p50": best["query_ms_p50"],
                "query_ms_p95": best["query_ms_p95"],
                "exact_query_ms_p50": exact_ms["p50"],
                "exact_query_ms_p95": exact_ms["p95"],
                "chosen": {key: best[key], "refine": best["refine"]},
                "meets_target": bool(good),
                "build_params": report.params,
                "build_s": round(build_s, 1) if report.reason != "up to date" else None,
                "build_resumed_from": report.resumed_from,
                "ann_gb": round(tree_gb(folder), 3),
                "vectors_gb": round(vectors_path.stat().st_size / 2**30, 3),
                "real_vectors": int(task["basis"]),
                "queries": int(queries.shape[0]),
                "truth_s": round(truth_s, 1),
                "threads": threads,
                "sweep": sweep,
            }
        )
    return {"rows": rows}


SCALE_WORKERS = {
    "scale_corpus": work_scale_corpus,
    "sharded_build": work_sharded_build,
    "sharded_query": work_sharded_query,
    "ann_vectors": work_ann_vectors,
    "ann_measure": work_ann_measure,
}
