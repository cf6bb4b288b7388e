"""A resumable Wiki-NFQA run: answer with each method, score with LINKAGE, optionally judge coverage.

Phases run one after another so that the generator can be closed before the
scorer is loaded (two models never share the memory of a small machine):

1. answers: per method, questions go to ``answerer.answer_many`` in batches
   of ``eval.batch_size``; each finished batch is appended to
   ``answers.jsonl`` at once;
2. scores: every stored answer without a score is ranked by the scorer
   engine (``eval.score_batch_size`` requests per ``engine.generate``, with
   bounded resampling) and appended to ``scores.jsonl``;
3. coverage (``coverage=True``): sub-questions per question
   (``subquestions.jsonl``), then per-answer judgements (``coverage.jsonl``).

A rerun into the same directory skips everything already stored, so an
interrupted run resumes where it stopped and never recomputes or loses
finished work. The generator and the scorer are independent: each is an
object, or a zero-argument factory called only if its phase has work.
"""

from __future__ import annotations

import inspect
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tqdm import tqdm

from eval.coverage import CoverageItem, CoverageJudge, Decomposition
from eval.labels import QuestionLabel, type_of
from eval.linkage import (
    LinkageItem,
    LinkageProbScorer,
    LinkageScorer,
    build_references,
    build_scorer,
)
from eval.manifest import scorer_name
from eval.store import JsonlStore
from eval.wikinfqa import WikiNFQARecord
from typed_rag.config import Settings
from typed_rag.engines.base import Engine
from typed_rag.errors import UserError
from typed_rag.method_settings import METHOD_PROFILES

log = logging.getLogger(__name__)

# ``typed-rag@<profile>``: typed-rag answering with that ``method.profile`` (issue 15),
# so that a method variant is paired with the default on the same questions in one run.
VARIANTS: tuple[str, ...] = tuple(f"typed-rag@{p}" for p in METHOD_PROFILES if p != "paper")
METHODS: tuple[str, ...] = ("llm", "rag", "typed-rag", *VARIANTS)
ANSWERS = "answers.jsonl"
SCORES = "scores.jsonl"
SUBQUESTIONS = "subquestions.jsonl"
COVERAGE = "coverage.jsonl"
ERRORS = "errors.jsonl"
RUN_LABELS = "labels.json"  # the question types this run routed and grouped by


class Answerer(Protocol):
    """What the runner needs of :class:`typed_rag.system.TypedRAG`."""

    async def answer(self, question: str, mode: str | None = None, **kwargs: Any) -> Any: ...

    async def answer_many(
        self,
        questions: Sequence[str],
        mode: str | None = None,
        force_type: Any = None,
        **kwargs: Any,
    ) -> list[Any]: ...


class EvalAborted(RuntimeError):
    """The generator or scorer failed for a whole batch; finished work is kept."""


def parse_choices(
    value: str | Sequence[str], allowed: Sequence[str], noun: str, hint: str = ""
) -> list[str]:
    """A comma list (or list) of names from ``allowed``, lower-cased, de-duplicated in order."""
    names = value.split(",") if isinstance(value, str) else list(value)
    names = [n.strip().lower() for n in names if n.strip()]
    unknown = [n for n in names if n not in allowed]
    if not names or unknown:
        raise UserError(
            f"unknown {noun}(s) {', '.join(unknown) or '(none given)'}; "
            f"expected some of: {', '.join(allowed)}{hint}"
        )
    return list(dict.fromkeys(names))


def parse_methods(value: str | Sequence[str]) -> list[str]:
    return parse_choices(value, METHODS, "method")


def mode_of(method: str) -> str:
    """The answering mode of an evaluated method (``typed-rag@improved`` -> ``typed-rag``)."""
    return method.split("@", 1)[0]


def answerer_for(answerer: Any, method: str) -> Any:
    """The answerer of ``method``: a variant answers with its own method profile."""
    _, _, profile = method.partition("@")
    return answerer.with_method_profile(profile) if profile else answerer


def _key(method: str, question_id: str) -> str:
    return f"{method}\t{question_id}"


def _qid_key(record: dict[str, Any]) -> str:
    return str(record["question_id"])


def _result_dict(result: Any) -> dict[str, Any]:
    if hasattr(result, "model_dump"):
        return result.model_dump(mode="json")
    if isinstance(result, dict):
        return result
    raise TypeError(f"answerer returned {type(result).__name__}, expected a Result")


# ---------------------------------------------------------------------- per-batch work
# Module-level so that a local run and a distributed one (eval.distributed, where
# Ray actors do the work and the driver writes the stores) share one definition.


@dataclass
class ChunkAnswers:
    """One answered batch: the records to store and the questions that failed."""

    records: list[dict[str, Any]]
    errors: list[dict[str, Any]]  # error rows for errors.jsonl


def error_row(phase: str, method: str, question_id: str, exc: BaseException) -> dict[str, Any]:
    return {
        "at": time.time(),
        "phase": phase,
        "method": method,
        "question_id": question_id,
        "error": f"{type(exc).__name__}: {exc}",
    }


def answer_record(
    method: str,
    rec: WikiNFQARecord,
    result: Any,
    wall: float,
    batch: int,
    labels: Mapping[str, QuestionLabel],
    passage_text: bool = True,
) -> dict[str, Any]:
    data = _result_dict(result)
    if not passage_text:
        data["passages"] = [
            {k: v for k, v in p.items() if k != "text"} for p in data.get("passages") or []
        ]
    return {
        "method": method,
        "question_id": rec.question_id,
        "subset": rec.subset,
        "type": type_of(labels, rec.question_id),
        # The pipeline that answered (typed-rag: the recorded type, see ``routed_types``).
        "route": data.get("type"),
        "type_source": data.get("type_source"),
        "question": rec.question,
        "answer": data.get("answer", ""),
        "result": data,
        "wall_s": wall / batch,
        "batch_size": batch,
        "finished_at": time.time(),
    }


async def answer_each(
    answerer: Answerer,
    questions: Sequence[str],
    ids: Sequence[str],
    mode: str,
    tag: str,
    log_label: str | None = None,
    force_types: Sequence[str] | None = None,
) -> tuple[list[Any | None], list[dict[str, Any]], float]:
    """Answer a batch; if the batch call fails, one by one so one bad question costs one.

    ``force_types`` (one per question) routes each question to that type's
    pipeline instead of the classifier. Returns a result per question (None
    where it failed), the error rows (``tag`` as their method) and the wall
    time of the whole batch.
    """
    t0 = time.perf_counter()
    errors: list[dict[str, Any]] = []
    forced = list(force_types) if force_types is not None else [None] * len(questions)
    try:
        results: list[Any | None] = list(
            await answerer.answer_many(
                list(questions), mode=mode, force_type=forced if force_types else None
            )
        )
        if len(results) != len(questions):
            raise RuntimeError(f"answer_many returned {len(results)} results for {len(questions)}")
    except Exception as exc:
        log.warning("batch of %d failed (%s); answering one by one", len(questions), exc)
        results = []
        for question, qid, ftype in zip(questions, ids, forced, strict=True):
            try:
                results.append(await answerer.answer(question, mode=mode, force_type=ftype))
            except Exception as one_exc:
                log.error("answer failed for %s (%s): %s", qid, log_label or tag, one_exc)
                errors.append(error_row("answer", tag, qid, one_exc))
                results.append(None)
    return results, errors, time.perf_counter() - t0


async def answer_chunk(
    answerer: Answerer,
    chunk: Sequence[WikiNFQARecord],
    method: str,
    labels: Mapping[str, QuestionLabel],
    passage_text: bool = True,
) -> ChunkAnswers:
    """Answer one batch of benchmark records (see :func:`answer_each`)."""
    results, errors, wall = await answer_each(
        answerer_for(answerer, method),
        [r.question for r in chunk],
        [r.question_id for r in chunk],
        mode_of(method),
        method,
        force_types=routed_types(chunk, method, labels),
    )
    return ChunkAnswers(
        [
            answer_record(method, r, res, wall, len(chunk), labels, passage_text)
            for r, res in zip(chunk, results, strict=True)
            if res is not None
        ],
        errors,
    )


def routed_types(
    chunk: Sequence[WikiNFQARecord], method: str, labels: Mapping[str, QuestionLabel]
) -> list[str] | None:
    """typed-rag answers of an evaluation follow the recorded labels, so that a per-type row
    holds exactly that type's pipeline and the labels cannot drift from the routing; None
    (the classifier routes) when a question has no recorded label."""
    if mode_of(method) != "typed-rag" or not all(r.question_id in labels for r in chunk):
        return None
    return [labels[r.question_id].type for r in chunk]


def scorer_protocol(scorer: LinkageScorer | LinkageProbScorer) -> str:
    if isinstance(scorer, LinkageProbScorer):
        return "linkage-prob-gated" if scorer.gated else "linkage-prob"
    return "linkage"


async def score_chunk(
    scorer: LinkageScorer | LinkageProbScorer,
    chunk: Sequence[tuple[str, WikiNFQARecord, Mapping[str, Any]]],
    reference_seed: int,
    name: str,
    labels: Mapping[str, QuestionLabel],
) -> list[dict[str, Any]]:
    """Score rows for one batch of (method, record, stored answer)."""
    items = [
        LinkageItem(
            key=_key(method, rec.question_id),
            question=rec.question,
            references=build_references(rec, reference_seed),
            candidate=str(answer.get("answer") or ""),
        )
        for method, rec, answer in chunk
    ]
    t0 = time.perf_counter()
    verdicts = await scorer.score(items)
    wall = time.perf_counter() - t0
    rows = []
    for (method, rec, _answer), item, v in zip(chunk, items, verdicts, strict=True):
        rows.append(
            {
                "method": method,
                "question_id": rec.question_id,
                "subset": rec.subset,
                "type": type_of(labels, rec.question_id),
                "rank": v.rank,
                "n": v.n,
                "status": v.status,
                "attempts": v.attempts,
                "outputs": v.outputs,
                "references": [{"label": r.label, "text": r.text} for r in item.references],
                "prompt_tokens": v.prompt_tokens,
                "completion_tokens": v.completion_tokens,
                "wall_s": wall / len(chunk),
                "off_by_one": v.off_by_one,
                "dist": v.dist,
                "relevance": v.relevance,
                "protocol": scorer_protocol(scorer),
                "scorer": name,
            }
        )
    return rows


@dataclass
class PhaseCounts:
    """How much a phase did now versus found already done (resume)."""

    done_before: int = 0
    computed: int = 0
    failed: int = 0


@dataclass
class RunStats:
    answers: dict[str, PhaseCounts] = field(default_factory=dict)
    scores: PhaseCounts = field(default_factory=PhaseCounts)
    decompositions: PhaseCounts = field(default_factory=PhaseCounts)
    coverage: PhaseCounts = field(default_factory=PhaseCounts)


def progress_bar(total: int, desc: str, enabled: bool = True) -> tqdm:
    """A per-question progress bar (rate and ETA) on stderr."""
    return tqdm(
        total=total, desc=desc, unit="q", disable=not enabled, file=sys.stderr, dynamic_ncols=True
    )


class _Lazy:
    """An object given directly, or built on first use by a factory (then started and closed here)."""

    def __init__(self, target: Any, is_factory: bool) -> None:
        self._target = target
        self._factory = is_factory
        self._obj: Any = None if is_factory else target

    async def get(self) -> Any:
        if self._obj is None:
            obj = self._target()
            if inspect.isawaitable(obj):
                obj = await obj
            if hasattr(obj, "start"):
                await obj.start()
            self._obj = obj
        return self._obj

    async def close(self) -> None:
        if self._factory and self._obj is not None and hasattr(self._obj, "close"):
            await self._obj.close()
            self._obj = None


def _lazy(target: Any, method: str) -> _Lazy:
    """Objects with ``method`` are used as they are; anything else callable is a factory."""
    if hasattr(target, method):
        return _Lazy(target, is_factory=False)
    if callable(target):
        return _Lazy(target, is_factory=True)
    raise TypeError(f"expected an object with {method}() or a factory, got {target!r}")


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
        self._answerer = _lazy(answerer, "answer_many")
        self._scorer = _lazy(scorer_engine, "generate")
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

    def _record_error(self, phase: str, method: str, question_id: str, exc: BaseException) -> None:
        self._write_errors([error_row(phase, method, question_id, exc)])

    def _write_errors(self, rows: Sequence[dict[str, Any]]) -> None:
        if rows:
            store = JsonlStore(self.errors, key=lambda r: f"{r['at']}\t{r['question_id']}")
            store.append(rows)

    def _pending_answers(
        self, records: Sequence[WikiNFQARecord], method: str
    ) -> tuple[list[WikiNFQARecord], PhaseCounts]:
        pending = [r for r in records if _key(method, r.question_id) not in self.answers]
        return pending, PhaseCounts(done_before=len(records) - len(pending))

    def _store_answers(
        self, method: str, chunk: ChunkAnswers, size: int, counts: PhaseCounts
    ) -> None:
        """Append one answered batch; abort the run if every question of it failed."""
        self._write_errors(chunk.errors)
        counts.failed += size - len(chunk.records)
        if not chunk.records:
            raise EvalAborted(
                f"every question of a batch failed for method {method!r}; see {self.errors}"
            )
        self.answers.append(chunk.records)
        counts.computed += len(chunk.records)

    # ------------------------------------------------------------------ phase 1

    async def _answer_method(self, records: Sequence[WikiNFQARecord], method: str) -> PhaseCounts:
        pending, counts = self._pending_answers(records, method)
        if not pending:
            return counts
        answerer = await self._answerer.get()
        size = max(1, self.settings.eval.batch_size)
        with self._bar(len(pending), f"answer {method}") as bar:
            for start in range(0, len(pending), size):
                chunk = pending[start : start + size]
                done = await answer_chunk(
                    answerer, chunk, method, self.labels, self.settings.eval.store_passage_text
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
        seed = self.settings.eval.reference_seed
        name = scorer_name(self.scorer_settings)
        size = max(1, self.settings.eval.score_batch_size)
        with self._bar(len(todo), "score") as bar:
            for start in range(0, len(todo), size):
                chunk = todo[start : start + size]
                rows = await score_chunk(scorer, chunk, seed, name, self.labels)
                self._store_scores(rows, counts)
                bar.update(len(chunk))
        return counts

    def _pending_scores(
        self, records: Sequence[WikiNFQARecord], methods: Sequence[str]
    ) -> tuple[list[tuple[str, WikiNFQARecord, dict[str, Any]]], PhaseCounts]:
        """Stored answers without a score, in (method, record) order."""
        todo: list[tuple[str, WikiNFQARecord, dict[str, Any]]] = []
        counts = PhaseCounts()
        for method in methods:
            for rec in records:
                key = _key(method, rec.question_id)
                answer = self.answers.get(key)
                if answer is None:
                    continue
                if key in self.scores:
                    counts.done_before += 1
                else:
                    todo.append((method, rec, answer))
        return todo, counts

    def _store_scores(self, rows: Sequence[dict[str, Any]], counts: PhaseCounts) -> None:
        counts.failed += sum(r["rank"] is None for r in rows)
        self.scores.append(rows)
        counts.computed += len(rows)

    # ------------------------------------------------------------------ phase 3

    def _judge(self, engine: Engine) -> CoverageJudge:
        return CoverageJudge.from_settings(engine, self.settings, self.scorer_settings)

    async def _decompose(self, records: Sequence[WikiNFQARecord]) -> PhaseCounts:
        pending = [r for r in records if r.question_id not in self.subquestions]
        counts = PhaseCounts(done_before=len(records) - len(pending))
        if not pending:
            return counts
        judge = self._judge(await self._scorer.get())
        size = max(1, self.settings.eval.score_batch_size)
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
        counts = PhaseCounts()
        todo: list[tuple[str, WikiNFQARecord, dict[str, Any], Decomposition | None]] = []
        for method in methods:
            for rec in records:
                key = _key(method, rec.question_id)
                answer = self.answers.get(key)
                if answer is None:
                    continue
                if key in self.coverage:
                    counts.done_before += 1
                    continue
                sub = self.subquestions.get(rec.question_id) or {}
                dec = sub.get("decomposition")
                todo.append((method, rec, answer, Decomposition.from_dict(dec) if dec else None))
        if not todo:
            return counts
        judge = self._judge(await self._scorer.get())
        size = max(1, self.settings.eval.score_batch_size)
        with self._bar(len(todo), "coverage") as bar:
            for start in range(0, len(todo), size):
                chunk = todo[start : start + size]
                judgeable = [t for t in chunk if t[3] is not None]
                items = [
                    CoverageItem(
                        key=_key(method, rec.question_id),
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
                    res = results.get(_key(method, rec.question_id))
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
