"""``typed-rag eval label|run|report``: Wiki-NFQA type labels, LINKAGE runs and their reports."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from typed_rag.config import EngineSettings, Settings, load_settings
from typed_rag.errors import UserError
from typed_rag.types import QuestionType

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``eval`` and its subcommands."""
    parser = sub.add_parser("eval", help="evaluate on Wiki-NFQA with LINKAGE (label, run, report)")
    eval_sub = parser.add_subparsers(dest="eval_command", required=True, metavar="EVAL_COMMAND")

    p = eval_sub.add_parser("label", help="classify every Wiki-NFQA question and store the types")
    _data_args(p)
    p.add_argument(
        "--out", type=Path, help="labels JSON (default: <home>/eval/wikinfqa-labels.json)"
    )
    p.set_defaults(func=cmd_label)

    p = eval_sub.add_parser("run", help="answer, score (LINKAGE) and report; resumable")
    _data_args(p)
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

    p = eval_sub.add_parser(
        "judge-validity",
        help="how often judging protocols order Wiki-NFQA answers of known quality correctly",
    )
    _data_args(p)
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
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    _scorer_args(p, "judge")
    p.set_defaults(func=cmd_judge_validity)

    p = eval_sub.add_parser("report", help="tables, per-type figure, failures and cost of a run")
    p.add_argument("run_dir", type=Path, help="a directory made by `eval run`")
    p.add_argument("--out", type=Path, help="write the report here instead of the run directory")
    p.set_defaults(func=cmd_report)

    _register_constraints(eval_sub)


def _warn_if_self_judged(settings: Settings, scorer: Settings, role: str) -> None:
    """A model judging its own answers is lenient; say so, once per run."""
    from eval.manifest import scorer_name

    if scorer.engine == settings.engine:
        log.warning(
            "the %s is the generator's own model (%s); pass --scorer-model or "
            "--scorer-config for an independent judge",
            role,
            scorer_name(scorer),
        )


# Backends whose engine exposes next-token probabilities (Engine.score_choices).
PROB_BACKENDS = ("llamacpp", "fake")


def _check_judge_backend(settings: Settings, scorer: Settings) -> None:
    protocol = settings.eval.judge_protocol
    if protocol.startswith("linkage-prob") and scorer.engine.backend not in PROB_BACKENDS:
        raise UserError(
            f"judge protocol {protocol} reads token probabilities, which the "
            f"{scorer.engine.backend} backend does not expose; use a llamacpp scorer or "
            "--set eval.judge_protocol=linkage"
        )


def _type_list(value: str | None) -> list[str] | None:
    if not value:
        return None
    try:
        return [QuestionType.parse(v).value for v in value.split(",") if v.strip()]
    except ValueError as exc:
        raise UserError(f"--types: {exc}") from None


def _data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", type=Path, help="Wiki-NFQA folder (default: eval.data_dir)")
    p.add_argument("--subsets", default="all", help="comma list of subsets, or all")
    p.add_argument(
        "--on-error",
        choices=("skip", "stop"),
        default="skip",
        help="bad records: skip and count (default) or stop with an error",
    )


def _load_data(args: argparse.Namespace, settings: Settings) -> Any:
    from eval.wikinfqa import load_wikinfqa

    data = load_wikinfqa(args.data_dir or settings.eval.data_dir, args.subsets, args.on_error)
    if data.bad:
        print(f"skipped {len(data.bad)} bad record(s):")
        for bad in data.bad[:20]:
            print(f"  {bad}")
    if not data.records:
        raise UserError("no valid Wiki-NFQA questions to evaluate")
    return data


def _build_classifier(settings: Settings) -> Any:
    from typed_rag.classifier import build_classifier  # the classifier area's factory

    classifier = build_classifier(settings)
    if classifier is None:
        raise UserError(
            "no question-type classifier is available; run `typed-rag classifier train`"
        )
    return classifier


# ---------------------------------------------------------------------- label


def cmd_label(args: argparse.Namespace, settings: Settings) -> int:
    from eval.labels import (
        classify_questions,
        default_labels_path,
        distribution_table,
        save_labels,
    )

    data = _load_data(args, settings)
    classifier = _build_classifier(settings)
    labels = classify_questions(data.records, classifier, settings.classifier.min_confidence)
    path = save_labels(
        labels, args.out or default_labels_path(settings), source=getattr(classifier, "name", "")
    )
    print(distribution_table(labels))
    print(f"\nwrote {path} and {path.with_suffix('.csv')}")
    return 0


def obtain_labels(
    settings: Settings, records: list[Any], run_dir: Path, labels_file: Path | None
) -> dict[str, Any]:
    """The run's stored labels, else --labels, else the default file; classify what is missing."""
    from eval.labels import classify_questions, default_labels_path, load_labels, save_labels
    from eval.runner import RUN_LABELS

    run_labels = run_dir / RUN_LABELS
    labels: dict[str, Any] = {}
    if run_labels.exists():
        labels = load_labels(run_labels)
    elif labels_file is not None:
        labels = load_labels(labels_file)
    elif default_labels_path(settings).exists():
        labels = load_labels(default_labels_path(settings))
    missing = [r for r in records if r.question_id not in labels]
    if missing:
        log.info("classifying %d question(s) without a stored type", len(missing))
        try:
            classifier = _build_classifier(settings)
        except UserError as exc:
            raise UserError(
                f"{exc} (needed to type {len(missing)} question(s); or run `typed-rag eval "
                "label` first, or pass --labels FILE)"
            ) from None
        labels.update(classify_questions(missing, classifier, settings.classifier.min_confidence))
    save_labels(labels, run_labels, source="run")
    return labels


# ---------------------------------------------------------------------- run


def scorer_settings_for(settings: Settings, args: argparse.Namespace) -> Settings:
    """The scorer's own settings: --scorer-config, else the generator's, then --scorer-* flags."""
    base = load_settings(args.scorer_config) if args.scorer_config else settings
    update = {
        k: v
        for k, v in {
            "backend": args.scorer_backend,
            "model": args.scorer_model,
            "base_url": args.scorer_base_url,
        }.items()
        if v is not None
    }
    if not update:
        return base
    try:
        engine = EngineSettings.model_validate({**base.engine.model_dump(), **update})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(x) for x in first["loc"])
        raise UserError(f"invalid scorer setting {field}: {first['msg']}") from None
    return base.model_copy(update={"engine": engine})


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    from eval.manifest import scorer_name, write_manifest
    from eval.report import write_report
    from eval.runner import EvalRunner, parse_methods
    from eval.selection import select_questions
    from eval.wikinfqa import parse_subsets

    if args.ray_workers is not None and not args.ray:
        raise UserError("--ray-workers needs --ray ADDRESS (e.g. --ray local)")
    if args.paper_off_by_one:
        settings = settings.model_copy(
            update={"eval": settings.eval.model_copy(update={"paper_off_by_one": True})}
        )
    methods = parse_methods(args.methods)
    subsets = parse_subsets(args.subsets)
    scorer = scorer_settings_for(settings, args)
    _check_judge_backend(settings, scorer)
    _warn_if_self_judged(settings, scorer, "scorer")
    data = _load_data(args, settings)
    run_dir: Path = args.out
    run_dir.mkdir(parents=True, exist_ok=True)
    labels = obtain_labels(settings, data.records, run_dir, args.labels)
    records = select_questions(
        data.records,
        labels,
        args.limit,
        args.sample,
        settings.eval.sample_seed,
        _type_list(args.types),
        args.first,
    )
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
    )
    print(
        f"evaluating {len(records)} question(s) x {len(methods)} method(s); "
        f"generator {settings.engine.backend}:{settings.engine.model}, scorer {scorer_name(scorer)}"
    )

    # An llm-only run needs no index: TypedRAG tolerates a missing one in llm mode.
    generator = settings.model_copy(update={"mode": "llm"}) if methods == ["llm"] else settings

    def make_answerer() -> Any:
        from typed_rag.system import TypedRAG

        return TypedRAG.from_settings(generator)

    def make_scorer() -> Any:
        from typed_rag.engines import build_engine

        return build_engine(scorer)

    if args.ray:  # same phases and files; batches run on Ray actors (eval/distributed.py)
        from eval.distributed import DistributedEvalRunner

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


# ---------------------------------------------------------------------- judge validity


def cmd_judge_validity(args: argparse.Namespace, settings: Settings) -> int:
    from eval.judge_run import render, run_validity

    data = _load_data(args, settings)
    judge = scorer_settings_for(settings, args)
    labels = obtain_labels(settings, data.records, args.out, args.labels)
    summary = run_validity(
        settings,
        judge,
        data.records,
        labels,
        args.out,
        questions=args.questions,
        pool_size=args.pool,
        protocols=[p.strip() for p in args.protocols.split(",") if p.strip()],
        ensembles=[e.strip() for e in args.ensembles.split(",") if e.strip()],
        seed=args.seed,
        progress=not args.no_progress,
    )
    print(render(summary))
    print(f"\nwrote {args.out / 'summary.json'}")
    return 0


# ---------------------------------------------------------------------- report


def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    from eval.report import write_report

    files = write_report(args.run_dir, settings, args.out)
    print(files.markdown.read_text(encoding="utf-8"))
    print(f"wrote {files.markdown}, {files.json}" + (f", {files.figure}" if files.figure else ""))
    return 0


# ---------------------------------------------------------------------- constraints (issue 8.3)


def _scorer_args(p: argparse.ArgumentParser, role: str) -> None:
    p.add_argument("--scorer-config", type=Path, help=f"TOML settings for the {role} engine")
    p.add_argument("--scorer-backend", help=f"{role} engine backend (llamacpp, vllm, openai)")
    p.add_argument("--scorer-model", help=f"{role} model name, path or id")
    p.add_argument("--scorer-base-url", help=f"{role} OpenAI-compatible base URL")


def _register_constraints(eval_sub: argparse._SubParsersAction) -> None:
    p = eval_sub.add_parser(
        "constraints-set",
        help="build coverage-conditioned questions (include/exclude a subtopic) from Wiki-NFQA",
    )
    _data_args(p)
    p.add_argument("--n", type=int, default=12, help="questions in the set (default 12)")
    p.add_argument("--out", type=Path, required=True, help="set file to write (JSONL)")
    p.add_argument(
        "--seed", type=int, default=42, help="question choice, include/exclude and template"
    )
    p.add_argument("--labels", type=Path, help="question types from `eval label` (JSON)")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out")
    _scorer_args(p, "subtopic-writing (default: the generator's)")
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
        "--arms", default="off,cue", help="comma list of off,cue,always (default off,cue)"
    )
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    _scorer_args(p, "judge")
    p.set_defaults(func=cmd_constraints_run)

    p = eval_sub.add_parser("constraints-report", help="report of a `constraints-run` directory")
    p.add_argument("run_dir", type=Path, help="a directory made by `eval constraints-run`")
    p.add_argument("--out", type=Path, help="write the report here instead of the run directory")
    p.set_defaults(func=cmd_constraints_report)


def _stored_labels(settings: Settings, labels_file: Path | None) -> dict[str, Any]:
    """--labels, else the default labels file if it exists, else none (any question will do)."""
    from eval.labels import default_labels_path, load_labels

    if labels_file is not None:
        return load_labels(labels_file)
    if default_labels_path(settings).exists():
        return load_labels(default_labels_path(settings))
    log.warning("no stored question types; picking from all questions (run `eval label` first)")
    return {}


def cmd_constraints_set(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from eval.constraints import build_constraint_set, write_set
    from eval.manifest import scorer_name
    from typed_rag.engines import build_engine

    if args.n < 1:
        raise UserError(f"--n must be at least 1, got {args.n}")
    if args.out.exists() and not args.force:
        raise UserError(f"{args.out} exists; pass --force to overwrite it")
    data = _load_data(args, settings)
    labels = _stored_labels(settings, args.labels)
    writer = scorer_settings_for(settings, args)
    print(f"asking {scorer_name(writer)} for subtopics of up to {args.n} question(s)")

    async def build() -> Any:
        engine = build_engine(writer)
        await engine.start()
        try:
            return await build_constraint_set(
                engine,
                data.records,
                args.n,
                labels=labels,
                seed=args.seed,
                llm_seed=writer.sampling.seed,
                max_resamples=settings.eval.max_resamples,
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
    path = write_set(args.out, made.items)
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
    from collections import Counter

    return dict(Counter(values))


def cmd_constraints_run(args: argparse.Namespace, settings: Settings) -> int:
    from eval.constraints import (
        ConstraintRunner,
        SharedTypedRAG,
        check_run_set,
        file_sha256,
        load_set,
        parse_arms,
        write_constraints_report,
    )
    from eval.manifest import scorer_name, write_manifest
    from eval.runner import EvalAborted

    arms = parse_arms(args.arms)
    items = load_set(args.set)
    scorer = scorer_settings_for(settings, args)
    _warn_if_self_judged(settings, scorer, "judge")
    run_dir: Path = args.out
    check_run_set(run_dir, args.set)
    write_manifest(
        run_dir,
        settings.model_copy(update={"mode": "typed-rag"}),
        scorer,
        methods=arms,
        subsets=sorted({it.subset for it in items}),
        question_ids=[it.question_id for it in items],
        options={"kind": "constraints", "set": str(args.set), "set_sha256": file_sha256(args.set)},
    )
    print(
        f"answering {len(items)} conditioned question(s) x {len(arms)} arm(s) ({', '.join(arms)}); "
        f"generator {settings.engine.backend}:{settings.engine.model}, judge {scorer_name(scorer)}"
    )

    def make_judge() -> Any:
        from typed_rag.engines import build_engine

        return build_engine(scorer)

    runner = ConstraintRunner(
        settings,
        run_dir,
        answerers=SharedTypedRAG(),
        scorer_engine=make_judge,
        scorer_settings=scorer,
        progress=not args.no_progress,
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
    md, _ = write_constraints_report(run_dir, settings)
    print(md.read_text(encoding="utf-8"))
    print(f"report: {md}")
    return 0


def cmd_constraints_report(args: argparse.Namespace, settings: Settings) -> int:
    from eval.constraints import write_constraints_report

    md, js = write_constraints_report(args.run_dir, settings, args.out)
    print(md.read_text(encoding="utf-8"))
    print(f"wrote {md}, {js}")
    return 0
