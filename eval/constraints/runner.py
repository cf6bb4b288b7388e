"""The resumable run: every arm answers the set, then the judge grades every answer.

Per arm (``constraints.mode`` off / cue / always, or ``outline``: cue with QTREE
outline-guided answering), Typed-RAG answers every
conditioned question; answers go to ``answers.jsonl`` keyed by (arm,
question_id) with the full trace, including what the feature detected. All
arms answer before the judge is loaded, and a rerun of the same directory
only does what is missing. Given the questions' Wiki-NFQA records, every
answer is also ranked against the base question's graded references with the
run's LINKAGE judge (``linkage.jsonl``), so the arms are compared on answer
quality as well as on compliance.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tqdm import tqdm

from eval.constraints.dataset import ConstraintItem
from eval.constraints.judge import ComplianceItem, ComplianceJudge, compliance
from eval.data.labels import QuestionLabel
from eval.data.methods import parse_choices
from eval.data.wikinfqa import WikiNFQARecord
from eval.judging.linkage import REFERENCE_SEED
from eval.judging.linkage_prob import build_scorer
from eval.judging.view import JudgeView
from eval.runs.batches import answer_each, result_dict, score_chunk
from eval.runs.manifest import scorer_name
from eval.runs.resume import (
    PhaseCounts,
    awaiting_judgement,
    lazy,
    progress_bar,
    run_key,
    split_pending,
    store_batch,
)
from eval.runs.runner import BATCH_SIZE, SCORE_BATCH_SIZE
from eval.store import JsonlStore
from typed_rag.config import Settings
from typed_rag.engines.base import Engine
from typed_rag.errors import UserError
from typed_rag.system import TypedRAG

# Named as before the split into a package, so log lines read the same.
log = logging.getLogger("eval.constraints")

ARMS: tuple[str, ...] = ("off", "cue", "always", "outline")
ANSWERS = "answers.jsonl"
JUDGEMENTS = "judgements.jsonl"
LINKAGE = "linkage.jsonl"
ERRORS = "errors.jsonl"
SET_COPY = "set.jsonl"


def parse_arms(value: str | Sequence[str]) -> list[str]:
    return parse_choices(value, ARMS, "arm", " (values of constraints.mode, or outline)")


def arm_settings(settings: Settings, arm: str) -> Settings:
    """``settings`` with ``constraints.mode`` set to the arm.

    ``outline`` is the ``cue`` detector with ``constraints.outline`` on: a detected
    question is answered from a planner's outline instead of the typed plan.
    """
    update = (
        {"mode": "cue", "outline": True} if arm == "outline" else {"mode": arm, "outline": False}
    )
    return settings.with_section("constraints", **update)


def arm_question_key(record: Mapping[str, Any]) -> str:
    return run_key(record["arm"], record["question_id"])


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class ArmAnswerers(Protocol):
    """Gives an answerer (the TypedRAG contract) for one arm's settings; closes them all."""

    async def get(self, settings: Settings) -> Any: ...

    async def close(self) -> None: ...


class SharedTypedRAG:
    """One TypedRAG per arm, all sharing the first one's engine, index, reranker and classifier.

    The arms differ only in ``constraints.mode``, so loading the model once
    and wrapping its parts with each arm's settings answers every arm with
    the same model at the cost of one load.
    """

    def __init__(self, build: Callable[[Settings], Any] | None = None) -> None:
        self._build = build
        self._base: Any = None

    async def get(self, settings: Settings) -> Any:
        if self._base is None:
            base = (self._build or TypedRAG.from_settings)(settings)
            await base.start()
            self._base = base
            return base
        if settings == self._base.settings.declared():  # the base was built (resolved) from them
            return self._base
        b = self._base
        return TypedRAG(settings, b.engine, b.retriever, b.reranker, b.classifier)

    async def close(self) -> None:
        if self._base is not None:
            await self._base.close()
            self._base = None


@dataclass
class ConstraintRunStats:
    answers: dict[str, PhaseCounts] = field(default_factory=dict)
    judgements: PhaseCounts = field(default_factory=PhaseCounts)
    linkage: PhaseCounts | None = None


class ConstraintRunner:
    """One run directory: answers per arm, then judgements; a rerun only does what is missing."""

    def __init__(
        self,
        settings: Settings,
        run_dir: Path,
        *,
        answerers: ArmAnswerers,
        scorer_engine: Engine | Callable[[], Any],
        scorer_settings: Settings | None = None,
        progress: bool = True,
        references: Mapping[str, WikiNFQARecord] | None = None,
    ) -> None:
        self.settings = settings
        self.scorer_settings = scorer_settings or settings
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.answerers = answerers
        self._scorer = lazy(scorer_engine, "generate")
        self.progress = progress
        self.batch_size = BATCH_SIZE
        self.score_batch_size = SCORE_BATCH_SIZE
        self.answers = JsonlStore(self.run_dir / ANSWERS, key=arm_question_key)
        self.judgements = JsonlStore(self.run_dir / JUDGEMENTS, key=arm_question_key)
        self.references = references
        self.linkage = JsonlStore(self.run_dir / LINKAGE, key=arm_question_key)

    def _bar(self, total: int, desc: str) -> tqdm:
        return progress_bar(total, desc, self.progress)

    async def run(self, items: Sequence[ConstraintItem], arms: Sequence[str]) -> ConstraintRunStats:
        stats = ConstraintRunStats()
        if self.references is not None:  # before any answer: the ranking needs them all
            missing = sorted({it.question_id for it in items} - set(self.references))
            if missing:
                raise UserError(
                    f"{len(missing)} question(s) of the set are not in the Wiki-NFQA data given "
                    f"(first: {missing[0]}); point --data-dir at the data the set was built from"
                )
        try:  # every arm first, so the generator is closed before the judge is loaded
            for arm in arms:
                stats.answers[arm] = await self._answer_arm(items, arm)
        finally:
            await self.answerers.close()
        try:
            stats.judgements = await self._judge(items, arms)
            if self.references is not None:
                stats.linkage = await self._rank(items, arms, self.references)
        finally:
            await self._scorer.close()
        return stats

    # ------------------------------------------------------------------ answers

    async def _answer_arm(self, items: Sequence[ConstraintItem], arm: str) -> PhaseCounts:
        pending, counts = split_pending(
            items, lambda it: run_key(arm, it.question_id), self.answers
        )
        if not pending:
            return counts
        answerer = await self.answerers.get(arm_settings(self.settings, arm))
        size = max(1, self.batch_size)
        with self._bar(len(pending), f"answer {arm}") as bar:
            for start in range(0, len(pending), size):
                chunk = pending[start : start + size]
                records, errors = await self._answer_chunk(answerer, chunk, arm)
                store_batch(
                    self.answers,
                    records,
                    errors,
                    len(chunk),
                    counts,
                    self.run_dir / ERRORS,
                    f"in arm {arm!r}",
                )
                bar.update(len(chunk))
        return counts

    async def _answer_chunk(
        self, answerer: Any, chunk: Sequence[ConstraintItem], arm: str
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Answer a batch (see :func:`eval.runs.batches.answer_each`) into answer records."""
        results, errors, wall = await answer_each(
            answerer,
            [it.conditioned_question for it in chunk],
            [it.question_id for it in chunk],
            "typed-rag",
            arm,
            log_label=f"arm {arm}",
        )
        records = []
        for it, res in zip(chunk, results, strict=True):
            if res is None:
                continue
            data = result_dict(res)
            records.append(
                {
                    "arm": arm,
                    "question_id": it.question_id,
                    "subset": it.subset,
                    "type": it.type,
                    "answered_type": data.get("type"),
                    "conditioned_question": it.conditioned_question,
                    "include": it.include,
                    "exclude": it.exclude,
                    "answer": data.get("answer", ""),
                    "constraints": data.get("constraints"),
                    "latency_s": float((data.get("timings") or {}).get("total", 0.0)),
                    "tokens": int(data.get("prompt_tokens", 0))
                    + int(data.get("completion_tokens", 0)),
                    "result": data,
                    "wall_s": wall / len(chunk),
                    "batch_size": len(chunk),
                    "finished_at": time.time(),
                }
            )
        return records, errors

    # ------------------------------------------------------------------ judgements

    async def _judge(self, items: Sequence[ConstraintItem], arms: Sequence[str]) -> PhaseCounts:
        answered, counts = awaiting_judgement(
            arms, items, lambda it: it.question_id, self.answers, self.judgements
        )
        todo = [(it, answer) for _arm, it, answer in answered]
        if not todo:
            return counts
        judge = ComplianceJudge.from_settings(
            await self._scorer.get(), self.settings, self.scorer_settings
        )
        name = scorer_name(self.scorer_settings)
        size = max(1, self.score_batch_size)
        with self._bar(len(todo), "judge") as bar:
            for start in range(0, len(todo), size):
                chunk = todo[start : start + size]
                verdicts = await judge.judge(
                    [
                        ComplianceItem(
                            key=run_key(a["arm"], it.question_id),
                            question=it.question,
                            include=it.include,
                            exclude=it.exclude,
                            answer=str(a.get("answer") or ""),
                        )
                        for it, a in chunk
                    ]
                )
                rows = []
                for (it, a), v in zip(chunk, verdicts, strict=True):
                    row: dict[str, Any] = {
                        "arm": a["arm"],
                        "question_id": it.question_id,
                        "subset": it.subset,
                        "type": it.type,
                        "status": v.status,
                        "include": it.include,
                        "exclude": it.exclude,
                        "covered": v.covered,
                        "discussed": v.discussed,
                        "attempts": v.attempts,
                        "outputs": v.outputs,
                        "prompt_tokens": v.prompt_tokens,
                        "completion_tokens": v.completion_tokens,
                        "judge": name,
                    }
                    if v.ok:
                        row.update(compliance(v.covered or [], v.discussed or []))
                    else:
                        counts.failed += 1
                    rows.append(row)
                self.judgements.append(rows)
                counts.computed += len(rows)
                bar.update(len(chunk))
        return counts

    async def _rank(
        self,
        items: Sequence[ConstraintItem],
        arms: Sequence[str],
        references: Mapping[str, WikiNFQARecord],
    ) -> PhaseCounts:
        """LINKAGE rows for answers not yet ranked, like ``eval run``'s scores.

        The judge sees the base question (the references answer it, not the
        coverage request), so this measures each arm's answer as an answer.
        """
        answered, counts = awaiting_judgement(
            arms, items, lambda it: it.question_id, self.answers, self.linkage
        )
        if not answered:
            return counts
        scorer = build_scorer(await self._scorer.get(), self.settings, self.scorer_settings)
        labels = {
            it.question_id: QuestionLabel(it.question_id, it.subset, it.type, 1.0, True)
            for it in items
        }
        todo = [(arm, references[it.question_id], a) for arm, it, a in answered]
        size = max(1, self.score_batch_size)
        name = scorer_name(self.scorer_settings)
        with self._bar(len(todo), "linkage") as bar:
            for start in range(0, len(todo), size):
                chunk = todo[start : start + size]
                rows = await score_chunk(
                    scorer, chunk, REFERENCE_SEED, name, labels,
                    JudgeView.from_settings(self.settings.eval),
                )  # fmt: skip
                for row in rows:
                    row["arm"] = row["method"]
                self.linkage.append(rows)
                counts.computed += len(rows)
                bar.update(len(chunk))
        return counts


def check_run_set(run_dir: Path, set_path: Path) -> None:
    """Keep a copy of the set in the run; refuse to resume a run with a different set."""
    run_dir.mkdir(parents=True, exist_ok=True)
    copy = run_dir / SET_COPY
    data = Path(set_path).read_bytes()
    if copy.exists():
        if copy.read_bytes() != data:
            raise UserError(
                f"run directory {run_dir} was made with a different constraint set than "
                f"{set_path} (see {copy}); use a new --out"
            )
        return
    tmp = copy.with_name(copy.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(copy)
