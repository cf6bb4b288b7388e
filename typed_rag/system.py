"""TypedRAG: the request path (classify -> type pipeline -> answer + trace) behind one object.

CONTRACT (used by serving/ and eval/); the pipelines implement it:

    rag = TypedRAG(settings, engine=..., retriever=..., reranker=..., classifier=...)
    rag = TypedRAG.from_settings(settings)          # builds every component from settings
    await rag.start(); ...; await rag.close()
    result: Result = await rag.answer(question, mode=None, force_type=None, top_k=None, seed=None)
    async for event in rag.answer_stream(question, ...):  # str deltas of the final answer,
        ...                                             # then exactly one Result, last
    async for event in rag.answer_stream(question, progress=True):  # also Progress events
        ...                                             # (type, plan, sub-answers) as they happen
    results = await rag.answer_many(questions, ...)     # concurrent; engine batches them

``mode`` is ``typed-rag``, ``rag`` or ``llm`` (default ``settings.mode``);
``force_type`` (a :class:`QuestionType` or its label) skips the classifier.
Bad arguments raise :class:`~typed_rag.errors.UserError`.

The steps before the pipeline (standalone follow-up, constraints, type) are in
:mod:`typed_rag.routing`; the citation checks after it in :mod:`typed_rag.finishing.finish`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from typed_rag.classifier.base import TypeClassifier, TypePrediction
from typed_rag.config import SamplingSettings, Settings
from typed_rag.constraints import with_instructions
from typed_rag.conversation import ChatOptions, Turn, with_chat_options
from typed_rag.engines.base import Engine
from typed_rag.errors import UserError
from typed_rag.finishing.finish import finish
from typed_rag.pipelines import MODES, Context, Final, pipeline_for
from typed_rag.progress import Progress, ProgressSink
from typed_rag.qtree.answering import prepare_outline_guided
from typed_rag.result import Result
from typed_rag.retrieval import Reranker, Retriever, open_retriever, with_reranking
from typed_rag.routing import (
    Routing,
    TypeArg,
    answered_as,
    detect_constraints,
    make_standalone,
    parse_type,
    route,
)
from typed_rag.types import QuestionType

log = logging.getLogger(__name__)


class TypedRAG:
    """Answers questions with type-aware pipelines; one instance serves many concurrent calls."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        retriever: Retriever | None = None,
        reranker: Reranker | None = None,
        classifier: TypeClassifier | None = None,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.retriever = retriever
        self.reranker = reranker
        self.classifier = classifier

    @classmethod
    def from_settings(cls, settings: Settings) -> TypedRAG:
        """Build every component from ``settings`` (engine, BM25 index, reranker, classifier).

        In ``llm`` mode a missing index is tolerated (nothing is retrieved); a
        classifier that cannot be loaded leaves unforced questions on the
        plain-RAG route, which each Result records (``type_source="none"`` and
        a fallback note).
        """
        from typed_rag.classifier import build_classifier
        from typed_rag.engines import build_engine
        from typed_rag.rerank import build_reranker

        engine = build_engine(settings)
        try:
            retriever = open_retriever(settings)
        except (UserError, FileNotFoundError):
            if settings.mode != "llm":
                raise
            retriever = None
        reranker = build_reranker(settings)  # None when reranker.kind is "none"
        if retriever is not None:  # every query reranked when retrieval.rerank_depth > 0
            retriever = with_reranking(settings, retriever, reranker)
        try:
            classifier: TypeClassifier | None = build_classifier(settings)
        except (UserError, FileNotFoundError) as exc:
            # Questions with a forced type still work; the others are answered by
            # plain RAG, and each Result says so (type_source "none" + a fallback).
            log.warning("no question-type classifier (%s): unforced questions get plain RAG", exc)
            classifier = None
        return cls(settings, engine, retriever, reranker, classifier)

    def with_method_profile(self, profile: str) -> TypedRAG:
        """The same components answering with another ``method.profile`` (an evaluation
        compares method variants on one engine, index and classifier)."""
        method = self.settings.method.model_copy(update={"profile": profile})
        settings = self.settings.model_copy(update={"method": method})
        return TypedRAG(settings, self.engine, self.retriever, self.reranker, self.classifier)

    async def start(self) -> None:
        await self.engine.start()

    async def close(self) -> None:
        await self.engine.close()

    async def warm_prompts(self) -> int:
        """Prefill every typed pipeline's plan prompt up to where the question goes.

        With a prompt cache (the llama.cpp engine) a question's plan then skips
        those ~220 fixed tokens, about 4 s of a 2-core CPU's prefill, from the
        first question of each type on. Returns how many prompts were sent.
        """
        from typed_rag.pipelines import TYPED

        opts = self.settings.method.options()
        prompts = [p.plan_prompt for p in dict.fromkeys(TYPED.values()) if p.plan_prompt]
        for plan_prompt in prompts:
            await self.engine.prefill(plan_prompt("", opts))
        return len(prompts)

    def healthy(self) -> bool:
        return self.engine.healthy()

    async def __aenter__(self) -> TypedRAG:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- routing ------------------------------------------------------------------

    async def classify(self, questions: Sequence[str]) -> list[TypePrediction | None]:
        """Classifier predictions (None for all without a classifier), off the event loop."""
        if self.classifier is None or not questions:
            return [None] * len(questions)
        threshold = self.settings.classifier.min_confidence
        return await asyncio.to_thread(self.classifier.predict, list(questions), threshold)

    @staticmethod
    def route(prediction: TypePrediction | None, force_type: TypeArg = None) -> Routing:
        """Forced type wins; an unsure or missing prediction goes to EVIDENCE-BASED (plain RAG)."""
        return route(prediction, force_type)

    # --- answering ----------------------------------------------------------------

    async def answer(
        self,
        question: str,
        mode: str | None = None,
        force_type: TypeArg = None,
        top_k: int | None = None,
        seed: int | None = None,
        sampling: Mapping[str, Any] | None = None,
        on_event: ProgressSink | None = None,
        chat: ChatOptions | None = None,
    ) -> Result:
        """Answer one question and return the answer with its full trace.

        ``sampling`` overrides fields of ``settings.sampling`` for this call
        (e.g. ``{"temperature": 0.2, "max_tokens": 256}``); ``on_event`` is
        called with each :class:`Progress` event as it happens; ``chat`` carries the
        conversation the question is the last message of (see :mod:`typed_rag.conversation`).
        """
        ctx, final, start = await self._prepare(
            question, mode, force_type, top_k, seed, None, sampling, on_event, chat
        )
        ctx.result.answer = (await ctx.run_final(final)).strip()
        return finish(ctx.result, ctx.settings.method.options(), start)

    async def answer_stream(
        self,
        question: str,
        mode: str | None = None,
        force_type: TypeArg = None,
        top_k: int | None = None,
        seed: int | None = None,
        sampling: Mapping[str, Any] | None = None,
        progress: bool = False,
        chat: ChatOptions | None = None,
    ) -> AsyncIterator[str | Progress | Result]:
        """Yield the final answer as text deltas, then the Result (whose answer is their join).

        With ``progress``, :class:`Progress` events (type, plan, each sub-answer,
        answer start) are yielded too, each as soon as it exists, before the deltas;
        ``chat`` as in :meth:`answer`.
        """
        events: asyncio.Queue[Progress] = asyncio.Queue()
        sink = events.put_nowait if progress else None
        prepare = asyncio.ensure_future(
            self._prepare(question, mode, force_type, top_k, seed, None, sampling, sink, chat)
        )
        try:
            while not prepare.done():
                waiter = asyncio.ensure_future(events.get())
                await asyncio.wait({prepare, waiter}, return_when=asyncio.FIRST_COMPLETED)
                if waiter.done():
                    yield waiter.result()
                else:
                    waiter.cancel()
        finally:
            if not prepare.done():
                prepare.cancel()
                await asyncio.gather(prepare, return_exceptions=True)
        ctx, final, start = prepare.result()
        parts: list[str] = []
        async for delta in ctx.stream_final(final):
            while not events.empty():
                yield events.get_nowait()
            parts.append(delta)
            yield delta
        while not events.empty():
            yield events.get_nowait()
        ctx.result.answer = "".join(parts)
        yield finish(ctx.result, ctx.settings.method.options(), start, streamed=True)

    async def rewrite(
        self, message: str, history: Sequence[Turn], seed: int | None = None
    ) -> dict[str, Any]:
        """Only the follow-up rewrite of :meth:`answer` (for its evaluation): the
        ``Result.rewrite`` dict, plus the engine calls it made under ``calls``."""
        message = _check_question(message)
        result = Result(question=message, mode=self.settings.mode)
        ctx = Context(
            question=message,
            settings=self.settings,
            engine=self.engine,
            result=result,
            seed=self.settings.sampling.seed if seed is None else seed,
        )
        await make_standalone(ctx, history)
        info = dict(result.rewrite or {})
        info["calls"] = [c.model_dump() for c in result.calls]
        return info

    async def answer_many(
        self,
        questions: Sequence[str],
        mode: str | None = None,
        force_type: TypeArg | Sequence[TypeArg] = None,
        top_k: int | None = None,
        seed: int | None = None,
        concurrency: int | None = None,
        sampling: Mapping[str, Any] | None = None,
    ) -> list[Result]:
        """Answer many questions concurrently (results in input order).

        The classifier runs once over the whole batch; up to ``concurrency``
        (default ``settings.engine.max_concurrency``) questions are in flight,
        so a batching engine sees their requests together. ``force_type`` may
        be one type for all or one per question.
        """
        if isinstance(force_type, QuestionType | str) or force_type is None:
            forced: list[TypeArg] = [force_type] * len(questions)
        else:
            forced = list(force_type)
            if len(forced) != len(questions):
                raise UserError(
                    f"force_type has {len(forced)} entries for {len(questions)} questions"
                )
        for q in questions:
            _check_question(q)
        needs_classifier = [i for i, f in enumerate(forced) if f is None]
        start = time.perf_counter()
        preds = await self.classify([questions[i] for i in needs_classifier])
        per_question = (time.perf_counter() - start) / max(1, len(needs_classifier))
        predictions: dict[int, TypePrediction | None] = dict(
            zip(needs_classifier, preds, strict=True)
        )
        limit = asyncio.Semaphore(max(1, concurrency or self.settings.engine.max_concurrency))

        async def one(i: int) -> Result:
            async with limit:
                pre = (predictions.get(i), per_question if i in predictions else 0.0)
                ctx, final, t0 = await self._prepare(
                    questions[i], mode, forced[i], top_k, seed, pre, sampling
                )
                ctx.result.answer = (await ctx.run_final(final)).strip()
                return finish(ctx.result, ctx.settings.method.options(), t0)

        return list(await asyncio.gather(*(one(i) for i in range(len(questions)))))

    # --- internals ----------------------------------------------------------------

    async def _prepare(
        self,
        question: str,
        mode: str | None,
        force_type: TypeArg,
        top_k: int | None,
        seed: int | None,
        classified: tuple[TypePrediction | None, float] | None,
        sampling: Mapping[str, Any] | None = None,
        on_event: ProgressSink | None = None,
        chat: ChatOptions | None = None,
    ) -> tuple[Context, Final, float]:
        start = time.perf_counter()
        question = _check_question(question)
        mode = mode or self.settings.mode
        if mode not in MODES:
            raise UserError(f"unknown mode {mode!r}; expected one of: {', '.join(MODES)}")
        if top_k is not None and top_k < 1:
            raise UserError(f"top_k must be at least 1, got {top_k}")
        if force_type is not None:
            parse_type(force_type)  # validate before any work

        result = Result(question=question, mode=mode)
        result.timings = {stage: 0.0 for stage in ("classify", "plan", "retrieve", "rerank")}
        result.timings.update(sub_answers=0.0, generate=0.0)
        ctx = Context(
            question=question,
            settings=self.settings,
            engine=self.engine,
            result=result,
            retriever=self.retriever,
            reranker=self.reranker,
            top_k=top_k or self.settings.retrieval.top_k,
            seed=self.settings.sampling.seed if seed is None else seed,
            sampling=_sampling(self.settings.sampling, sampling),
            on_event=on_event,
            started=start,
        )
        if chat is not None:
            ctx.stop = list(chat.stop) or None
            ctx.output_schema = chat.json_schema
            if chat.history and await make_standalone(ctx, chat.history):
                classified = None  # classify the standalone question
        if mode == "typed-rag" and await detect_constraints(ctx):
            classified = None  # classify the core question, without the instruction
        if classified is not None:
            prediction, result.timings["classify"] = classified
        elif force_type is None:
            t0 = time.perf_counter()
            (prediction,) = await self.classify([ctx.question])
            result.timings["classify"] = time.perf_counter() - t0
        else:
            prediction = None
        routing = self.route(prediction, force_type)
        if mode == "typed-rag":
            routing = answered_as(routing, self.settings.method.options().debate_route)
        result.type = routing.type.value
        result.type_source = routing.source
        result.routed_type = routing.routed_from.value if routing.routed_from else None
        if routing.prediction is not None:
            result.predicted_type = routing.prediction.type.value
            result.probabilities = dict(routing.prediction.probabilities)
        ctx.emit(
            "type",
            mode=mode,
            type=result.type,
            type_source=result.type_source,
            routed_type=result.routed_type,
            predicted_type=result.predicted_type,
            probabilities=result.probabilities,
        )

        if mode == "typed-rag" and routing.source == "none":
            ctx.fallback("classify: no classifier loaded -> EVIDENCE-BASED (plain rag)")
        if mode != "llm" and self.retriever is None:
            ctx.fallback(f"{mode}: no retriever configured -> answered without passages")
        try:
            prepare = pipeline_for(mode, routing.type, self.settings.augment.types)
            if ctx.constraints is not None and self.settings.constraints.outline:
                prepare = prepare_outline_guided
            final = await prepare(ctx)
        except UserError:
            raise
        except Exception:
            log.exception(
                "%s pipeline (%s) failed after %d rounds for question %r",
                mode,
                routing.type.value,
                ctx.rounds,
                question[:200],
            )
            raise
        final.messages = with_chat_options(with_instructions(final.messages, ctx.constraints), chat)
        return ctx, final, start


def _sampling(
    base: SamplingSettings, override: Mapping[str, Any] | None
) -> SamplingSettings | None:
    """``base`` with the non-None fields of ``override``; None when there is nothing to change."""
    update = {k: v for k, v in (override or {}).items() if v is not None}
    if not update:
        return None
    unknown = sorted(set(update) - set(SamplingSettings.model_fields))
    if unknown:
        raise UserError(f"unknown sampling field(s): {', '.join(unknown)}")
    try:
        return SamplingSettings.model_validate({**base.model_dump(), **update})
    except ValueError as exc:
        raise UserError(f"invalid sampling override: {exc}") from None


def _check_question(question: str) -> str:
    if not isinstance(question, str) or not question.strip():
        raise UserError("question is empty")
    return question.strip()
