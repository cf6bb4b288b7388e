"""``typed-rag eval support``: are the cited sentences of a run's answers supported by their
citations? (issue 15; the judge and its definition of "supported" are in :mod:`eval.citation_support`)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from cli.lab.eval_papers import index_lookup
from cli.lab.eval_shared import (
    probability_judge,
    require_token_probabilities,
    scorer_args,
    scorer_settings_for,
)
from eval.citation_support import common_rows, evaluate_support, render
from eval.data.methods import parse_methods
from eval.runs.manifest import read_manifest, scorer_name
from eval.runs.resume import progress_bar
from eval.runs.runner import ANSWERS
from eval.store import JsonlStore
from typed_rag.config import Settings
from typed_rag.errors import UserError


def register(eval_sub: argparse._SubParsersAction) -> None:
    p = eval_sub.add_parser(
        "support",
        help="judge whether each cited sentence of a run's answers is supported by the "
        "passage it cites (yes/no token probabilities); resumable",
    )
    p.add_argument("run_dir", type=Path, help="a directory made by `eval run`")
    p.add_argument(
        "--methods", default="rag,typed-rag", help="the run's methods to judge (comma list)"
    )
    p.add_argument(
        "--limit", type=int, help="only the first N of the questions all methods answered"
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("results/support"),
        help="verdicts, support.jsonl and summary.json (default results/support)",
    )
    p.add_argument("--batch-size", type=int, default=16, help="judge requests per engine call")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    scorer_args(p, "judge")
    p.set_defaults(func=cmd_support)


def run_answers(run_dir: Path, methods: list[str], limit: int | None) -> list[Any]:
    read_manifest(run_dir)  # a UserError for a folder `eval run` did not make
    if not (run_dir / ANSWERS).is_file():
        raise UserError(f"{run_dir} has no answers yet (no {ANSWERS})")
    rows = list(JsonlStore(run_dir / ANSWERS, readonly=True))
    present = {str(r.get("method")) for r in rows}
    absent = [m for m in methods if m not in present]
    if absent:
        raise UserError(
            f"{run_dir} has no answers of {', '.join(absent)}; it has: "
            + ", ".join(sorted(present))
        )
    order = [str(q) for q in read_manifest(run_dir).get("question_ids") or []]
    chosen = common_rows(rows, methods, order, limit)
    if not chosen:
        raise UserError(f"no question of {run_dir} was answered by all of {', '.join(methods)}")
    return chosen


def cmd_support(args: argparse.Namespace, settings: Settings) -> int:
    require_token_probabilities(scorer_settings_for(settings, args), "the support judge")
    methods = parse_methods(args.methods)
    if args.limit is not None and args.limit < 1:
        raise UserError("--limit must be at least 1")
    answers = run_answers(args.run_dir, methods, args.limit)
    scorer, engine = probability_judge(settings, args, "support judge")
    bar = progress_bar(0, "support verdicts", enabled=not args.no_progress)
    bar.unit = "verdict"

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    async def go() -> dict[str, Any]:
        async with engine:
            return await evaluate_support(
                engine,
                answers,
                args.out,
                model=scorer_name(scorer),
                methods=methods,
                lookup=index_lookup(settings),
                batch_size=args.batch_size,
                on_progress=progress,
                meta={"run_dir": str(args.run_dir)},
            )

    try:
        summary = asyncio.run(go())
    except KeyError as exc:  # a passage id the index does not hold
        raise UserError(f"{exc.args[0]} (is this the index the run used?)") from None
    finally:
        bar.close()
    print(render(summary))
    print(f"wrote {args.out / 'support.jsonl'}, {args.out / 'summary.json'}")
    return 0
