"""``typed-rag eval constraints-set|constraints-run|constraints-report`` (issue 8.3).

Coverage-conditioned questions: build the set, answer it per ``constraints.mode``
arm and judge compliance, and report a run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from cli.lab.eval_shared import (
    data_args,
    load_data,
    require_protocol_probabilities,
    scorer_args,
    scorer_settings_for,
    warn_if_self_judged,
)
from eval import constraints
from eval.data.labels import default_labels_path, load_labels
from eval.judging.resample import MAX_RESAMPLES
from eval.runs.manifest import scorer_name, write_manifest
from eval.runs.resume import EvalAborted
from typed_rag import engines
from typed_rag.config import Settings
from typed_rag.errors import UserError

log = logging.getLogger(__name__)


def register(eval_sub: argparse._SubParsersAction) -> None:
    """Add the ``constraints-*`` subcommands under ``eval``."""
    p = eval_sub.add_parser(
        "constraints-set",
        help="build coverage-conditioned questions (include/exclude a subtopic) from Wiki-NFQA",
    )
    data_args(p)
    p.add_argument("--n", type=int, default=12, help="questions in the set (default 12)")
    p.add_argument("--out", type=Path, required=True, help="set file to write (JSONL)")
    p.add_argument(
        "--seed", type=int, default=42, help="question choice, include/exclude and template"
    )
    p.add_argument("--labels", type=Path, help="question types from `eval label` (JSON)")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out")
    scorer_args(p, "subtopic-writing (default: the generator's)")
    p.set_defaults(func=cmd_constraints_set)

    p = eval_sub.add_parser(
        "constraints-run",
        help="answer a constraint set per constraints.mode arm, judge compliance, report; resumable",
    )
    p.add_argument(
        "--set",
        "--set-file",
        dest="set",
        type=Path,
        required=True,
        help="set file from `constraints-set` (after the subcommand; the global --set KEY=VALUE "
        "goes before `eval`)",
    )
    p.add_argument("--out", type=Path, required=True, help="run directory (created or resumed)")
    p.add_argument(
        "--arms",
        default="off,cue",
        help="comma list of off,cue,always,outline (default off,cue); the report pairs "
        "every two arms",
    )
    p.add_argument(
        "--linkage",
        action="store_true",
        help="also rank every answer among its base question's Wiki-NFQA references with the "
        "LINKAGE judge (eval.judge_protocol), paired between arms in the report",
    )
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    data_args(p)
    scorer_args(p, "judge")
    p.set_defaults(func=cmd_constraints_run)

    p = eval_sub.add_parser("constraints-report", help="report of a `constraints-run` directory")
    p.add_argument("run_dir", type=Path, help="a directory made by `eval constraints-run`")
    p.add_argument("--out", type=Path, help="write the report here instead of the run directory")
    p.set_defaults(func=cmd_constraints_report)


def _stored_labels(settings: Settings, labels_file: Path | None) -> dict[str, Any]:
    """--labels, else the default labels file if it exists, else none (any question will do)."""
    if labels_file is not None:
        return load_labels(labels_file)
    if default_labels_path(settings).exists():
        return load_labels(default_labels_path(settings))
    log.warning("no stored question types; picking from all questions (run `eval label` first)")
    return {}


def cmd_constraints_set(args: argparse.Namespace, settings: Settings) -> int:
    if args.n < 1:
        raise UserError(f"--n must be at least 1, got {args.n}")
    if args.out.exists() and not args.force:
        raise UserError(f"{args.out} exists; pass --force to overwrite it")
    data = load_data(args, settings)
    labels = _stored_labels(settings, args.labels)
    writer = scorer_settings_for(settings, args)
    print(f"asking {scorer_name(writer)} for subtopics of up to {args.n} question(s)")

    async def build() -> Any:
        engine = engines.build_engine(writer)
        await engine.start()
        try:
            return await constraints.build_constraint_set(
                engine,
                data.records,
                args.n,
                labels=labels,
                seed=args.seed,
                llm_seed=writer.sampling.seed,
                max_resamples=MAX_RESAMPLES,
                temperature=writer.sampling.temperature,
                top_p=writer.sampling.top_p,
            )
        finally:
            await engine.close()

    made = asyncio.run(build())
    if not made.items:
        raise UserError(
            f"no usable subtopics for any of {made.asked} question(s); nothing written "
            f"(statuses: {', '.join(sorted({s['status'] for s in made.skipped}))})"
        )
    path = constraints.write_set(args.out, made.items)
    skipped_path = args.out.with_name(args.out.name + ".skipped.jsonl")
    if made.skipped:
        skipped_path.write_text(
            "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in made.skipped),
            encoding="utf-8",
        )
    elif skipped_path.exists():
        skipped_path.unlink()
    types = ", ".join(f"{t} {n}" for t, n in sorted(_count(i.type for i in made.items).items()))
    print(
        f"wrote {len(made.items)} item(s) to {path} ({types}); asked {made.asked}, "
        f"skipped {len(made.skipped)}" + (f" (see {skipped_path})" if made.skipped else "")
    )
    if len(made.items) < args.n:
        print(f"warning: only {len(made.items)} of {args.n} wanted; candidates were exhausted")
    return 0


def _count(values: Any) -> dict[str, int]:
    return dict(Counter(values))


def cmd_constraints_run(args: argparse.Namespace, settings: Settings) -> int:
    scorer = scorer_settings_for(settings, args)
    if args.linkage:  # scored by eval.judge_protocol, which may read token probabilities
        require_protocol_probabilities(settings, scorer)
    arms = constraints.parse_arms(args.arms)
    items = constraints.load_set(args.set)
    warn_if_self_judged(settings, scorer, "judge")
    run_dir: Path = args.out
    subsets = {it.subset for it in items}
    constraints.check_run_set(run_dir, args.set)
    write_manifest(
        run_dir,
        settings.model_copy(update={"mode": "typed-rag"}),
        scorer,
        methods=arms,
        subsets=sorted(subsets),
        question_ids=[it.question_id for it in items],
        options={
            "kind": "constraints",
            "set": str(args.set),
            "set_sha256": constraints.file_sha256(args.set),
        },
    )
    print(
        f"answering {len(items)} conditioned question(s) x {len(arms)} arm(s) ({', '.join(arms)}); "
        f"generator {settings.engine.backend}:{settings.engine.model}, judge {scorer_name(scorer)}"
    )

    def make_judge() -> Any:
        return engines.build_engine(scorer)

    references = None
    if args.linkage:  # only the set's subsets, unless --subsets names others
        if args.subsets == "all":
            args = argparse.Namespace(**{**vars(args), "subsets": ",".join(sorted(subsets))})
        references = {r.question_id: r for r in load_data(args, settings).records}

    runner = constraints.ConstraintRunner(
        settings,
        run_dir,
        answerers=constraints.SharedTypedRAG(),
        scorer_engine=make_judge,
        scorer_settings=scorer,
        progress=not args.no_progress,
        references=references,
    )
    try:
        stats = asyncio.run(runner.run(items, arms))
    except EvalAborted as exc:
        print(
            f"typed-rag: {exc}\nfinished answers and verdicts are kept in {run_dir}; rerun the "
            "same command to resume",
            file=sys.stderr,
        )
        return 1
    for arm, c in stats.answers.items():
        print(f"answers {arm}: {c.computed} new, {c.done_before} resumed, {c.failed} failed")
    j = stats.judgements
    print(f"judgements: {j.computed} new, {j.done_before} resumed, {j.failed} never parsed")
    if stats.linkage is not None:
        print(f"linkage: {stats.linkage.computed} new, {stats.linkage.done_before} resumed")
    md, _ = constraints.write_constraints_report(run_dir, settings)
    print(md.read_text(encoding="utf-8"))
    print(f"report: {md}")
    return 0


def cmd_constraints_report(args: argparse.Namespace, settings: Settings) -> int:
    md, js = constraints.write_constraints_report(args.run_dir, settings, args.out)
    print(md.read_text(encoding="utf-8"))
    print(f"wrote {md}, {js}")
    return 0
