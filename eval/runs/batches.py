"""The work of one batch: answer records and LINKAGE score rows.

Module-level so that a local run (:class:`eval.runs.runner.EvalRunner`) and a distributed
one (:mod:`eval.runs.distributed`, where Ray actors do the work and the driver writes the
stores) share one definition.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from eval.data.labels import QuestionLabel, type_of
from eval.data.methods import answerer_for, mode_of
from eval.data.routes import CLASSIFIED, label_route
from eval.data.wikinfqa import WikiNFQARecord
from eval.judging.linkage import LinkageItem, LinkageScorer, build_references
from eval.judging.linkage_prob import LinkageProbScorer
from eval.judging.view import JudgeView
from eval.runs.resume import error_row, run_key
from typed_rag.request import AnswerRequest

log = logging.getLogger("eval.runs.runner")  # named as before the split, so log lines read the same


class Answerer(Protocol):
    """What the runner needs of :class:`typed_rag.system.TypedRAG`: it answers the
    same :class:`~typed_rag.request.AnswerRequest` the server and ``typed-rag ask`` build."""

    async def answer(self, question: AnswerRequest) -> Any: ...

    async def answer_many(self, questions: Sequence[AnswerRequest]) -> list[Any]: ...

    async def classify(self, questions: Sequence[str]) -> list[Any]: ...


def result_dict(result: Any) -> dict[str, Any]:
    if hasattr(result, "model_dump"):
        return result.model_dump(mode="json")
    if isinstance(result, dict):
        return result
    raise TypeError(f"answerer returned {type(result).__name__}, expected a Result")


@dataclass
class ChunkAnswers:
    """One answered batch: the records to store and the questions that failed."""

    records: list[dict[str, Any]]
    errors: list[dict[str, Any]]  # error rows for errors.jsonl


def answer_record(
    method: str,
    rec: WikiNFQARecord,
    result: Any,
    wall: float,
    batch: int,
    labels: Mapping[str, QuestionLabel],
    passage_text: bool = True,
) -> dict[str, Any]:
    data = result_dict(result)
    if not passage_text:
        data["passages"] = [
            {k: v for k, v in p.items() if k != "text"} for p in data.get("passages") or []
        ]
    return {
        "method": method,
        "question_id": rec.question_id,
        "subset": rec.subset,
        "type": type_of(labels, rec.question_id),
        # The pipeline that answered (typed-rag: the recorded type, see ``routed_types``,
        # or the classifier's with ``eval.route="classifier"``).
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
        requests = [
            AnswerRequest(q, mode=mode, force_type=f)
            for q, f in zip(questions, forced, strict=True)
        ]
        results: list[Any | None] = list(await answerer.answer_many(requests))
        if len(results) != len(questions):
            raise RuntimeError(f"answer_many returned {len(results)} results for {len(questions)}")
    except Exception as exc:
        log.warning("batch of %d failed (%s); answering one by one", len(questions), exc)
        results = []
        for question, qid, ftype in zip(questions, ids, forced, strict=True):
            try:
                request = AnswerRequest(question, mode=mode, force_type=ftype)
                results.append(await answerer.answer(request))
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
    route: str = "labels",
) -> ChunkAnswers:
    """Answer one batch of benchmark records (see :func:`answer_each`); ``route`` is
    ``eval.route``."""
    results, errors, wall = await answer_each(
        answerer_for(answerer, method),
        [r.question for r in chunk],
        [r.question_id for r in chunk],
        mode_of(method),
        method,
        force_types=await forced_types(answerer, chunk, method, labels, route),
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


async def forced_types(
    answerer: Answerer,
    chunk: Sequence[WikiNFQARecord],
    method: str,
    labels: Mapping[str, QuestionLabel],
    route: str,
) -> list[str] | None:
    """The type each typed-rag answer is forced to under ``eval.route`` (None: the
    classifier routes): the labels, or with ``labels-factoid`` / ``labels-classifier`` the
    labels overruled where the classifier is confident (:func:`eval.data.routes.label_route`)."""
    types = routed_types(chunk, method, labels) if route != "classifier" else None
    if route not in CLASSIFIED or types is None:
        return types
    predictions = await answerer.classify([r.question for r in chunk])
    return [label_route(t, p, route) for t, p in zip(types, predictions, strict=True)]


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
    view: JudgeView,
) -> list[dict[str, Any]]:
    """Score rows for one batch of (method, record, stored answer), each answer as ``view``
    reads it."""
    items = [
        LinkageItem(
            key=run_key(method, rec.question_id),
            question=rec.question,
            references=build_references(rec, reference_seed),
            candidate=view.read(str(answer.get("answer") or "")),
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
