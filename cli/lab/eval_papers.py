"""``typed-rag eval context|coverage``: the two evaluation papers on a Wiki-NFQA run on disk.

``context`` is CRUX (retrieval contexts graded by sub-question answerability);
``coverage`` is sub-question coverage (core / background / follow-up, Metrics #1-#6).
Both judge only what their output folder lacks, so they resume and grow.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.lab.eval_shared import (
    data_args,
    load_data,
    require_token_probabilities,
    scorer_args,
    scorer_settings_for,
)
from eval.context import report as context_report
from eval.context.analysis import evaluate as evaluate_contexts
from eval.context.inputs import Lookup, add_retrievers, run_questions, store_lookup
from eval.context.judge import CruxJudge
from eval.context.run import ContextRun
from eval.data.methods import parse_methods
from eval.data.wikinfqa import WikiNFQARecord
from eval.judging.resample import Judge
from eval.retrieval.evaluate import Builder
from eval.retrieval.spec import Spec
from eval.runs.manifest import read_manifest, scorer_name
from eval.runs.runner import ANSWERS
from eval.store import JsonlStore
from eval.subcoverage import evaluate_subcoverage
from eval.subcoverage.inputs import reference_items
from typed_rag import engines
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.retrieval.bm25 import BM25Index

JUDGE_TOKENS = 512


def register(eval_sub: argparse._SubParsersAction) -> None:
    for name, func, text in (
        (
            "context",
            cmd_context,
            "CRUX: grade a run's retrieval contexts by sub-question answerability",
        ),
        (
            "coverage",
            cmd_coverage,
            "sub-question coverage (core/background/follow-up, Metrics #1-#6)",
        ),
    ):
        p = eval_sub.add_parser(name, help=f"{text}; resumable")
        p.add_argument("run_dir", type=Path, help="a directory made by `eval run`")
        p.add_argument(
            "--out", type=Path, required=True, help="where judgements and the summary go"
        )
        p.add_argument("--methods", default="llm,rag,typed-rag", help="the run's methods to judge")
        p.add_argument(
            "--limit",
            type=int,
            help="only the first N (by id) of the questions all methods answered",
        )
        p.add_argument("--batch-size", type=int, default=32, help="judge requests per engine call")
        p.add_argument("--no-progress", action="store_true", help="hide progress")
        data_args(p)
        scorer_args(p, "judge")
        p.set_defaults(func=func)
        if name == "context":
            p.add_argument(
                "--configs",
                default="",
                help="retrieval-only configurations to add (index eval specs, e.g. bm25,bm25+mpnet-rrf@30)",
            )
            p.add_argument("-k", type=int, default=5, help="passages per retrieval configuration")
        else:
            p.add_argument(
                "--also",
                action="append",
                default=[],
                metavar="NAME=RUN_DIR:METHOD",
                help="judge METHOD's answers in another run as method NAME beside run_dir's "
                "(an arm of a method comparison, e.g. m2=results/method/m2:typed-rag); "
                "repeatable; only questions every run answered",
            )
            p.add_argument(
                "--answers-only",
                action="store_true",
                help="judge the answers only: no retrieved chunk (Metrics #2-#5) and no "
                "fragment (#6), what a comparison of generation methods by rating needs",
            )


def _progress(enabled: bool) -> Callable[[str, int, int], None] | None:
    def report(stage: str, done: int, total: int) -> None:
        print(f"\r{stage}: {done}/{total}", end="" if done < total else "\n", file=sys.stderr)

    return report if enabled else None


@dataclass(frozen=True)
class Arm:
    """``--also NAME=RUN_DIR:METHOD``: another run's answers of one method, judged as NAME."""

    name: str
    answers: JsonlStore
    method: str

    @classmethod
    def parse(cls, spec: str, taken: Sequence[str]) -> Arm:
        name, eq, rest = spec.partition("=")
        run_dir, colon, method = rest.rpartition(":")
        if not eq or not colon or not name.strip() or not method.strip():
            raise UserError(f"--also {spec!r}: expected NAME=RUN_DIR:METHOD")
        name = name.strip()
        if name in taken:
            raise UserError(f"--also {spec!r}: the name {name!r} is already a method")
        path = Path(run_dir) / ANSWERS
        if not path.is_file():
            raise UserError(f"--also {spec!r}: {path} does not exist (a directory of `eval run`)")
        return cls(name, JsonlStore(path, readonly=True), parse_methods(method)[0])

    def answered(self, question_id: str) -> bool:
        return f"{self.method}\t{question_id}" in self.answers

    def rows(self, question_ids: set[str]) -> list[dict[str, Any]]:
        return [
            dict(row, method=self.name)
            for row in self.answers
            if row.get("method") == self.method and row["question_id"] in question_ids
        ]


def _run_records(
    args: argparse.Namespace,
    settings: Settings,
    methods: Sequence[str],
    arms: Sequence[Arm] = (),
) -> list[WikiNFQARecord]:
    """The run's questions that every one of ``methods`` (and of ``arms``) answered (by id),
    optionally the first N of them."""
    manifest = read_manifest(args.run_dir)
    ids = manifest.get("question_ids") or []
    if args.subsets == "all" and manifest.get("subsets"):  # only the run's subsets
        args.subsets = ",".join(manifest["subsets"])
    if args.data is None and args.data_dir is None and manifest.get("data"):
        args.data = Path(manifest["data"]["path"])  # the graded file the run was made on
    by_id = {r.question_id: r for r in load_data(args, settings).records}
    answers = JsonlStore(args.run_dir / ANSWERS, readonly=True)
    records = [
        by_id[q]
        for q in ids
        if q in by_id
        and all(f"{m}\t{q}" in answers for m in methods)
        and all(arm.answered(q) for arm in arms)
    ]
    if not records:
        raise UserError(
            f"no question of {args.run_dir} in {args.data or 'the Wiki-NFQA data'} was "
            "answered by all of " + ", ".join([*methods, *(arm.name for arm in arms)])
        )
    return records[: args.limit] if args.limit else records


def index_lookup(settings: Settings) -> Lookup:
    """Passage texts by id from the BM25 index's store, opened only if a text is missing."""

    def lookup(ids: Sequence[str]) -> Mapping[str, tuple[str, str]]:
        return store_lookup(BM25Index.from_settings(settings).store)(ids)

    return lookup


def _judge_parts(args: argparse.Namespace, settings: Settings) -> tuple[Settings, Any]:
    scorer = scorer_settings_for(settings, args)
    return scorer, engines.build_engine(scorer)


def cmd_context(args: argparse.Namespace, settings: Settings) -> int:
    # CRUX's grades are read from token probabilities: refuse before anything is loaded.
    require_token_probabilities(scorer_settings_for(settings, args), "the CRUX context judge")
    methods = parse_methods(args.methods)
    records = _run_records(args, settings, methods)
    questions = run_questions(args.run_dir, records, methods, index_lookup(settings))
    if not questions:
        raise UserError(
            f"no question of {args.run_dir} was answered by all of {', '.join(methods)}"
        )
    specs = [Spec.parse(c) for c in args.configs.split(",") if c.strip()]
    if specs:
        builder = Builder(settings, BM25Index.from_settings(settings), cache_size=10_000)
        add_retrievers(questions, {s.name: builder.build(s) for s in specs}, args.k)
    scorer, engine = _judge_parts(args, settings)
    judge = CruxJudge(engine, max_tokens=JUDGE_TOKENS, **Judge.sampling_from(settings, scorer))
    run = ContextRun(args.out, judge, args.batch_size)

    async def go() -> dict[str, Any]:
        async with engine:
            return await evaluate_contexts(
                run, questions, scorer_name(scorer), on_progress=_progress(not args.no_progress)
            )

    summary = asyncio.run(go())
    files = context_report.write(args.out, summary)
    print(context_report.render(summary))
    print("wrote " + ", ".join(str(f) for f in files))
    return 0


def cmd_coverage(args: argparse.Namespace, settings: Settings) -> int:
    # The coverage verdicts are P(yes) from token probabilities: refuse before anything runs.
    require_token_probabilities(scorer_settings_for(settings, args), "the coverage judge")
    methods = parse_methods(args.methods)
    arms: list[Arm] = []
    for spec in args.also:
        arms.append(Arm.parse(spec, [*methods, *(a.name for a in arms)]))
    records = _run_records(args, settings, methods, arms)
    wanted = {r.question_id for r in records}
    stored = JsonlStore(args.run_dir / ANSWERS, readonly=True)
    answers = [a for a in stored if a["question_id"] in wanted and a.get("method") in methods]
    answers += [row for arm in arms for row in arm.rows(wanted)]
    if args.answers_only:
        answers = [dict(a, result={**(a.get("result") or {}), "passages": []}) for a in answers]
    types = {str(a["question_id"]): str(a.get("type") or "UNKNOWN") for a in answers}
    scorer, engine = _judge_parts(args, settings)

    async def go() -> dict[str, Any]:
        async with engine:
            return await evaluate_subcoverage(
                engine,
                answers,
                args.out,
                judge_model=scorer_name(scorer),
                methods=[*methods, *(arm.name for arm in arms)],
                lookup=index_lookup(settings),
                references=reference_items(records, types),
                fragments=not args.answers_only,
                batch_size=args.batch_size,
                on_progress=_progress(not args.no_progress),
                **_sampling(settings, scorer),
            )

    summary = asyncio.run(go())
    print(f"wrote {args.out / 'summary.json'} ({summary.get('questions')} questions)")
    validity = summary.get("judge_validity")
    if validity:
        above = validity["grade3_above_grade0"]
        print(
            f"judge validity: grade-3 reference above grade-0 in core coverage for "
            f"{above['mean']:.0%} of {validity['n']} questions (ties half; covered: "
            f"P(yes) > {validity['threshold']})"
        )
    return 0


def _sampling(settings: Settings, scorer: Settings) -> dict[str, Any]:
    s = Judge.sampling_from(settings, scorer)
    return {"max_resamples": s["max_resamples"], "seed": s["seed"], "temperature": s["temperature"]}


__all__: Sequence[str] = ("register",)
