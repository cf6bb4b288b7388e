"""``typed-rag qtree build|summary|train``: the QTREE dataset over Wiki-NFQA and QPlanner training."""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
from pathlib import Path

from cli.lab.eval_shared import (
    data_args,
    load_data,
    require_token_probabilities,
    scorer_args,
    scorer_settings_for,
)
from eval.constraints.dataset import load_set
from training.qtree.dataset import QTreeConfig, QTreeQuestion, build_qtree_dataset
from training.qtree.summary import write_summary
from typed_rag import engines
from typed_rag.config import Settings
from typed_rag.errors import UserError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("qtree", help="QTREE outlines for coverage-conditioned questions")
    qsub = parser.add_subparsers(dest="qtree_command", required=True, metavar="SUBCOMMAND")

    p = qsub.add_parser("build", help="trees, instructions and judged outlines; resumable")
    p.add_argument("--out", type=Path, required=True, help="dataset folder (JSONL files)")
    p.add_argument("--first", type=int, default=200, help="the first N of a seeded shuffle")
    p.add_argument("--seed", type=int, default=42, help="the shuffle of the questions")
    p.add_argument(
        "--conditioned",
        type=Path,
        help="also a coverage-conditioned set (from `eval constraints-set`), built first; its "
        "questions keep their own coverage request, so no instructions are generated for them",
    )
    p.add_argument(
        "--chunk",
        type=int,
        default=QTreeConfig.chunk,
        help="questions per engine batch; results are saved after each, so an interrupted "
        "build loses at most one chunk",
    )
    data_args(p)
    scorer_args(p, "tree writer and outline judge")
    p.set_defaults(func=cmd_build)

    p = qsub.add_parser("summary", help="write the dataset's summary.json")
    p.add_argument("dataset", type=Path, help="a folder made by `qtree build`")
    p.add_argument("--out", type=Path, help="summary path (default: DATASET/summary.json)")
    p.set_defaults(func=cmd_summary)

    p = qsub.add_parser("train", help="QPlanner: SFT on the best outlines, then DPO (needs trl)")
    p.add_argument("dataset", type=Path, help="a folder made by `qtree build`")
    p.add_argument("--base", type=Path, required=True, help="a transformers causal LM folder")
    p.add_argument("--out", type=Path, required=True, help="where the planner is written")
    p.add_argument("--no-tree", action="store_true", help="train the outline only, no tree")
    p.add_argument("--no-dpo", action="store_true", help="stop after supervised fine-tuning")
    p.set_defaults(func=cmd_train)


def cmd_build(args: argparse.Namespace, settings: Settings) -> int:
    if args.chunk < 1:
        raise UserError(f"--chunk must be at least 1, got {args.chunk}")
    if args.first < 0:
        raise UserError(f"--first must be 0 or more, got {args.first}")
    # Outlines are scored from token probabilities, after they are all written: refuse now.
    require_token_probabilities(scorer_settings_for(settings, args), "the QTREE outline judge")
    questions: list[QTreeQuestion] = []
    if args.conditioned is not None:
        questions += [
            QTreeQuestion(
                it.question_id, it.question, source=it.subset,
                conditioned_question=it.conditioned_question,
            )
            for it in load_set(args.conditioned)
        ]  # fmt: skip
    if args.first:
        records = list(load_data(args, settings).records)
        random.Random(args.seed).shuffle(records)
        taken = {q.question_id for q in questions}
        questions += [
            QTreeQuestion(r.question_id, r.question, source=r.subset)
            for r in records[: args.first]
            if r.question_id not in taken
        ]
    if not questions:
        raise UserError("no questions: give --first N (Wiki-NFQA) and/or --conditioned FILE")
    scorer = scorer_settings_for(settings, args)
    engine = engines.build_engine(scorer)
    config = QTreeConfig(chunk=args.chunk)

    async def go() -> object:
        async with engine:
            return await build_qtree_dataset(engine, questions, args.out, config)

    stats = asyncio.run(go())
    print(f"{stats}\nwrote {write_summary(args.out)}")
    return 0


def cmd_summary(args: argparse.Namespace, settings: Settings) -> int:
    if not args.dataset.is_dir():
        raise UserError(f"no QTREE dataset folder at {args.dataset}")
    print(f"wrote {write_summary(args.dataset, args.out)}")
    return 0


def cmd_train(args: argparse.Namespace, settings: Settings) -> int:
    try:
        from training.qtree.planner import PlannerTrainConfig, train_planner  # heavy: trl
    except ImportError as exc:
        raise UserError(
            f"planner training needs the planner extra (pip install .[planner]): {exc}"
        ) from None
    if not (args.base / "config.json").exists():
        raise UserError(f"--base {args.base} is not a transformers model folder (no config.json)")
    cfg = PlannerTrainConfig(with_tree=not args.no_tree, dpo=not args.no_dpo)
    report = train_planner(args.dataset, args.base, args.out, cfg)
    print(report, file=sys.stdout)
    return 0
