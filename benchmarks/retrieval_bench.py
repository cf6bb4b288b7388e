"""Retrieval benchmark: our BM25 index vs plain bm25s defaults vs rank-bm25.

Measures, per corpus and system: index build speed (passages/s) and peak RSS, load time
and RSS after the (memory-mapped) load, single-query latency p50/p99 and batched
queries/s. Corpora: the default corpus (settings.corpus.path), a 1M-passage corpus
synthesised from it (passages re-mixed from the words of two real passages, new ids,
written under <home>/bench/), and a 50k-passage prefix on which rank-bm25 can finish.
Queries are the Wiki-NFQA question texts. Every build and every query run happens in a
fresh subprocess, so RSS numbers are that process's own (the measurements are in
``eval/retrieval/bm25_speed.py``, the synthetic corpus in ``indexes/derived_corpus.py``).

    .venv/bin/python benchmarks/retrieval_bench.py --out results.json
    .venv/bin/python benchmarks/retrieval_bench.py --quick          # small, ~2 minutes

Prints a table and writes JSON.

Scale (the paper's corpus sizes on one node; ``eval/retrieval/scale_speed.py``): ``--scale
50k,370k,3.7M,21M`` builds a sharded BM25 index (``index build --shard-size``) of the first N
rows of a synthetic corpus grown from the default one (shuffled sentences of two real
passages a row, distinct ids, under ``<home>/bench-scale``) and reports build time, peak
RSS, index size and single-query p50/p95; ``--ann 370k,3.7M`` measures FAISS HNSW and
IVF-PQ against the exact dense scan (recall@10, p50) on real MiniLM encodings of a sample
plus vectors made from them. Both write rows into ``results/scale/summary.json`` (keys
``bm25`` and ``ann``; the file's other keys are kept) and both resume: a killed build
continues where it stopped when the same command runs again.

    .venv/bin/python benchmarks/retrieval_bench.py --scale 50k,370k
    .venv/bin/python benchmarks/retrieval_bench.py --ann 370k
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# Standard library only at its top: a worker's import and RSS figures stay its own.
from eval.retrieval.bm25_speed import WORKERS  # noqa: E402
from eval.retrieval.scale_speed import SCALE_WORKERS  # noqa: E402

WORKERS = {**WORKERS, **SCALE_WORKERS}
SUMMARY = REPO / "results" / "scale" / "summary.json"

# ---------------------------------------------------------------- workers (subprocesses)


def run_worker(task: dict[str, Any], timeout_s: float = 3600) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter; its last stdout line is JSON."""
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(task)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=REPO,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"worker {task['kind']} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- corpora and queries


def load_queries(data_dir: Path) -> list[str]:
    queries = []
    for path in sorted(glob.glob(str(data_dir / "*" / "annotated_odqa_nf_test.jsonl"))):
        with open(path, encoding="utf-8") as f:
            queries += [json.loads(line)["question_text"] for line in f if line.strip()]
    if not queries:
        raise SystemExit(f"no Wiki-NFQA questions under {data_dir}")
    return queries


# ---------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small corpora, few queries")
    parser.add_argument("--out", default="retrieval_bench.json", help="JSON results file")
    parser.add_argument("--config", help="typed-rag TOML settings (for home and corpus)")
    parser.add_argument("--synthetic-size", type=int, default=None)
    parser.add_argument("--subset-size", type=int, default=None, help="rank-bm25 corpus size")
    parser.add_argument("--skip-numpy", action="store_true", help="skip the numpy-backend run")
    parser.add_argument(
        "--skip-plain", action="store_true", help="skip the in-RAM plain-bm25s build and run"
    )
    parser.add_argument(
        "--index",
        help="use this built index of the default corpus (e.g. ~/.cache/typed-rag/indexes/"
        "wiki-bm25) instead of building one; its build is then not measured",
    )
    parser.add_argument(
        "--corpora",
        default="default,synthetic,subset",
        help="which corpora to run (comma-separated; default: all three)",
    )
    parser.add_argument(
        "--scale",
        metavar="SIZES",
        help="sharded BM25 at these corpus sizes (e.g. 50k,370k,3.7M,21M) instead of the "
        "comparison above; rows into --summary under 'bm25'",
    )
    parser.add_argument(
        "--ann",
        metavar="SIZES",
        help="FAISS ANN vs the exact dense scan at these sizes (e.g. 370k,3.7M); rows into "
        "--summary under 'ann'",
    )
    parser.add_argument(
        "--shard-size", type=int, default=1_000_000, help="--scale: passages a shard"
    )
    parser.add_argument(
        "--scale-dir", help="--scale/--ann: corpora and indexes (default <home>/bench-scale)"
    )
    parser.add_argument(
        "--ann-sample", type=int, default=20_000, help="--ann: real passages encoded"
    )
    parser.add_argument(
        "--ann-kinds", default="hnsw,ivfpq", help="--ann: which ANN kinds (hnsw,ivfpq)"
    )
    parser.add_argument("--ann-queries", type=int, default=200, help="--ann: queries scored")
    parser.add_argument(
        "--ann-encode-budget",
        type=float,
        default=0,
        help="--ann: stop encoding the sample after this many seconds and use the passages "
        "encoded so far (a later run continues the encode); 0: encode it all; -1: encode "
        "nothing more",
    )
    parser.add_argument(
        "--summary", default=str(SUMMARY), help="the summary JSON the scale rows go into"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        task = json.loads(args.worker)
        print(json.dumps(WORKERS[task["kind"]](task)))
        return 0

    from eval.settings import load_lab_settings

    settings = load_lab_settings(args.config)
    if args.scale or args.ann:
        return run_scale(args, settings)
    quick = args.quick
    bench = settings.home / ("bench-quick" if quick else "bench")
    bench.mkdir(parents=True, exist_ok=True)
    queries = load_queries(settings.eval.data_dir)
    default_limit = 20_000 if quick else None
    synth_n = args.synthetic_size or (50_000 if quick else 1_000_000)
    subset_n = args.subset_size or (5_000 if quick else 50_000)
    common = {
        "queries": queries,
        "k": settings.retrieval.top_k,
        "single_n": 100 if quick else 300,
        "min_seconds": 1.0 if quick else 3.0,
    }
    print(f"{len(queries)} Wiki-NFQA queries; results -> {args.out}", flush=True)

    wanted = {c.strip() for c in args.corpora.split(",") if c.strip()}
    t = time.perf_counter()
    synth = (
        ""
        if "synthetic" not in wanted
        else run_worker(
            {
                "kind": "synth",
                "source": settings.corpus.path,
                "dest": str(bench / f"synthetic-{synth_n}.tsv"),
                "n": synth_n,
            }
        )["path"]
    )
    print(f"synthetic corpus {synth} ready ({time.perf_counter() - t:.0f} s)", flush=True)

    corpora = [
        ("default", settings.corpus.path, default_limit),
        (f"synthetic-{synth_n // 1000}k", str(synth), None),
        (f"subset-{subset_n // 1000}k", settings.corpus.path, subset_n),
    ]
    results: list[dict[str, Any]] = []

    def record(corpus: str, system: str, row: dict[str, Any]) -> None:
        row = {"corpus": corpus, "system": system, **row}
        results.append(row)
        print(_format_row(row), flush=True)

    print(_HEADER, flush=True)
    for name, corpus, limit in corpora:
        if name.split("-")[0] not in wanted:
            continue
        out = bench / f"index-{name}"
        if name == "default" and args.index:
            out, build = Path(args.index).expanduser(), {}
        else:
            build = run_worker(
                {
                    "kind": "build",
                    "home": str(settings.home),
                    "corpus": corpus,
                    "out": str(out),
                    "limit": limit,
                }
            )
        query = run_worker({"kind": "query", "out": str(out), "backend": "numba", **common})
        record(name, "ours (bm25s+numba, mmap)", {**build, **query})
        if name == "default":
            # The fast anchor, same index files and one thread each, in the same run.
            one = run_worker(
                {"kind": "query", "out": str(out), "backend": "numba", "batch_threads": 1, **common}
            )
            record(name, "ours, 1 thread", {**build, **one})
            anchor = run_worker({"kind": "bm25s_numba", "out": str(out), **common})
            record(name, "bm25s numba backend, 1 thread", anchor)
            # The same two with the score matrix read into RAM instead of memory-mapped.
            ram = {"out": str(out), "mmap": False, **common}
            one_ram = run_worker({"kind": "query", "backend": "numba", "batch_threads": 1, **ram})
            record(name, "ours, 1 thread, in RAM", one_ram)
            record(
                name, "bm25s numba, 1 thread, in RAM", run_worker({"kind": "bm25s_numba", **ram})
            )
            parts = run_worker({"kind": "query_parts", "out": str(out), **common})
            results[-1]["ours_parts_us"] = parts
            print(
                "ours, single query, p50 per part (us): "
                + ", ".join(f"{k[:-7]} {v:.0f}" for k, v in parts.items()),
                flush=True,
            )
        if name == "default" and not args.skip_numpy:
            numpy_q = run_worker(
                {
                    "kind": "query",
                    "out": str(out),
                    "backend": "numpy",
                    **common,
                    "single_n": 50,
                    "min_seconds": 0.0,
                    "queries": queries[:100],
                }
            )
            record(name, "ours (bm25s numpy backend)", {**build, **numpy_q})
        if not name.startswith("synthetic") and not args.skip_plain:
            plain = run_worker({"kind": "plain_bm25s", "corpus": corpus, "limit": limit, **common})
            record(name, "plain bm25s defaults (in RAM)", plain)
        if name.startswith("subset"):
            rank = run_worker(
                {
                    "kind": "rank_bm25",
                    "corpus": corpus,
                    "limit": limit,
                    **common,
                    "rank_queries": 20 if quick else 50,
                }
            )
            record(name, "rank-bm25 BM25Okapi", rank)

    checks = _targets(results, synth_n)
    for line in checks:
        print(line)
    payload = {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "quick": quick,
        "queries": len(queries),
        "k": common["k"],
        "results": results,
        "targets": checks,
    }
    Path(args.out).write_text(json.dumps(payload, indent=2))
    print(f"wrote {args.out}")
    return 0


# ---------------------------------------------------------------- scale (--scale, --ann)

SCALE_SEED = 13
ANN_NOISE = 0.3  # norm of the Gaussian noise added to each made vector (unit vectors)
ANN_TARGET = 0.95  # recall@10 against the exact scan
# Search settings tried per kind: (ef_search or nprobe, refine = candidates rescored exactly).
ANN_SWEEP = {
    "hnsw": [(16, 16), (32, 32), (64, 40), (96, 40), (128, 64), (256, 64), (512, 128), (1024, 256)],
    "ivfpq": [(8, 100), (16, 100), (32, 200), (48, 200), (64, 300), (128, 400)],
}


def parse_sizes(text: str) -> list[int]:
    """``50k,370k,3.7M,21M`` -> [50000, 370000, 3700000, 21000000]."""
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        mult = {"k": 1_000, "m": 1_000_000}.get(part[-1], 1)
        out.append(int(round(float(part.rstrip("km")) * mult)))
    return out


def merge_rows(path: Path, key: str, rows: list[dict[str, Any]], setup: dict[str, Any]) -> None:
    """Put ``rows`` into the summary's ``key`` list (replacing rows of the same size and
    kind), ``setup`` under ``<key>_setup``; every other key of the file is kept."""
    payload = json.loads(path.read_text()) if path.is_file() else {}

    def ident(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r["passages"], r.get("kind"))

    fresh = {ident(r) for r in rows}
    kept = [r for r in payload.get(key, []) if ident(r) not in fresh]
    payload[key] = sorted(kept + rows, key=lambda r: (r["passages"], r.get("kind") or ""))
    payload[f"{key}_setup"] = setup
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1) + "\n")


def auto_rows_first(path: Path) -> None:
    """Keep under ``ann`` the row of the kind ``--ann auto`` builds at each size, and move
    the other kinds' rows (measured beside it, what the choice rests on) to ``ann_other``."""
    from typed_rag.retrieval.ann import choose_kind

    payload = json.loads(path.read_text())
    rows = payload.get("ann", []) + payload.get("ann_other", [])
    chosen = [r for r in rows if choose_kind("auto", r["passages"]) == r["kind"]]
    payload["ann"] = sorted(chosen, key=lambda r: r["passages"])
    payload["ann_other"] = sorted(
        (r for r in rows if r not in chosen), key=lambda r: (r["passages"], r["kind"])
    )
    path.write_text(json.dumps(payload, indent=1) + "\n")


def run_scale(args: argparse.Namespace, settings: Any) -> int:
    root = Path(args.scale_dir).expanduser() if args.scale_dir else settings.home / "bench-scale"
    root.mkdir(parents=True, exist_ok=True)
    queries = load_queries(settings.eval.data_dir)
    machine = f"{os.uname().machine}, {os.cpu_count()} cores, {_mem_gb():.0f} GB RAM"
    summary = Path(args.summary)
    if args.scale:
        sizes = parse_sizes(args.scale)
        corpus = root / "scale-corpus.tsv"
        t = time.perf_counter()
        info = run_worker(
            {
                "kind": "scale_corpus",
                "source": settings.corpus.path,
                "dest": str(corpus),
                "n": max(sizes),
                "seed": SCALE_SEED,
            },
            timeout_s=6 * 3600,
        )
        print(f"scale corpus {corpus}: {info['rows']:,} rows ({time.perf_counter() - t:.0f} s)")
        rows = []
        print(
            f"{'passages':>11} {'shards':>6} {'build s':>8} {'peak RSS GB':>11} "
            f"{'index GB':>8} {'p50 ms':>7} {'p95 ms':>7}",
            flush=True,
        )
        for n in sizes:
            out = root / f"bm25-{n}"
            build = run_worker(
                {
                    "kind": "sharded_build",
                    "home": str(settings.home),
                    "corpus": str(corpus),
                    "out": str(out),
                    "n": n,
                    "shard_size": args.shard_size,
                },
                timeout_s=24 * 3600,
            )
            query = run_worker(
                {
                    "kind": "sharded_query",
                    "out": str(out),
                    "queries": queries,
                    "single_n": 300,
                    "k": settings.retrieval.top_k,
                }
            )
            row = {**build, **query}
            rows.append(row)
            print(
                f"{row['passages']:>11,} {row['shards']:>6} {row['build_s']:>8,.0f} "
                f"{row.get('peak_rss_gb', float('nan')):>11.2f} {row['index_gb']:>8.2f} "
                f"{row['query_ms_p50']:>7.2f} {row['query_ms_p95']:>7.2f}",
                flush=True,
            )
            merge_rows(summary, "bm25", [row], _bm25_setup(args, corpus, machine, len(queries)))
    if args.ann:
        sizes = parse_sizes(args.ann)
        kinds = [k.strip() for k in args.ann_kinds.split(",") if k.strip()]
        folder = root / "ann"
        t = time.perf_counter()
        vec = run_worker(
            {
                "kind": "ann_vectors",
                "home": str(settings.home),
                "source": settings.corpus.path,
                "dir": str(folder),
                "sample": args.ann_sample,
                "seed": SCALE_SEED,
                "sizes": sizes,
                "noise": ANN_NOISE,
                "queries": queries[: args.ann_queries],
                "encode_budget_s": args.ann_encode_budget,
            },
            timeout_s=12 * 3600,
        )
        print(
            f"vectors ready ({time.perf_counter() - t:.0f} s; {vec['sample']:,} real encodings, "
            f"{vec['encode_passages_per_s']} passages/s when encoded)",
            flush=True,
        )
        for n in sizes:
            res = run_worker(
                {
                    "kind": "ann_measure",
                    "dir": str(folder),
                    "n": n,
                    "vectors": vec["vectors"][str(n)],
                    "basis": vec["sample"],
                    "queries": args.ann_queries,
                    "exact_single_n": 50,
                    "ann_single_n": 100,
                    "kinds": kinds,
                    "sweep": ANN_SWEEP,
                    "target": ANN_TARGET,
                    "threads": 1,
                    "build_threads": os.cpu_count() or 1,
                },
                timeout_s=12 * 3600,
            )
            for row in res["rows"]:
                print(
                    f"ann {row['kind']:<5} {n:>10,}: recall@10 {row['recall_at_10_vs_exact']:.3f} "
                    f"at {row['chosen']}, p50 {row['query_ms_p50']:.2f} ms against the exact "
                    f"scan's {row['exact_query_ms_p50']:.1f} ms (build {row['build_s']} s)",
                    flush=True,
                )
            merge_rows(summary, "ann", res["rows"], _ann_setup(args, vec, machine))
            auto_rows_first(summary)
    print(f"wrote {summary}")
    return 0


def _mem_gb() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def _bm25_setup(
    args: argparse.Namespace, corpus: Path, machine: str, n_queries: int
) -> dict[str, Any]:
    return {
        "corpus": "synthetic: row r is the shuffled sentences of two real passages of the "
        "default corpus (first half of one, second half of another, seeded by r), id syn-r; "
        "a size is the first N rows (indexes/derived_corpus.py: scale_corpus)",
        "index": f"sharded BM25 (index build --shard-size {args.shard_size}), the project's "
        "own two passes per shard, scored with the collection's IDF and mean length",
        "query": f"single queries, one thread, numba kernel, memory-mapped, top-k = 5, "
        f"the first 300 of {n_queries} Wiki-NFQA questions",
        "peak_rss_gb": "VmHWM of the building process (file pages it maps count); "
        "workers_peak_rss_gb: the largest stemming worker",
        "machine": machine + ", shared with other jobs, run at nice 19",
        "command": f"benchmarks/retrieval_bench.py --scale SIZES --shard-size {args.shard_size}",
    }


def _ann_setup(args: argparse.Namespace, vec: dict[str, Any], machine: str) -> dict[str, Any]:
    return {
        "vectors": f"{vec['sample']:,} real all-MiniLM-L6-v2 encodings (384 dims) of a seeded "
        "sample of the default corpus, then rows normalise((1-a) e_i + a e_j + noise): e_i a "
        "random sample vector, e_j one of its 10 nearest sample neighbours, a ~ U(0, 0.5), "
        f"Gaussian noise of norm {ANN_NOISE} (eval/retrieval/scale_speed.py)",
        "queries": f"the first {args.ann_queries} Wiki-NFQA questions, encoded with MiniLM",
        "recall": "recall@10 of the ANN (its candidates rescored exactly) against the exact "
        "float32 scan of the same vectors",
        "latency": "single query, one thread: the ANN search with rescoring; the exact scan "
        "is top_k_inner_product (torch float16 candidate pass)",
        "target": ANN_TARGET,
        "sweep": {k: [list(v) for v in vals] for k, vals in ANN_SWEEP.items()},
        "machine": machine + ", shared with other jobs, run at nice 19",
        "command": "benchmarks/retrieval_bench.py --ann SIZES",
    }


_COLS = [
    ("corpus", "corpus", 15, "s"),
    ("system", "system", 30, "s"),
    ("passages", "passages", 9, ",d"),
    ("build_pps", "build psg/s", 11, ",.0f"),
    ("build_pps_per_cpu_s", "psg/CPU-s", 9, ",.0f"),
    ("build_peak_rss_mb", "build RSS MB", 12, ",.0f"),
    ("load_s", "load s", 7, ".2f"),
    ("rss_after_load_mb", "RSS load MB", 11, ",.0f"),
    ("rss_load_delta_mb", "idx RSS MB", 10, ",.0f"),
    ("p50_ms", "p50 ms", 8, ".2f"),
    ("p99_ms", "p99 ms", 8, ".2f"),
    ("batch_qps", "batch q/s", 10, ",.1f"),
    ("index_mb", "disk MB", 8, ",.0f"),
]
_HEADER = " ".join(f"{title:>{w}}" if fmt != "s" else f"{title:<{w}}" for _, title, w, fmt in _COLS)


def _format_row(row: dict[str, Any]) -> str:
    cells = []
    for key, _, width, fmt in _COLS:
        value = row.get(key)
        if value is None:
            cells.append(f"{'-':>{width}}")
        elif fmt == "s":
            cells.append(f"{str(value)[:width]:<{width}}")
        else:
            cells.append(f"{value:>{width}{fmt}}")
    return " ".join(cells)


def _targets(results: list[dict[str, Any]], synth_n: int) -> list[str]:
    def find(corpus_prefix: str, system_prefix: str) -> dict[str, Any] | None:
        for r in results:
            if r["corpus"].startswith(corpus_prefix) and r["system"].startswith(system_prefix):
                return r
        return None

    lines = []
    ours_sub, rank = find("subset", "ours"), find("subset", "rank-bm25")
    if ours_sub and rank:
        ratio = ours_sub["batch_qps"] / rank["batch_qps"]
        lines.append(
            _check(
                f"batched q/s vs rank-bm25 (same corpus): {ratio:,.0f}x", ratio >= 100, ">= 100x"
            )
        )
    synth = find("synthetic", "ours")
    if synth:
        label = f"{synth_n:,} passages"
        lines.append(
            _check(
                f"{label}: single-query p50 {synth['p50_ms']:.1f} ms",
                synth["p50_ms"] < 30,
                "< 30 ms",
            )
        )
        lines.append(
            _check(
                f"{label}: batched {synth['batch_qps']:,.0f} q/s",
                synth["batch_qps"] >= 100,
                ">= 100 q/s",
            )
        )
        lines.append(
            _check(
                f"{label}: build {synth['build_pps']:,.0f} passages/s",
                synth["build_pps"] >= 5000,
                ">= 5,000/s",
            )
        )
    for r in results:
        if r["system"].startswith("ours (bm25s+numba") and "corpus_text_mb" in r:
            corpus_mb = r["corpus_text_mb"]
            lines.append(
                _check(
                    f"{r['corpus']}: RSS after mmap load {r['rss_after_load_mb']:,.0f} MB, of "
                    f"which the index {r['rss_load_delta_mb']:,.0f} MB (the rest is Python, "
                    f"numpy, numba); corpus text {corpus_mb:,.0f} MB, index on disk "
                    f"{r['index_mb']:,.0f} MB",
                    r["rss_load_delta_mb"] < 0.25 * corpus_mb,
                    "index RSS < 25% of the corpus text",
                )
            )
    return lines


def _check(text: str, ok: bool, target: str) -> str:
    return f"[{'PASS' if ok else 'FAIL'}] {text} (target {target})"


if __name__ == "__main__":
    sys.exit(main())
