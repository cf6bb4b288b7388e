"""A resumable Wiki-NFQA run: answer with each method, score with LINKAGE, optionally judge coverage.

Phases run one after another so that the generator can be closed before the
scorer is loaded (two models never share the memory of a small machine):

1. answers: per method, questions go to ``answerer.answer_many`` in batches
   of :data:`BATCH_SIZE`; each finished batch is appended to
   ``answers.jsonl`` at once;
2. scores: every stored answer without a score is ranked by the scorer
   engine (:data:`SCORE_BATCH_SIZE` requests per ``engine.generate``, with
   bounded resampling) and appended to ``scores.jsonl``;
3. coverage (``coverage=True``): sub-questions per question
   (``subquestions.jsonl``), then per-answer judgements (``coverage.jsonl``).

A rerun into the same directory skips everything already stored, so an
interrupted run resumes where it stopped and never recomputes or loses
finished work. The generator and the scorer are independent: each is an
object, or a zero-argument factory called only if its phase has work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from eval.answer_coverage.judge import CoverageItem, CoverageJudge
from eval.answer_coverage.parse import Decomposition
from eval.data.labels import QuestionLabel, type_of
from eval.data.wikinfqa import WikiNFQARecord
from eval.judging.linkage import REFERENCE_SEED
from eval.judging.linkage_prob import build_scorer
from eval.judging.view import JudgeView
from eval.runs.batches import Answerer, ChunkAnswers, answer_chunk, score_chunk
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
from eval.store import JsonlStore
from typed_rag.config import Settings
from typed_rag.engines.base import Engine

log = logging.getLogger(__name__)

ANSWERS = "answers.jsonl"
SCORES = "scores.jsonl"
SUBQUESTIONS = "subquestions.jsonl"
COVERAGE = "coverage.jsonl"
ERRORS = "errors.jsonl"
RUN_LABELS = "labels.json"  # the question types this run routed and grouped by
# Questions per answer_many call: one JSONL flush each, so a killed run loses at most one
# batch, and enough in flight to keep a batching engine busy.
BATCH_SIZE = 16
SCORE_BATCH_SIZE = 64  # judge requests per engine.generate call (one flush each)


def _qid_key(record: dict[str, Any]) -> str:
    return str(record["question_id"])


@dataclass
class RunStats:
    answers: dict[str, PhaseCounts] = field(default_factory=dict)
    scores: PhaseCounts = field(default_factory=PhaseCounts)
    decompositions: PhaseCounts = field(default_factory=PhaseCounts)
    coverage: PhaseCounts = field(default_factory=PhaseCounts)


class EvalRunner:
    """One run directory; call :meth:`run` as often as needed, it only does what is missing."""

    def __init__(
        self,
        settings: Settings,
        run_dir: Path,
        *,
        answerer: Answerer | Callable[[], Any],
        scorer_engine: Engine | Callable[[], Any],
        scorer_settings: Settings | None = None,
        labels: Mapping[str, QuestionLabel] | None = None,
        progress: bool = True,
    ) -> None:
        self.settings = settings
        self.scorer_settings = scorer_settings or settings
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.labels = dict(labels or {})
        self.progress = progress
        self.batch_size = BATCH_SIZE
        self.score_batch_size = SCORE_BATCH_SIZE
        self._answerer = lazy(answerer, "answer_many")
        self._scorer = lazy(scorer_engine, "generate")
        self.answers = JsonlStore(self.run_dir / ANSWERS)
        self.scores = JsonlStore(self.run_dir / SCORES)
        self.subquestions = JsonlStore(self.run_dir / SUBQUESTIONS, key=_qid_key)
        self.coverage = JsonlStore(self.run_dir / COVERAGE)
        self.errors = self.run_dir / ERRORS

    # ------------------------------------------------------------------ driver

    async def run(
        self,
        records: Sequence[WikiNFQARecord],
        methods: Sequence[str],
        coverage: bool = False,
    ) -> RunStats:
        stats = RunStats()
        try:
            for method in methods:
                stats.answers[method] = await self._answer_method(records, method)
        finally:
            await self._answerer.close()
        try:
            stats.scores = await self._score(records, methods)
            if coverage:
                stats.decompositions = await self._decompose(records)
                stats.coverage = await self._judge_coverage(records, methods)
        finally:
            await self._scorer.close()
        return stats

    def _bar(self, total: int, desc: str) -> tqdm:
        return progress_bar(total, desc, self.progress)

    def _pending_answers(
        self, records: Sequence[WikiNFQARecord], method: str
    ) -> tuple[list[WikiNFQARecord], PhaseCounts]:
        return split_pending(records, lambda r: run_key(method, r.question_id), self.answers)

    def _store_answers(
        self, method: str, chunk: ChunkAnswers, size: int, counts: PhaseCounts
    ) -> None:
        """Append one answered batch; abort the run if every question of it failed."""
        store_batch(
            self.answers,
            chunk.records,
            chunk.errors,
            size,
            counts,
            self.errors,
            f"for method {method!r}",
        )

    # ------------------------------------------------------------------ phase 1

    async def _answer_method(self, records: Sequence[WikiNFQARecord], method: str) -> PhaseCounts:
        pending, counts = self._pending_answers(records, method)
        if not pending:
            return counts
        answerer = await self._answerer.get()
        size = max(1, self.batch_size)
        with self._bar(len(pending), f"answer {method}") as bar:
            for start in range(0, len(pending), size):
                chunk = pending[start : start + size]
                done = await answer_chunk(
                    answerer,
                    chunk,
                    method,
                    self.labels,
                    self.settings.eval.store_passage_text,
                    self.settings.eval.route,
                )
                self._store_answers(method, done, len(chunk), counts)
                bar.update(len(chunk))
        return counts

    # ------------------------------------------------------------------ phase 2

    async def _score(
        self, records: Sequence[WikiNFQARecord], methods: Sequence[str]
    ) -> PhaseCounts:
        todo, counts = self._pending_scores(records, methods)
        if not todo:
            return counts
        scorer = build_scorer(await self._scorer.get(), self.settings, self.scorer_settings)
        seed = REFERENCE_SEED
        name = scorer_name(self.scorer_settings)
        size = max(1, self.score_batch_size)
        view = JudgeView.from_settings(self.settings.eval)
        with self._bar(len(todo), "score") as bar:
            for start in range(0, len(todo), size):
                chunk = todo[start : start + size]
                rows = await score_chunk(scorer, chunk, seed, name, self.labels, view)
                self._store_scores(rows, counts)
                bar.update(len(chunk))
        return counts

    def _pending_scores(
        self, records: Sequence[WikiNFQARecord], methods: Sequence[str]
    ) -> tuple[list[tuple[str, WikiNFQARecord, dict[str, Any]]], PhaseCounts]:
        """Stored answers without a score, in (method, record) order; an unanswerable
        question's answer is not ranked (its references, if any, are not what was searched)."""
        ranked = [r for r in records if r.answerable]
        return awaiting_judgement(
            methods, ranked, lambda r: r.question_id, self.answers, self.scores
        )

    def _store_scores(self, rows: Sequence[dict[str, Any]], counts: PhaseCounts) -> None:
        counts.failed += sum(r["rank"] is None for r in rows)
        self.scores.append(rows)
        counts.computed += len(rows)

    # ------------------------------------------------------------------ phase 3

    def _judge(self, engine: Engine) -> CoverageJudge:
        return CoverageJudge.from_settings(engine, self.settings, self.scorer_settings)

    async def _decompose(self, records: Sequence[WikiNFQARecord]) -> PhaseCounts:
        pending, counts = split_pending(records, lambda r: r.question_id, self.subquestions)
        if not pending:
            return counts
        judge = self._judge(await self._scorer.get())
        size = max(1, self.score_batch_size)
        with self._bar(len(pending), "sub-questions") as bar:
            for start in range(0, len(pending), size):
                chunk = pending[start : start + size]
                outcomes = await judge.decompose([r.question for r in chunk])
                self.subquestions.append(
                    {
                        "question_id": r.question_id,
                        "status": o.status,
                        "attempts": o.attempts,
                        "decomposition": o.value.to_dict() if o.ok and o.value else None,
                        "outputs": o.outputs,
                        "prompt_tokens": o.prompt_tokens,
                        "completion_tokens": o.completion_tokens,
                    }
                    for r, o in zip(chunk, outcomes, strict=True)
                )
                counts.computed += len(chunk)
                counts.failed += sum(not o.ok for o in outcomes)
                bar.update(len(chunk))
        return counts

    async def _judge_coverage(
        self, records: Sequence[WikiNFQARecord], methods: Sequence[str]
    ) -> PhaseCounts:
        answered, counts = awaiting_judgement(
            methods, records, lambda r: r.question_id, self.answers, self.coverage
        )
        todo: list[tuple[str, WikiNFQARecord, dict[str, Any], Decomposition | None]] = []
        for method, rec, answer in answered:
            dec = (self.subquestions.get(rec.question_id) or {}).get("decomposition")
            todo.append((method, rec, answer, Decomposition.from_dict(dec) if dec else None))
        if not todo:
            return counts
        judge = self._judge(await self._scorer.get())
        size = max(1, self.score_batch_size)
        with self._bar(len(todo), "coverage") as bar:
            for start in range(0, len(todo), size):
                chunk = todo[start : start + size]
                judgeable = [t for t in chunk if t[3] is not None]
                items = [
                    CoverageItem(
                        key=run_key(method, rec.question_id),
                        question=rec.question,
                        decomposition=dec,  # type: ignore[arg-type]
                        answer=str(answer.get("answer") or ""),
                        passages=(answer.get("result") or {}).get("passages") or None,
                    )
                    for method, rec, answer, dec in judgeable
                ]
                results = {r.key: r for r in await judge.judge(items)}
                rows = []
                for method, rec, _answer, _dec in chunk:
                    res = results.get(run_key(method, rec.question_id))
                    row = {
                        "method": method,
                        "question_id": rec.question_id,
                        "subset": rec.subset,
                        "type": type_of(self.labels, rec.question_id),
                    }
                    if res is None:
                        row["status"] = "no-decomposition"
                    else:
                        row.update(res.to_dict())
                        row.pop("key", None)
                    counts.failed += row["status"] != "ok"
                    rows.append(row)
                self.coverage.append(rows)
                counts.computed += len(rows)
                bar.update(len(chunk))
        return counts
