"""``typed-rag eval label|run|splice``: Wiki-NFQA type labels, resumable LINKAGE runs, splices.

The ``eval`` group is registered here; its other subcommands live beside it:
``judge-validity`` in :mod:`cli.lab.eval_validity`, ``report`` and ``compare`` in
:mod:`cli.lab.eval_reports`, ``constraints-*`` in :mod:`cli.lab.eval_constraints`; what they
share (data and scorer options, the questions' types) in :mod:`cli.lab.eval_shared`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path
from typing import Any

from cli.lab import (
    eval_constraints,
    eval_devset,
    eval_grounding,
    eval_papers,
    eval_refinish,
    eval_reports,
    eval_support,
    eval_validity,
)
from cli.lab.eval_shared import (
    build_classifier,
    data_args,
    load_data,
    obtain_labels,
    require_protocol_probabilities,
    scorer_settings_for,
    warn_if_self_judged,
)
from eval.data.graded import data_source, given_labels
from eval.data.labels import (
    classify_questions,
    default_labels_path,
    distribution_table,
    save_labels,
)
from eval.data.methods import parse_methods
from eval.data.routes import CLASSIFIED
from eval.data.selection import SAMPLE_SEED, select_questions
from eval.data.wikinfqa import parse_subsets
from eval.reports.report import write_report
from eval.runs.distributed import DistributedEvalRunner
from eval.runs.manifest import scorer_name, write_manifest
from eval.runs.refinish import splice_changed
from eval.runs.runner import ANSWERS, EvalRunner
from eval.runs.splice import Classify, splice
from eval.store import read_jsonl
from typed_rag import engines, system
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.types import QuestionType

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``eval`` and its subcommands."""
    parser = sub.add_parser("eval", help="evaluate on Wiki-NFQA with LINKAGE (label, run, report)")
    eval_sub = parser.add_subparsers(dest="eval_command", required=True, metavar="EVAL_COMMAND")

    p = eval_sub.add_parser("label", help="classify every Wiki-NFQA question and store the types")
    data_args(p)
    p.add_argument(
        "--out", type=Path, help="labels JSON (default: <home>/eval/wikinfqa-labels.json)"
    )
    p.set_defaults(func=cmd_label)

    p = eval_sub.add_parser("run", help="answer, score (LINKAGE) and report; resumable")
    data_args(p)
    p.add_argument("--out", type=Path, required=True, help="run directory (created or resumed)")
    p.add_argument("--methods", default="llm,rag,typed-rag", help="comma list of llm,rag,typed-rag")
    p.add_argument("--limit", type=int, help="at most N questions per subset (file order)")
    p.add_argument("--sample", type=int, help="N questions, even over subsets, then by type")
    p.add_argument(
        "--first",
        type=int,
        help="the first N of a seeded shuffle of the selected questions (grow a run in waves)",
    )
    p.add_argument(
        "--types", help="only questions labelled with these types (comma list of nf-cats labels)"
    )
    p.add_argument("--labels", type=Path, help="question types from `eval label` (JSON)")
    p.add_argument("--scorer-config", type=Path, help="TOML settings for the scorer engine")
    p.add_argument("--scorer-backend", help="scorer engine backend (llamacpp, vllm, openai)")
    p.add_argument("--scorer-model", help="scorer model name, path or id")
    p.add_argument("--scorer-base-url", help="scorer OpenAI-compatible base URL")
    p.add_argument(
        "--paper-off-by-one",
        action="store_true",
        help="use the paper's prompt ([[n]] = worse than all) instead of original LINKAGE",
    )
    p.add_argument("--coverage", action="store_true", help="also judge sub-question coverage")
    p.add_argument(
        "--stored-only",
        action="store_true",
        help="answer nothing new: only the selected questions --out already holds an answer "
        "to, judged where they lack a verdict (a replayed run's changed answers)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="spread the questions over Ray actors: 'local' (start Ray here), 'auto' or "
        "ray://HOST:10001; the run directory stays on this machine",
    )
    p.add_argument(
        "--ray-workers",
        type=int,
        metavar="N",
        help="Ray actors (default: one per GPU for vLLM, else one per engine.n_threads CPUs)",
    )
    p.set_defaults(func=cmd_run)

    eval_validity.register(eval_sub)
    eval_reports.register(eval_sub)

    p = eval_sub.add_parser(
        "splice",
        help="move a run to today's type-scoped method options (e.g. method.own_knowledge) "
        "or eval.route (labels, labels-factoid, labels-classifier), "
        "taking the affected answers from a run made with them",
    )
    p.add_argument("run_dir", type=Path, help="the run to move, e.g. results/wiki-nfqa/reranked")
    p.add_argument("--from", dest="source", type=Path, required=True, help="a run made with them")
    p.add_argument("--method", default="typed-rag", help="the method whose answers move")
    p.add_argument(
        "--changed",
        metavar="REASON",
        help="a code change no option names (e.g. `eval refinish`): take every answer of "
        "--methods that differs in --from, with its verdict, recording REASON",
    )
    p.add_argument(
        "--methods", default="rag,typed-rag", help="with --changed: the methods whose answers move"
    )
    p.set_defaults(func=cmd_splice)

    eval_constraints.register(eval_sub)
    eval_papers.register(eval_sub)
    eval_support.register(eval_sub)
    eval_refinish.register(eval_sub)
    eval_devset.register(eval_sub)
    eval_grounding.register(eval_sub)


def _type_list(value: str | None) -> list[str] | None:
    if not value:
        return None
    try:
        return [QuestionType.parse(v).value for v in value.split(",") if v.strip()]
    except ValueError as exc:
        raise UserError(f"--types: {exc}") from None


# ---------------------------------------------------------------------- label


def cmd_label(args: argparse.Namespace, settings: Settings) -> int:
    if args.data is not None and args.out is None:  # the default file is Wiki-NFQA's
        raise UserError("eval label --data needs --out FILE (then `eval run --labels FILE`)")
    data = load_data(args, settings)
    classifier = build_classifier(settings)
    labels = classify_questions(data.records, classifier, settings.classifier.min_confidence)
    path = save_labels(
        labels, args.out or default_labels_path(settings), source=getattr(classifier, "name", "")
    )
    print(distribution_table(labels))
    print(f"\nwrote {path} and {path.with_suffix('.csv')}")
    return 0


# ---------------------------------------------------------------------- run


def stored_questions(records: list[Any], run_dir: Path, methods: list[str]) -> list[Any]:
    """The ``records`` that ``run_dir`` holds an answer of every one of ``methods`` to."""
    answers = run_dir / ANSWERS
    rows = read_jsonl(answers) if answers.exists() else []
    have: dict[str, set[str]] = {}
    for row in rows:
        have.setdefault(str(row.get("question_id")), set()).add(str(row.get("method")))
    kept = [r for r in records if set(methods) <= have.get(r.question_id, set())]
    if not kept:
        raise UserError(
            f"--stored-only: {run_dir} holds no {', '.join(methods)} answer to the selected "
            "questions; drop --stored-only to answer them"
        )
    return kept


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    if args.ray_workers is not None and not args.ray:
        raise UserError("--ray-workers needs --ray ADDRESS (e.g. --ray local)")
    if args.paper_off_by_one:
        settings = settings.with_section("eval", paper_off_by_one=True)
    methods = parse_methods(args.methods)
    subsets = parse_subsets(args.subsets) if args.data is None else []
    scorer = scorer_settings_for(settings, args)
    require_protocol_probabilities(settings, scorer)
    warn_if_self_judged(settings, scorer, "scorer")
    data = load_data(args, settings)
    if args.data is not None:  # a graded file's own subsets
        subsets = sorted({r.subset for r in data.records})
    run_dir: Path = args.out
    run_dir.mkdir(parents=True, exist_ok=True)
    labels = obtain_labels(settings, data.records, run_dir, args.labels, given_labels(data))
    records = select_questions(
        data.records,
        labels,
        args.limit,
        args.sample,
        SAMPLE_SEED,
        _type_list(args.types),
        args.first,
    )
    if args.stored_only:
        records = stored_questions(records, run_dir, methods)
    write_manifest(
        run_dir,
        settings,
        scorer,
        methods=methods,
        subsets=subsets,
        question_ids=[r.question_id for r in records],
        options={
            "limit": args.limit,
            "sample": args.sample,
            "types": args.types,
            "first": args.first,
            "coverage": args.coverage,
            "skipped_bad_records": len(data.bad),
        },
        data=data_source(data),
    )
    print(
        f"evaluating {len(records)} question(s) x {len(methods)} method(s); "
        f"generator {settings.engine.backend}:{settings.engine.model}, scorer {scorer_name(scorer)}"
    )

    # An llm-only run needs no index: TypedRAG tolerates a missing one in llm mode.
    generator = settings.model_copy(update={"mode": "llm"}) if methods == ["llm"] else settings

    def make_answerer() -> Any:
        return system.TypedRAG.from_settings(generator)

    def make_scorer() -> Any:
        return engines.build_engine(scorer)

    if args.ray:  # same phases and files; batches run on Ray actors (eval/runs/distributed.py)
        runner: EvalRunner = DistributedEvalRunner(
            settings,
            run_dir,
            address=args.ray,
            workers=args.ray_workers,
            generator_settings=generator,
            scorer_settings=scorer,
            labels=labels,
            progress=not args.no_progress,
        )
    else:
        runner = EvalRunner(
            settings,
            run_dir,
            answerer=make_answerer,
            scorer_engine=make_scorer,
            scorer_settings=scorer,
            labels=labels,
            progress=not args.no_progress,
        )
    stats = asyncio.run(runner.run(records, methods, coverage=args.coverage))
    for method, c in stats.answers.items():
        print(f"answers {method}: {c.computed} new, {c.done_before} resumed, {c.failed} failed")
    s = stats.scores
    print(f"scores: {s.computed} new, {s.done_before} resumed, {s.failed} never parsed")
    files = write_report(run_dir, settings)
    print(f"report: {files.markdown}")
    return 0


def cmd_splice(args: argparse.Namespace, settings: Settings) -> int:
    if args.changed:
        taken = splice_changed(args.run_dir, args.source, parse_methods(args.methods), args.changed)
        print(
            f"{args.run_dir}: {taken['answers_taken']} changed answers of "
            f"{', '.join(taken['methods'])} taken from {args.source} with their verdicts "
            f"(the rows before: {taken['rows_before']})"
        )
        return 0
    classify = _classify(settings) if settings.eval.route in CLASSIFIED else None
    record = splice(args.run_dir, args.source, args.method, settings, classify)
    print(
        f"{args.run_dir}: {args.method} answers of {', '.join(record['types'])}: "
        f"{record['answers_taken']} taken from {args.source} ({record['scores_taken']} judged), "
        f"{record['answers_removed']} removed for the next `eval run`"
    )
    return 0


def _classify(settings: Settings) -> Classify:
    """The question-type classifier as the routes that read it (``eval.route``) use it."""
    from typed_rag.classifier import build_classifier

    classifier, threshold = build_classifier(settings), settings.classifier.min_confidence
    return lambda questions: classifier.predict(list(questions), threshold)
