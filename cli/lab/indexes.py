"""The lab's ``index`` actions: ``eval`` (answer recall and latency of retrieval configs on
Wiki-NFQA), ``paired`` (two configs' paired difference) and ``judge`` (LLM-judged relevance);
``adapt`` lives in :mod:`cli.lab.index_adapt`."""

from __future__ import annotations

import argparse
from pathlib import Path

from cli.lab.index_adapt import register as register_adapt
from eval.data.labels import default_labels_path
from eval.retrieval.evaluate import evaluate, format_table, judge
from eval.retrieval.paired import format_paired, load_ranks, paired_rows, write_paired
from typed_rag.config import Settings
from typed_rag.errors import UserError


def register(index_sub: argparse._SubParsersAction) -> None:
    """Add the lab's actions to the runtime's ``index`` group."""
    register_adapt(index_sub)

    ev = index_sub.add_parser(
        "eval",
        help="answer recall@k and latency of retrieval configs on Wiki-NFQA",
        description="Answer recall@1/5/10/20/100 (gold answer string in the top k, the "
        "definition of wiki-corpus/coverage.json) over the Wiki-NFQA questions, per subset "
        "and per question type with a labels file, and single-query latency p50, for "
        "several configs side by side. Today's BM25 and the configured default are always "
        "included. Writes OUT/summary.json and OUT/ranks.json.",
    )
    ev.add_argument(
        "configs",
        nargs="*",
        metavar="CONFIG",
        help="bm25 | rm3[:DOCS:TERMS:WEIGHT] [+MODEL-rerank|rrf@DEPTH], MODEL = minilm, "
        "mpnet or a sentence-transformers name/folder; e.g. bm25+mpnet-rrf@30",
    )
    ev.add_argument("--limit", type=int, help="only N questions, spread evenly over the file order")
    ev.add_argument("--subsets", help="comma-separated Wiki-NFQA subsets (default: all six)")
    ev.add_argument(
        "--labels",
        type=Path,
        help="question-type labels JSON (eval label); default: <home>/eval/wikinfqa-labels.json if present",
    )
    ev.add_argument("--latency-queries", type=int, default=50, help="questions timed one by one")
    ev.add_argument("--batch", type=int, default=16, help="questions per batched search call")
    ev.add_argument("--out", type=Path, default=Path("results/retrieval"), help="output folder")
    ev.set_defaults(func=_index_eval)

    pr = index_sub.add_parser(
        "paired",
        help="paired recall@k difference of two configs `index eval` measured",
        description="Recall@1/5/10/20/100 of config A minus config B, question by question, "
        "with a bootstrap 95% interval over the questions and the questions each wins, "
        "from OUT/ranks.json (so both must come from `index eval` on the same questions). "
        "Adds the rows to OUT/paired.json, replacing earlier rows of the same pair.",
    )
    pr.add_argument("a", metavar="A", help="a config name as in summary.json")
    pr.add_argument("b", metavar="B", help="the config it is compared with (e.g. the default)")
    pr.add_argument("--out", type=Path, default=Path("results/retrieval"), help="results folder")
    pr.set_defaults(func=_index_paired)

    jd = index_sub.add_parser(
        "judge",
        help="LLM-judged relevance of the passages retrieved for the pipelines' sub-queries",
        description="Take the sub-queries, keywords and perspectives that the typed-rag "
        "method retrieved for in an evaluation run (its answers.jsonl), a fixed seeded "
        "sample of them, and have the LLM judge (temperature 0) say whether each of the "
        "top-k passages of each config is about its query. Writes OUT/judged.json and adds "
        "the rates to OUT/summary.json.",
    )
    jd.add_argument("answers", type=Path, help="an evaluation run's answers.jsonl")
    jd.add_argument("configs", nargs="*", metavar="CONFIG", help="as for `index eval`")
    jd.add_argument("--sample", type=int, default=40, help="queries judged (default 40)")
    jd.add_argument("--seed", type=int, default=42, help="sample and judge seed")
    jd.add_argument("-k", type=int, default=None, help="passages per query (retrieval.top_k)")
    jd.add_argument("--method", default="typed-rag", help="the run's method to read")
    jd.add_argument("--out", type=Path, default=Path("results/retrieval"), help="output folder")
    jd.set_defaults(func=_index_judge)


def _index_eval(args: argparse.Namespace, settings: Settings) -> int:
    if args.limit is not None and args.limit < 1:
        raise UserError(f"--limit must be at least 1, got {args.limit}")
    if args.latency_queries < 1 or args.batch < 1:
        raise UserError("--latency-queries and --batch must be at least 1")
    labels = args.labels
    if labels is None:
        found = default_labels_path(settings)
        labels = found if found.is_file() else None
    elif not labels.is_file():
        raise UserError(f"labels file not found: {labels}")
    rows = evaluate(
        settings,
        args.configs,
        limit=args.limit,
        subsets=args.subsets,
        labels_path=labels,
        latency_queries=args.latency_queries,
        batch=args.batch,
        out_dir=args.out,
    )
    print()
    print(f"Answer recall on Wiki-NFQA ({rows[0]['n']} questions)")
    print(format_table(rows))
    print(f"wrote {args.out / 'summary.json'}")
    return 0


def _index_paired(args: argparse.Namespace, settings: Settings) -> int:
    rows = paired_rows(load_ranks(args.out), args.a, args.b)
    print(format_paired(rows))
    print(f"wrote {write_paired(args.out, rows)}")
    return 0


def _index_judge(args: argparse.Namespace, settings: Settings) -> int:
    k = settings.retrieval.top_k if args.k is None else args.k
    if k < 1 or args.sample < 1:
        raise UserError("-k and --sample must be at least 1")
    rows = judge(
        settings,
        args.answers,
        args.configs,
        sample=args.sample,
        seed=args.seed,
        k=k,
        out_dir=args.out,
        method=args.method,
    )
    print(f"{'config':<28} {'queries':>7} {'passages':>8} {'irrelevant':>10} {'unparsed':>8}")
    for r in rows:
        rate = "-" if r["irrelevant_rate"] is None else f"{r['irrelevant_rate']:.3f}"
        print(
            f"{r['config']:<28} {r['queries']:>7} {r['passages']:>8} {rate:>10} {r['unparsed']:>8}"
        )
    print(f"wrote {args.out / 'judged.json'}")
    return 0
