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
  top-5 passages (share of core sub-questions scoring >= eval.answerable_threshold).

    .venv/bin/python benchmarks/hybrid_bench.py --out results.json
    .venv/bin/python benchmarks/hybrid_bench.py --stage build      # only build the indexes
    .venv/bin/python benchmarks/hybrid_bench.py --coverage 12 --set engine.n_threads=1
    .venv/bin/python benchmarks/hybrid_bench.py --coverage 10 --decompositions RUN/subquestions.jsonl
    .venv/bin/python benchmarks/hybrid_bench.py --dtype-check 1000 --threads 2 --index INDEX_DIR

Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from eval.retrieval.answer_recall import SUBSETS, ground_truth, normalize

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DUMP_PREFIXES = ("wikivisual-", "patcheddistro-", "aggipp-wx-", "wikitasks-", "msilver-wx-")
KS = (5, 20, 100)
FULL_CORPUS_DENSE_ROWS = 369_998


# ---------------------------------------------------------------- answers


_NORMALIZED: dict[str, str] = {}


def first_hit_rank(passages: Sequence[Any], aliases: Sequence[str]) -> int | None:
    """1-based rank of the first passage containing an alias, or None."""
    for rank, p in enumerate(passages, 1):
        text = _NORMALIZED.get(p.id)
        if text is None:
            text = _NORMALIZED[p.id] = normalize(p.text)
        if any(a in text for a in aliases):
            return rank
    return None


def recall_table(
    records: Sequence[Any], ranks: Sequence[int | None]
) -> dict[str, dict[str, float | int]]:
    """Hits at each k per subset and overall (counts and shares)."""
    table: dict[str, dict[str, float | int]] = {}
    groups: dict[str, list[int | None]] = {}
    for rec, rank in zip(records, ranks, strict=True):
        groups.setdefault(rec.subset, []).append(rank)
        groups.setdefault("all", []).append(rank)
    for name, rs in groups.items():
        row: dict[str, float | int] = {"n": len(rs)}
        for k in KS:
            hits = sum(1 for r in rs if r is not None and r <= k)
            row[f"hits@{k}"] = hits
            row[f"R@{k}"] = round(hits / len(rs), 4)
        table[name] = row
    return table


# ---------------------------------------------------------------- slice


def make_slice(corpus: Path, out: Path, size: int, seed: int) -> dict[str, Any]:
    """Write the slice TSV (if absent) and return what it holds."""
    from indexes.corpus import read_corpus

    info_path = out.with_suffix(".json")
    if out.is_file() and info_path.is_file():
        return json.loads(info_path.read_text())
    dataset: list[tuple[int, tuple[str, str, str]]] = []
    reservoir: list[tuple[int, tuple[str, str, str]]] = []
    rng = random.Random(seed)
    seen_dump = 0
    rows = list(read_corpus(corpus))
    for pos, row in enumerate(rows):
        item = (pos, (row.id, row.title, row.text))
        if not row.id.startswith(DUMP_PREFIXES):
            dataset.append(item)
    want_dump = size - len(dataset)
    if want_dump < 0:
        raise SystemExit(f"--slice {size} is smaller than the {len(dataset)} dataset passages")
    for pos, row in enumerate(rows):
        if not row.id.startswith(DUMP_PREFIXES):
            continue
        seen_dump += 1
        item = (pos, (row.id, row.title, row.text))
        if len(reservoir) < want_dump:
            reservoir.append(item)
        else:
            j = rng.randrange(seen_dump)
            if j < want_dump:
                reservoir[j] = item
    chosen = sorted(dataset + reservoir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as f:  # DPR psgs_w100.tsv layout
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(["id", "text", "title"])
        writer.writerows([pid, text, title] for _, (pid, title, text) in chosen)
    os.replace(tmp, out)
    info = {
        "path": str(out),
        "source": str(corpus),
        "passages": len(chosen),
        "dataset_passages": len(dataset),
        "dump_passages_sampled": len(reservoir),
        "dump_passages_total": seen_dump,
        "seed": seed,
        "dump_prefixes": list(DUMP_PREFIXES),
    }
    info_path.write_text(json.dumps(info, indent=2))
    return info


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


# ---------------------------------------------------------------- dtype check


def dtype_check(
    settings: Any, index_dir: Path, queries: Sequence[str], n: int, seed: int, rounds: int = 3
) -> dict:
    """bfloat16 vs float32 encoding of ``n`` sampled passages of ``index_dir``: speed, agreement
    of the exact top-10 for 100 questions, and cosine between the two embeddings of a passage.

    Whether bfloat16 pays depends on the CPU (faster on one AMD EPYC, slower on one Intel
    Xeon, both with avx512_bf16), so both dtypes are timed in alternating ``rounds`` after a
    warm-up batch each, and the median speed is reported with every round's."""
    import statistics

    import numpy as np

    from typed_rag.encoder import encode
    from typed_rag.retrieval.dense import load_dense_encoder, top_k_inner_product
    from typed_rag.retrieval.store import PassageStore
    from typed_rag.retrieval.text import encoder_text

    store = PassageStore(index_dir)
    rng = random.Random(seed)
    docs = sorted(rng.sample(range(len(store)), min(n, len(store))))
    texts = [encoder_text(store.get(d)) for d in docs]
    store.close()
    qs = rng.sample(list(queries), min(100, len(queries)))
    batch = settings.retrieval.dense_batch_size
    models = {}
    for dt in ("bfloat16", "float32"):
        retrieval = settings.retrieval.model_copy(update={"dense_dtype": dt})
        models[dt], _ = load_dense_encoder(settings.model_copy(update={"retrieval": retrieval}))
        encode(models[dt], texts[:batch], batch)  # warm-up: first-call allocation and kernels
    speeds: dict[str, list[float]] = {dt: [] for dt in models}
    emb: dict[str, tuple[Any, Any]] = {}
    for _ in range(max(1, rounds)):
        for dt, model in models.items():
            t0 = time.perf_counter()
            p = encode(model, texts, batch)
            speeds[dt].append(round(len(texts) / (time.perf_counter() - t0), 1))
            emb[dt] = (p.astype(np.float16), encode(model, qs, 64))
    out: dict[str, Any] = {"index": str(index_dir), "passages": len(texts), "queries": len(qs)}
    for dt, v in speeds.items():
        out[f"{dt}_passages_per_s"] = round(statistics.median(v), 1)
        out[f"{dt}_rounds"] = v
    out["bfloat16_speedup"] = round(
        out["bfloat16_passages_per_s"] / out["float32_passages_per_s"], 2
    )
    top = {dt: top_k_inner_product(p, q, 10)[0] for dt, (p, q) in emb.items()}
    overlap = [
        len(set(a) & set(b)) / 10
        for a, b in zip(top["float32"].tolist(), top["bfloat16"].tolist(), strict=True)
    ]
    cos = np.sum(emb["float32"][0].astype(np.float32) * emb["bfloat16"][0], axis=1)
    out.update(
        top10_overlap_mean=round(float(np.mean(overlap)), 4),
        top10_overlap_min=float(np.min(overlap)),
        top1_same=round(float(np.mean(top["float32"][:, 0] == top["bfloat16"][:, 0])), 4),
        cosine_mean=round(float(cos.mean()), 6),
        cosine_min=round(float(cos.min()), 6),
    )
    return out


# ---------------------------------------------------------------- coverage


def load_decompositions(path: Path) -> dict[str, list[str]]:
    """question_id -> core sub-questions, from an eval run's ``subquestions.jsonl``."""
    out: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        core = (row.get("decomposition") or {}).get("core") or []
        if row.get("status") == "ok" and core:
            out[row["question_id"]] = [str(c) for c in core]
    return out


def context_coverage(
    settings: Any,
    records: Sequence[Any],
    contexts: dict[str, list[list[Any]]],
    known: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """Decompose each question once (unless ``known`` has its core sub-questions), then
    judge each retriever's top-5 passages."""
    from eval.answer_coverage.judge import CoverageJudge, answerability_messages
    from eval.answer_coverage.parse import parse_answerability
    from eval.judging.resample import generate_until_parsed
    from typed_rag.engines.factory import build_engine

    engine = build_engine(settings)
    judge = CoverageJudge.from_settings(engine, settings)
    thr = settings.eval.answerable_threshold

    async def run() -> dict[str, Any]:
        await engine.start()
        try:
            t0 = time.perf_counter()
            given = known or {}
            todo = [r for r in records if r.question_id not in given]
            decs = await judge.decompose([r.question for r in todo]) if todo else []
            made = {
                r.question_id: (d.value.core if d.ok and d.value else [])
                for r, d in zip(todo, decs, strict=True)
            }
            out: dict[str, Any] = {
                "questions": len(records),
                "decomposed": sum(d.ok for d in decs),
                "reused_decompositions": len(records) - len(todo),
                "threshold": thr,
            }
            cores = [given.get(r.question_id) or made.get(r.question_id, []) for r in records]
            for name, ctx in contexts.items():
                idx = [i for i, c in enumerate(cores) if c and ctx[i]]
                reqs = [
                    judge._request(
                        answerability_messages(
                            cores[i], [{"title": p.title, "text": p.text} for p in ctx[i]]
                        ),
                        _answerability_schema(),
                    )
                    for i in idx
                ]
                res = await generate_until_parsed(
                    engine,
                    reqs,
                    lambda j, text, idx=idx: parse_answerability(text, len(cores[idx[j]])),
                    judge.max_resamples,
                    judge.seed,
                )
                shares, answerable, total, per_q = [], 0, 0, []
                for j, r in enumerate(res):
                    if not (r.ok and r.value is not None):
                        per_q.append(None)
                        continue
                    hits = sum(s >= thr for s in r.value)
                    answerable += hits
                    total += len(r.value)
                    shares.append(hits / len(r.value))
                    per_q.append({"id": records[idx[j]].question_id, "scores": r.value})
                out[name] = {
                    "judged": len(shares),
                    "unparsed": len(res) - len(shares),
                    "mean_context_coverage": round(sum(shares) / len(shares), 4)
                    if shares
                    else None,
                    "core_answerable": answerable,
                    "core_total": total,
                    "per_question": per_q,
                }
            out["seconds"] = round(time.perf_counter() - t0, 1)
            out["decompositions"] = [
                {"id": r.question_id, "core": c} for r, c in zip(records, cores, strict=True)
            ]
            return out
        finally:
            await engine.close()

    return asyncio.run(run())


def _answerability_schema() -> dict[str, Any]:
    from eval.answer_coverage.judge import ANSWERABILITY_SCHEMA

    return ANSWERABILITY_SCHEMA


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
        "--index", type=Path, metavar="DIR",
        help="with --dtype-check: sample passages of this built index instead of the slice "
        "(e.g. the default index), so nothing is built",
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

    from eval.data.wikinfqa import load_wikinfqa
    from indexes.build import build_index
    from indexes.dense import build_dense
    from typed_rag.config import load_settings, parse_overrides
    from typed_rag.retrieval.bm25 import BM25Index
    from typed_rag.retrieval.dense import DenseIndex
    from typed_rag.retrieval.dense_dtype import compute_dtype
    from typed_rag.retrieval.fusion import HybridRetriever

    overrides: dict[str, Any] = parse_overrides(args.set)
    if args.dtype:
        overrides["retrieval.dense_dtype"] = args.dtype
    overrides["retrieval.dense_threads"] = args.threads
    settings = load_settings(None, **overrides)
    r = settings.retrieval
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
    info = make_slice(Path(settings.corpus.path), base / "passages.tsv", args.slice, args.seed)
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
        f"dense ({r.dense_model}, {compute_dtype(settings)}, max_length {r.dense_max_length}): "
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
            "dense_max_length": r.dense_max_length,
            "rrf_k": r.rrf_k,
            "fusion_depth": r.fusion_depth,
            "bm25": {"k1": r.k1, "b": r.b, "method": r.method},
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
    hybrid = HybridRetriever(bm25, dense, r.rrf_k, r.fusion_depth)
    retrievers = {"bm25": bm25, "dense": dense, "hybrid": hybrid}
    kmax = max(KS)
    rows: list[tuple[str, dict[str, dict[str, float | int]]]] = []
    hits_by: dict[str, list[list[Any]]] = {}
    latency: dict[str, dict[str, float]] = {}
    lat_q = queries[: args.latency_queries]
    for name, retr in retrievers.items():
        t1 = time.perf_counter()
        hits = retr.search(queries, kmax)
        batched = (time.perf_counter() - t1) * 1000 / len(queries)
        hits_by[name] = hits
        ranks = [first_hit_rank(h, a) for h, a in zip(hits, aliases, strict=True)]
        table = recall_table(records, ranks)
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
        ranks = [first_hit_rank(h, a) for h, a in zip(fh, aliases, strict=True)]
        table = recall_table(records, ranks)
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
        from eval.data.selection import stratified_sample

        lp = default_labels_path(settings)
        labels = load_labels(lp) if lp.is_file() else {}
        known = load_decompositions(args.decompositions) if args.decompositions else None
        pool = [rec for rec in records if rec.question_id in known] if known else records
        chosen = stratified_sample(pool, labels, args.coverage, settings.eval.sample_seed)
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
