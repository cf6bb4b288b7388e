"""``typed-rag eval grounding``: how faithful a run's answers are to the passages they show
(issue 77; the measures are defined in :mod:`eval.grounding.measure`)."""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
from pathlib import Path

from cli.lab.eval_papers import index_lookup
from cli.lab.eval_shared import (
    probability_judge,
    require_token_probabilities,
    scorer_args,
    scorer_settings_for,
)
from cli.lab.eval_support import run_answers
from eval.data.methods import parse_methods
from eval.grounding import validity
from eval.grounding.run import JUDGES, evaluate_grounding
from eval.runs.manifest import scorer_name
from eval.runs.resume import progress_bar
from eval.runs.runner import SCORES
from eval.store import JsonlStore, read_jsonl
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.retrieval.collections import collection_settings

COLUMNS = (
    "supported_share",
    "uncited_share",
    "contradiction_share",
    "code_span_faithful_share",
    "unanswerable_declined_share",
    "mrr",
)


def register(eval_sub: argparse._SubParsersAction) -> None:
    p = eval_sub.add_parser(
        "grounding",
        help="faithfulness of a run's answers to their shown passages: supported, uncited "
        "and contradicted sentences, code spans, declined unanswerable questions; resumable",
    )
    p.add_argument(
        "run_dirs",
        type=Path,
        nargs="+",
        metavar="RUN",
        help="`eval run --data DEVSET` directories (e.g. one of the answerable questions, one "
        "of the unanswerable ones), measured together",
    )
    p.add_argument("--data", type=Path, required=True, help="the devset JSONL the run answered")
    p.add_argument(
        "--collection", help="the collection the run searched (passage texts for the judges)"
    )
    p.add_argument("--when", choices=("before", "after"), required=True, help="the row's state")
    p.add_argument("--methods", default="llm,rag,typed-rag", help="the run's methods (comma list)")
    p.add_argument("--out", type=Path, default=Path("results/grounding"), help="output folder")
    p.add_argument("--batch-size", type=int, default=16, help="judge requests per engine call")
    p.add_argument(
        "--judges",
        default=",".join(JUDGES),
        help="comma list of support,contradiction; 'none': the judge-free measures only "
        "(code spans, uncited, declines, MRR), no model loaded",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    scorer_args(p, "judge")
    p.set_defaults(func=cmd_grounding)

    v = eval_sub.add_parser(
        "grounding-validity",
        help="the support and contradiction judges on known cases from a devset: copied, "
        "reference, flipped and wrong-passage sentences",
    )
    v.add_argument("--data", type=Path, required=True, help="a devset JSONL (eval devset)")
    v.add_argument("--collection", required=True, help="the collection it was written from")
    v.add_argument("--n", type=int, default=40, help="records used (the first N answerable)")
    v.add_argument(
        "--out", type=Path, default=Path("results/grounding/validity.json"), help="JSON out"
    )
    v.add_argument("--batch-size", type=int, default=16, help="probes per engine call")
    scorer_args(v, "judge")
    v.set_defaults(func=cmd_validity)


def parse_judges(text: str) -> list[str]:
    """``--judges``: a comma list of the judges, or ``none``."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["none"]:
        return []
    unknown = [n for n in names if n not in JUDGES]
    if unknown or not names:
        raise UserError(f"--judges: use a comma list of {', '.join(JUDGES)}, or none")
    return list(dict.fromkeys(names))


def cmd_grounding(args: argparse.Namespace, settings: Settings) -> int:
    judges = parse_judges(args.judges)
    if judges:  # the support verdicts are token probabilities: refuse before reading the runs
        require_token_probabilities(scorer_settings_for(settings, args), "the support judge")
    methods = parse_methods(args.methods)
    if not args.data.is_file():
        raise UserError(f"no devset at {args.data}")
    answers = [a for run in args.run_dirs for a in run_answers(run, methods, None)]
    scores = [
        s for run in args.run_dirs if (run / SCORES).is_file() for s in read_jsonl(run / SCORES)
    ]
    ids = [(a["method"], str(a["question_id"])) for a in answers]
    if len(set(ids)) < len(ids):
        raise UserError("the runs answer some question twice: give runs of disjoint questions")
    records = list(JsonlStore(args.data, key=lambda r: str(r["id"]), readonly=True))
    scorer, engine = probability_judge(settings, args, "support judge") if judges else (None, None)
    lookup = index_lookup(collection_settings(settings, args.collection))
    bar = progress_bar(0, "grounding verdicts", enabled=not args.no_progress)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    async def go() -> list[dict]:
        run = functools.partial(
            evaluate_grounding,
            answers=answers,
            records=records,
            scores=scores,
            out=args.out,
            when=args.when,
            model=scorer_name(scorer) if scorer is not None else "",
            methods=methods,
            lookup=lookup,
            batch_size=args.batch_size,
            on_progress=progress,
            meta={"data": str(args.data), "collection": args.collection},
            judges=judges,
        )
        if engine is None:
            return await run(None)
        async with engine:
            return await run(engine)

    try:
        rows = asyncio.run(go())
    except KeyError as exc:  # a passage id the collection does not hold
        raise UserError(f"{exc.args[0]} (is this the collection the run searched?)") from None
    finally:
        bar.close()
    print(f"{'method':<10} {'n':>4} " + " ".join(f"{c[:12]:>12}" for c in COLUMNS))
    for r in rows:
        cells = ["-" if r[c] is None else f"{r[c]:.3f}" for c in COLUMNS]
        print(f"{r['method']:<10} {r['n']:>4} " + " ".join(f"{c:>12}" for c in cells))
    print(f"wrote {args.out / 'summary.json'}")
    return 0


def cmd_validity(args: argparse.Namespace, settings: Settings) -> int:
    require_token_probabilities(scorer_settings_for(settings, args), "the support judge")
    if not args.data.is_file():
        raise UserError(f"no devset at {args.data}")
    if args.n < 2:
        raise UserError("--n must be at least 2 (the wrong passage is another record's)")
    records = [
        r
        for r in JsonlStore(args.data, key=lambda r: str(r["id"]), readonly=True)
        if r.get("answerable", True)
    ][: args.n]
    lookup = index_lookup(collection_settings(settings, args.collection))
    texts = dict(lookup([str(r["passage_id"]) for r in records]))
    items = validity.probes(records, texts)
    scorer, engine = probability_judge(settings, args, "support judge")

    async def go() -> list[dict]:
        async with engine:
            return await validity.judge_probes(engine, items, args.batch_size)

    rows = asyncio.run(go())
    summary = {
        "judge": scorer_name(scorer),
        "data": str(args.data),
        "records": len(records),
        "cases": validity.rates(rows),
        "probes": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    for case, r in summary["cases"].items():
        print(
            f"{case:<14} n={r['n']:<4} supported {r['supported']}  contradicted {r['contradicted']}"
        )
    print(f"wrote {args.out}")
    return 0
