"""BM25 speed and memory, one measurement per fresh process: our index and three baselines.

Each ``work_*`` function takes a JSON-able task and returns a JSON-able row; a benchmark
runs each in a new interpreter (``benchmarks/retrieval_bench.py --worker TASK``), so RSS
figures are that process's own. For that reason this module imports nothing but the
standard library at its top: each worker imports what it measures, after taking the
figures it compares against.

- ``build``: our index build (passages/s, per CPU-second, peak RSS, sizes);
- ``query``: our index loaded (memory-mapped or in RAM): load time and RSS, single-query
  latency p50/p99, batched queries/s; ``query_parts``: one query split into analysis,
  the numba kernel and building passages;
- ``bm25s_numba``: bm25s with its numba backend on the same index files;
- ``plain_bm25s``: bm25s as its README uses it (defaults, in memory);
- ``rank_bm25``: rank_bm25.BM25Okapi on the same analysed tokens;
- ``synth``: a synthetic corpus (:mod:`indexes.derived_corpus`).
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def rss_mb() -> float:
    """This process's resident memory now (VmRSS), MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM; ru_maxrss would include the parent's at fork)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (the stemming workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def single_latencies(fn: Callable[[list[str]], Any], queries: list[str]) -> dict[str, float]:
    """p50 and p99 milliseconds of ``fn`` called with one query at a time."""
    import numpy as np

    times = []
    for q in queries:
        t = time.perf_counter()
        fn([q])
        times.append(time.perf_counter() - t)
    arr = np.array(times) * 1000
    return {
        "p50_ms": float(np.percentile(arr, 50)),
        "p99_ms": float(np.percentile(arr, 99)),
        "single_n": len(queries),
    }


def batched_qps(
    fn: Callable[[list[str]], Any], queries: list[str], min_seconds: float = 2.0
) -> dict[str, float]:
    """Queries per second of ``fn`` on the whole batch, repeated for at least ``min_seconds``."""
    done, t0 = 0, time.perf_counter()
    while True:
        fn(queries)
        done += len(queries)
        elapsed = time.perf_counter() - t0
        if elapsed >= min_seconds:
            return {"batch_qps": done / elapsed, "batch_size": len(queries)}


def dir_mb(folder: Path) -> float:
    """Size of the files directly in ``folder``, MB."""
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file()) / 2**20


def work_build(task: dict[str, Any]) -> dict[str, Any]:
    from indexes.build import build_index
    from typed_rag.config import load_settings

    settings = load_settings(None, home=task["home"])
    cpu0 = cpu_seconds()
    report = build_index(
        settings,
        corpus=task["corpus"],
        out=task["out"],
        limit=task.get("limit"),
        show_progress=False,
    )
    cpu = cpu_seconds() - cpu0
    return {
        "passages": report.passages,
        "build_s": report.seconds,
        "build_pps": report.passages_per_s,
        "build_cpu_s": cpu,
        "build_pps_per_cpu_s": report.passages / cpu,
        "build_peak_rss_mb": peak_rss_mb(),
        "corpus_text_mb": (Path(task["out"]) / "passages.bin").stat().st_size / 2**20,
        "index_mb": dir_mb(Path(task["out"])),
        "vocab": report.vocab,
        "postings": report.postings,
    }


def work_query(task: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    import numba  # noqa: F401  (imported up front so the load figures are the index's)

    from typed_rag.retrieval.bm25 import BM25Index

    import_s = time.perf_counter() - t0
    rss0 = rss_mb()
    t0 = time.perf_counter()
    index = BM25Index(
        task["out"], backend=task["backend"], n_threads=1, mmap=task.get("mmap", True)
    )
    load_s = time.perf_counter() - t0
    rss_load = rss_mb()
    t1 = time.perf_counter()
    index.warmup()
    warmup_s = time.perf_counter() - t1
    queries = task["queries"]
    k = task["k"]
    out: dict[str, Any] = {
        "import_s": import_s,
        "load_s": load_s,
        "rss_before_load_mb": rss0,
        "rss_after_load_mb": rss_load,
        "rss_load_delta_mb": rss_load - rss0,
        "first_query_s": warmup_s,
    }
    out.update(single_latencies(lambda q: index.search(q, k), queries[: task["single_n"]]))
    index.n_threads = task.get("batch_threads") or os.cpu_count() or 1
    out.update(batched_qps(lambda q: index.search(q, k), queries, task["min_seconds"]))
    out["batch_threads"] = index.n_threads
    out["rss_after_queries_mb"] = rss_mb()
    return out


def work_query_parts(task: dict[str, Any]) -> dict[str, Any]:
    """Ours, one thread, split into its parts (single-query p50 of each, microseconds):
    query analysis, the numba kernel on term ids, and building Passages from the store."""
    import numpy as np

    from typed_rag.retrieval.bm25 import BM25Index

    index = BM25Index(task["out"], backend="numba", n_threads=1)
    index.warmup()
    queries = task["queries"][: task["single_n"]]
    k = task["k"]
    parts: dict[str, list[float]] = {"analyse": [], "kernel": [], "passages": [], "total": []}
    for q in queries:
        index._analyzer._reset_cache()  # a new question: no words cached yet
        t0 = time.perf_counter()
        ids = [t if t else [index._empty_term] for t in index.query_term_ids([q])]
        t1 = time.perf_counter()
        scores, docs = index._run_kernel(ids, k)
        t2 = time.perf_counter()
        index.store.passages(docs, scores, positive_only=True)
        t3 = time.perf_counter()
        for name, v in (("analyse", t1 - t0), ("kernel", t2 - t1), ("passages", t3 - t2)):
            parts[name].append(v * 1e6)
        parts["total"].append((t3 - t0) * 1e6)
    return {f"{n}_p50_us": float(np.percentile(v, 50)) for n, v in parts.items()}


def work_bm25s_numba(task: dict[str, Any]) -> dict[str, Any]:
    """bm25s with its numba backend on the very same index files, one thread: the
    kernel ours calls, with bm25s's own tokenizer (same analyzer config), JSON vocabulary
    and retrieve() returning document numbers (no passage text)."""
    import bm25s
    import numba

    import typed_rag.retrieval.manifest as mf
    from typed_rag.retrieval.analyzer import bm25s_tokenizer

    numba.set_num_threads(1)
    folder = Path(task["out"])
    tokenizer = bm25s_tokenizer((mf.read_manifest(folder) or {}).get("analyzer"))
    rss0 = rss_mb()
    t0 = time.perf_counter()
    retriever = bm25s.BM25.load(folder, mmap=task.get("mmap", True), backend="numba")
    load_s = time.perf_counter() - t0
    k = task["k"]

    def search(qs: list[str]) -> Any:
        tokens = tokenizer.tokenize(qs, return_as="string", update_vocab=True, show_progress=False)
        return retriever.retrieve(tokens, k=k, n_threads=1, show_progress=False)

    t1 = time.perf_counter()
    search(task["queries"][:1])
    out: dict[str, Any] = {
        "load_s": load_s,
        "first_query_s": time.perf_counter() - t1,
        "rss_after_load_mb": rss_mb(),
        "rss_load_delta_mb": rss_mb() - rss0,
    }
    out.update(single_latencies(search, task["queries"][: task["single_n"]]))
    out.update(batched_qps(search, task["queries"], task["min_seconds"]))
    out["batch_threads"] = 1
    return out


def work_plain_bm25s(task: dict[str, Any]) -> dict[str, Any]:
    """bm25s as its README uses it: bm25s.tokenize defaults (no stemmer, no stop words),
    BM25() defaults (k1=1.5, b=0.75, lucene, numpy backend), all in memory."""
    import bm25s

    from indexes.corpus import read_corpus

    t0 = time.perf_counter()
    texts = [f"{r.title}\n{r.text}" for r in read_corpus(task["corpus"], limit=task.get("limit"))]
    tokens = bm25s.tokenize(texts, show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    del tokens
    build_s = time.perf_counter() - t0
    out: dict[str, Any] = {
        "passages": len(texts),
        "build_s": build_s,
        "build_pps": len(texts) / build_s,
        "build_peak_rss_mb": peak_rss_mb(),
        "rss_after_load_mb": rss_mb(),
    }
    k = task["k"]

    def search(qs: list[str]) -> Any:
        return retriever.retrieve(bm25s.tokenize(qs, show_progress=False), k=k, show_progress=False)

    out.update(single_latencies(search, task["queries"][: task["single_n"]]))
    out.update(batched_qps(search, task["queries"], task["min_seconds"]))
    return out


def work_rank_bm25(task: dict[str, Any]) -> dict[str, Any]:
    """rank_bm25.BM25Okapi on the same analysed tokens as our index."""
    import numpy as np
    from rank_bm25 import BM25Okapi

    from indexes.corpus import read_corpus
    from typed_rag.retrieval.analyzer import Analyzer

    analyzer = Analyzer()
    t0 = time.perf_counter()
    texts = [f"{r.title}\n{r.text}" for r in read_corpus(task["corpus"], limit=task["limit"])]
    model = BM25Okapi(analyzer.terms(texts), k1=0.9, b=0.4)
    build_s = time.perf_counter() - t0
    out: dict[str, Any] = {
        "passages": len(texts),
        "build_s": build_s,
        "build_pps": len(texts) / build_s,
        "build_peak_rss_mb": peak_rss_mb(),
        "rss_after_load_mb": rss_mb(),
    }
    k = task["k"]

    def search(qs: list[str]) -> list[Any]:
        return [np.argsort(-model.get_scores(t))[:k] for t in analyzer.terms(qs)]

    queries = task["queries"][: task["rank_queries"]]
    out.update(single_latencies(search, queries))
    t = time.perf_counter()
    search(queries)
    out["batch_qps"] = len(queries) / (time.perf_counter() - t)
    out["batch_size"] = len(queries)
    return out


def work_synth(task: dict[str, Any]) -> dict[str, Any]:
    """Write (or keep) a synthetic corpus; see :func:`indexes.derived_corpus.synthesise`."""
    from indexes.derived_corpus import synthesise

    t0 = time.perf_counter()
    path = synthesise(task["source"], Path(task["dest"]), task["n"])
    return {"path": str(path), "seconds": time.perf_counter() - t0}


WORKERS = {
    "synth": work_synth,
    "build": work_build,
    "query": work_query,
    "plain_bm25s": work_plain_bm25s,
    "bm25s_numba": work_bm25s_numba,
    "query_parts": work_query_parts,
    "rank_bm25": work_rank_bm25,
}
