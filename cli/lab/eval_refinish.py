"""``typed-rag eval refinish``: a run's stored answers re-finished by today's scaffolding guard,
with the share of answers leaking scaffolding before and after (:mod:`eval.runs.refinish`);
``eval refinish-check``: the changed answers' paired quality once judged
(:mod:`eval.reports.refinish_check`)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from cli.lab.eval_papers import index_lookup
from cli.lab.eval_shared import (
    require_token_probabilities,
    scorer_args,
    scorer_settings_for,
    warn_if_self_judged,
)
from eval.data.methods import parse_methods
from eval.reports import refinish_check
from eval.runs.manifest import scorer_name
from eval.runs.refinish import REPORT, refinish
from typed_rag import engines
from typed_rag.config import Settings


def register(eval_sub: argparse._SubParsersAction) -> None:
    p = eval_sub.add_parser(
        "refinish",
        help="copy a run with its stored answers re-finished by the scaffolding guard (no "
        "model call): leak shares before/after, changed answers left to judge",
    )
    p.add_argument("run_dir", type=Path, help="a directory made by `eval run`")
    p.add_argument("--out", type=Path, required=True, help="the copy (a new directory)")
    p.add_argument(
        "--methods", default="rag,typed-rag", help="the methods whose answers to re-finish"
    )
    p.set_defaults(func=cmd_refinish)

    p = eval_sub.add_parser(
        "refinish-check",
        help="paired quality of a judged `eval refinish` copy's changed answers: MRR, answers "
        "citing, cited sentences supported (support verdicts cached)",
    )
    p.add_argument("run_dir", type=Path, help="the run that was re-finished")
    p.add_argument("--copy", type=Path, required=True, help="its `eval refinish` copy, judged")
    p.add_argument("--out", type=Path, required=True, help="check.json and the support verdicts")
    scorer_args(p, "judge")
    p.set_defaults(func=cmd_check)


def render(report: dict[str, Any]) -> str:
    """The leak shares before and after, one line per method."""
    lines = ["method      leaking before     leaking after      changed"]
    for method in report["methods"]:
        b, a = report["before"][method], report["after"][method]
        n = sum(c["method"] == method for c in report["changed"])
        lines.append(
            f"{method:<11} {b['leaking']:>3}/{b['answers']} {b['share']:6.1%}   "
            f"{a['leaking']:>3}/{a['answers']} {a['share']:6.1%}   {n:>4}"
        )
    return "\n".join(lines)


def cmd_refinish(args: argparse.Namespace, settings: Settings) -> int:
    report = refinish(args.run_dir, args.out, parse_methods(args.methods), index_lookup(settings))
    print(render(report))
    print(
        f"wrote {args.out} ({REPORT}: the changed answers). Judge them with the run's own "
        f"command plus `--stored-only --out {args.out}`, then `typed-rag eval splice "
        f'{args.run_dir} --from {args.out} --changed "REASON"`.'
    )
    return 0


def cmd_check(args: argparse.Namespace, settings: Settings) -> int:
    scorer = scorer_settings_for(settings, args)
    require_token_probabilities(scorer, "the support judge")
    warn_if_self_judged(settings, scorer, "support judge")
    engine = engines.build_engine(scorer)

    async def go() -> dict[str, Any]:
        async with engine:
            return await refinish_check.refinish_check(
                args.run_dir,
                args.copy,
                args.out,
                engine,
                model=scorer_name(scorer),
                lookup=index_lookup(settings),
            )

    check = asyncio.run(go())
    (args.out / "check.json").write_text(json.dumps(check, indent=1) + "\n", encoding="utf-8")
    methods = [m for m in check if m not in ("run", "copy", "judge")]
    print(refinish_check.render(check, methods))
    print(f"wrote {args.out / 'check.json'}")
    return 0
