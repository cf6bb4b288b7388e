"""``typed-rag eval judge-validity``: how often judging protocols order Wiki-NFQA answers of
known quality correctly (the protocols and their summary are in :mod:`eval.judging.validity_run`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cli.lab.eval_shared import (
    data_args,
    load_data,
    obtain_labels,
    require_token_probabilities,
    scorer_args,
    scorer_settings_for,
)
from eval.data.graded import given_labels
from eval.judging.protocols import READS_PROBABILITIES
from eval.judging.validity import COPIES, probes
from eval.judging.validity_run import render, run_validity
from typed_rag.config import Settings


def register(eval_sub: argparse._SubParsersAction) -> None:
    p = eval_sub.add_parser(
        "judge-validity",
        help="how often judging protocols order Wiki-NFQA answers of known quality correctly",
    )
    data_args(p)
    p.add_argument("--out", type=Path, default=Path("results/judge"), help="output folder")
    p.add_argument("--questions", type=int, default=200, help="questions (default 200)")
    p.add_argument(
        "--pool", type=int, default=80, help="questions the generator answers (default 80)"
    )
    p.add_argument(
        "--protocols",
        default="linkage-prob",
        help="comma list of linkage-sampled, linkage, linkage-prob, rubric-prob, pairwise-prob",
    )
    p.add_argument(
        "--ensembles",
        default="",
        help="comma list of ensembles to summarize, e.g. linkage-prob+rubric-prob or "
        "linkage-prob@MODEL_A+linkage-prob@MODEL_B (models as in summary.json)",
    )
    p.add_argument("--labels", type=Path, help="question types from `eval label` (JSON)")
    p.add_argument("--seed", type=int, default=7, help="question and candidate draw")
    p.add_argument(
        "--probes",
        default=",".join(COPIES),
        help=f"comma list of the grade-1 copies to judge ({', '.join(COPIES)}; default all), or "
        "none (a store judged before a probe existed is then summarized without new judgements)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    scorer_args(p, "judge")
    p.set_defaults(func=cmd_judge_validity)


def cmd_judge_validity(args: argparse.Namespace, settings: Settings) -> int:
    judge = scorer_settings_for(settings, args)
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    reading = [p for p in protocols if p in READS_PROBABILITIES]
    if reading:  # before the generator pool is made, which takes the longest
        require_token_probabilities(
            judge,
            "judge protocol " + ", ".join(reading),
            "--protocols with sampled ones only (linkage, linkage-sampled)",
        )
    data = load_data(args, settings)
    labels = obtain_labels(settings, data.records, args.out, args.labels, given_labels(data))
    summary = run_validity(
        settings,
        judge,
        data.records,
        labels,
        args.out,
        questions=args.questions,
        pool_size=args.pool,
        protocols=protocols,
        ensembles=[e.strip() for e in args.ensembles.split(",") if e.strip()],
        seed=args.seed,
        progress=not args.no_progress,
        copies=probes(args.probes),
    )
    print(render(summary))
    print(f"\nwrote {args.out / 'summary.json'}")
    return 0
