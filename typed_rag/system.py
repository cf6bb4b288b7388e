"""TypedRAG: the request path (classify -> type pipeline -> answer + trace) behind one object.

CONTRACT (used by serving/ and eval/); the pipelines implement it:

    rag = TypedRAG(settings, engine=..., retriever=..., reranker=..., classifier=...)
    rag = TypedRAG.from_settings(settings)          # builds every component from settings
    await rag.start(); ...; await rag.close()
    result: Result = await rag.answer(AnswerRequest(question, mode="rag", top_k=3))
    result = await rag.answer(question, mode="rag", top_k=3)   # the same request, built here
    async for event in rag.answer_stream(request):  # str deltas of the final answer,
        ...                                         # then exactly one Result, last
    async for event in rag.answer_stream(request, progress=True):  # also Progress events
        ...                                         # (type, plan, sub-answers) as they happen
    results = await rag.answer_many(requests)       # concurrent; engine batches them

Every entry point takes one :class:`~typed_rag.request.AnswerRequest` (or a question
and its fields, which build one), resolved once against the settings
(:meth:`~typed_rag.request.AnswerRequest.resolve`): defaults, checks, and ``top_k``
fitted to the model's context. Bad requests raise
:class:`~typed_rag.request.RequestError` (a :class:`~typed_rag.errors.UserError`).

The steps before the pipeline (standalone follow-up, constraints, type and the
pipeline chosen) are in :mod:`typed_rag.routing`; the citation checks after it in :mod:`typed_rag.finishing.finish`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, Unpack

from typed_rag.classifier.base import TypeClassifier, TypePrediction
from typed_rag.config import Settings
from typed_rag.config_resolve import resolve_settings, with_built_reranker
from typed_rag.constraints import with_instructions
from typed_rag.conversation import Turn, with_chat_options
from typed_rag.engines.base import ChatRequest, Engine
from typed_rag.errors import UserError
from typed_rag.finishing.finish import amendment_note, checked_against_documents, finish
from typed_rag.finishing.scaffolding import add_kinds, unscaffold_stream
from typed_rag.pipelines import Context, Final
from typed_rag.pipelines.citing import Citations
from typed_rag.pipelines.rounds import Rounds
from typed_rag.pipelines.search import Search
from typed_rag.pipelines.support import drop_unsupported
from typed_rag.pipelines.trace import Trace
from typed_rag.progress import Progress, ProgressSink
from typed_rag.request import AnswerRequest, RequestFields, Resolved
from typed_rag.result import Result
from typed_rag.retrieval import Reranker, Retriever, open_retriever, with_reranking
from typed_rag.retrieval.collections import WIKI, CollectionRetrievers, Corpus, corpus_kind
from typed_rag.retrieval.reranked import rerank_pool
from typed_rag.routing import TypeArg, choose, detect_constraints, make_standalone
from typed_rag.types import QuestionType

log = logging.getLogger(__name__)

WARM_QUESTION = "Why do leaves change color in autumn?"
Asked = AnswerRequest | Resolved | str


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
        # the document collections that requests name (``collection``), opened on first use
        self.collections = CollectionRetrievers(
            settings, reranker, resolve_settings if settings.resolved else None
        )
        # what this instance's own index holds (``retrieval.index_dir`` may be a collection)
        self.corpus: Corpus = corpus_kind(settings.index_dir)

    @classmethod
    def from_settings(cls, settings: Settings) -> TypedRAG:
        """Build every component from ``settings`` (engine, BM25 index, reranker, classifier).

        The settings are resolved first (:func:`~typed_rag.config_resolve.resolve_settings`),
        once: every component reads the concrete values, and ``self.settings`` holds them
        (with the declared ones, :meth:`~typed_rag.config.Settings.declared`).
        In ``llm`` mode a missing index is tolerated (nothing is retrieved); a
        classifier that cannot be loaded leaves unforced questions on the
        plain-RAG route, which each Result records (``type_source="none"`` and
        a fallback note). While the fine-tuned classifier is still training (a
        fresh set-up), the embedding head types questions until it is there
        (``build_classifier(..., interim=True)``).
        """
        from typed_rag.classifier import build_classifier
        from typed_rag.engines import build_engine
        from typed_rag.rerank import build_reranker, reranker_kind

        settings = resolve_settings(settings)
        engine = build_engine(settings)
        try:
            retriever = open_retriever(settings)
        except (UserError, FileNotFoundError):
            if settings.mode != "llm":
                raise
            retriever = None
        reranker = build_reranker(settings)  # None when reranker.kind is "none"
        settings = with_built_reranker(settings, reranker_kind(reranker))
        if retriever is not None:  # every query reranked when retrieval.rerank_depth > 0
            retriever = with_reranking(settings, retriever, reranker)
        try:
            classifier: TypeClassifier | None = build_classifier(settings, interim=True)
        except (UserError, FileNotFoundError) as exc:
            # Questions with a forced type still work; the others are answered by
            # plain RAG, and each Result says so (type_source "none" + a fallback).
            log.warning("no question-type classifier (%s): unforced questions get plain RAG", exc)
            classifier = None
        return cls(settings, engine, retriever, reranker, classifier)

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

    def corpus_for(self, collection: str | None) -> Corpus:
        """What a request's passages are searched in: a named collection holds documents."""
        return self.corpus if collection is None or collection == WIKI else "documents"

    def retriever_for(self, collection: str | None) -> Retriever | None:
        """The retriever of a request: its ``collection``'s, or this instance's own."""
        if collection is None or collection == WIKI:
            return self.retriever
        return self.collections.get(collection)

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

    # --- answering ----------------------------------------------------------------

    def resolve(self, question: Asked, **fields: Unpack[RequestFields]) -> Resolved:
        """``question`` as a resolved request: an :class:`AnswerRequest` is resolved against
        these settings, a string first becomes one with ``fields``; a resolved request
        (the server resolves at its edge, before it queues) is used as it is."""
        if isinstance(question, str):
            question = AnswerRequest(question, **fields)  # type: ignore[arg-type]
        elif fields:
            raise UserError(f"fields given with a built request: {', '.join(sorted(fields))}")
        if isinstance(question, Resolved):
            return question
        return question.resolve(self.settings)

    async def answer(
        self,
        question: Asked,
        *,
        on_event: ProgressSink | None = None,
        **fields: Unpack[RequestFields],
    ) -> Result:
        """Answer one request and return the answer with its full trace.

        ``on_event`` is called with each :class:`Progress` event as it happens.
        """
        ctx, final = await self._until_final(self.resolve(question, **fields), on_event)
        ctx.result.answer = (await ctx.rounds.run_final(final)).strip()
        return await _finish(ctx)

    async def answer_stream(
        self, question: Asked, *, progress: bool = False, **fields: Unpack[RequestFields]
    ) -> AsyncIterator[str | Progress | Result]:
        """Yield the final answer as text deltas, then the Result (whose answer is their join).

        With ``progress``, :class:`Progress` events (type, plan, sources, each sub-answer,
        answer start) are yielded too, each as soon as it exists, before the deltas.
        """
        request = self.resolve(question, **fields)
        events: asyncio.Queue[Progress] = asyncio.Queue()
        sink = events.put_nowait if progress else None
        pending = asyncio.ensure_future(self._until_final(request, sink))
        async for event in _events_until(pending, events):
            yield event
        ctx, final = pending.result()
        while not events.empty():  # announced as the pipeline ended (its sources, a sub-answer)
            yield events.get_nowait()
        parts: list[str] = []
        found: list[str] = []
        deltas = ctx.rounds.stream_final(final)
        if ctx.settings.method.options().drop_scaffolding:
            deltas = unscaffold_stream(deltas, found)
        async for delta in deltas:
            while not events.empty():  # the "answer" event, before the first token
                yield events.get_nowait()
            if delta:
                parts.append(delta)
                yield delta
        while not events.empty():
            yield events.get_nowait()
        ctx.result.answer = "".join(parts)
        ctx.result.scaffolding, ctx.result.unscaffolded = found, bool(found)
        finishing = asyncio.ensure_future(_finish(ctx, streamed=True))
        async for event in _events_until(finishing, events):  # "check", over documents
            yield event
        result = finishing.result()
        if result.streamed_answer is not None and (note := amendment_note(result)):
            yield note  # what the checks changed, for a client that reads only the text
        yield result

    async def rewrite(
        self, message: str, history: Sequence[Turn], seed: int | None = None
    ) -> dict[str, Any]:
        """Only the follow-up rewrite of :meth:`answer` (for its evaluation): the
        ``Result.rewrite`` dict, plus the engine calls it made under ``calls``."""
        request = self.resolve(message, seed=seed)
        result = Result(question=request.question, mode=request.mode)
        await make_standalone(self._context(request, result), history)
        info = dict(result.rewrite or {})
        info["calls"] = [c.model_dump() for c in result.calls]
        return info

    async def answer_many(
        self,
        questions: Sequence[Asked],
        *,
        concurrency: int | None = None,
        force_type: TypeArg | Sequence[TypeArg] = None,
        **fields: Unpack[RequestFields],
    ) -> list[Result]:
        """Answer many requests concurrently (results in input order).

        The classifier runs once over the whole batch; up to ``concurrency``
        (default ``settings.engine.max_concurrency``) questions are in flight,
        so a batching engine sees their requests together. Question strings are
        built into requests with ``fields``; ``force_type`` may be one type for all
        or one per question.
        """
        if isinstance(force_type, QuestionType | str) or force_type is None:
            forced: list[TypeArg] = [force_type] * len(questions)
        else:
            forced = list(force_type)
            if len(forced) != len(questions):
                raise UserError(
                    f"force_type has {len(forced)} entries for {len(questions)} questions"
                )
        requests = [
            self.resolve(q, **({**fields, "force_type": f} if f is not None else fields))
            for q, f in zip(questions, forced, strict=True)
        ]
        needs_classifier = [i for i, r in enumerate(requests) if r.force_type is None]
        start = time.perf_counter()
        preds = await self.classify([requests[i].question for i in needs_classifier])
        per_question = (time.perf_counter() - start) / max(1, len(needs_classifier))
        predictions: dict[int, TypePrediction | None] = dict(
            zip(needs_classifier, preds, strict=True)
        )
        limit = asyncio.Semaphore(max(1, concurrency or self.settings.engine.max_concurrency))

        async def one(i: int) -> Result:
            async with limit:
                pre = (predictions.get(i), per_question if i in predictions else 0.0)
                ctx, final = await self._until_final(requests[i], None, pre)
                ctx.result.answer = (await ctx.rounds.run_final(final)).strip()
                return await _finish(ctx)

        return list(await asyncio.gather(*(one(i) for i in range(len(requests)))))

    async def warm_up(self) -> float:
        """One internal request through every component (classifier, retrieval with its
        encoders and reranker, engine): the first user pays no loading. Returns seconds."""
        start = time.perf_counter()
        await self.classify([WARM_QUESTION])
        if self.retriever is not None:
            k = self.settings.retrieval.top_k
            (hits,) = await asyncio.to_thread(self.retriever.search, [WARM_QUESTION], k)
            if self.reranker is not None and hits:
                await asyncio.to_thread(rerank_pool, self.reranker, WARM_QUESTION, hits, k)
        warm = ChatRequest(messages=[{"role": "user", "content": WARM_QUESTION}], max_tokens=1)
        await self.engine.generate([warm])
        return time.perf_counter() - start

    # --- internals ----------------------------------------------------------------

    def _context(
        self, request: Resolved, result: Result, on_event: ProgressSink | None = None
    ) -> Context:
        chat = request.asked.chat
        result.corpus = self.corpus_for(request.asked.collection)
        trace = Trace(result, on_event)
        rounds = Rounds(
            self.engine,
            request.sampling or self.settings.sampling,
            request.seed,
            trace,
            priority=1 if request.short else 0,
            stop=list(chat.stop) or None,
            output_schema=chat.json_schema,
        )
        return Context(
            question=request.question,
            settings=self.settings,
            top_k=request.top_k,
            trace=trace,
            rounds=rounds,
            search=Search(trace, self.retriever_for(request.asked.collection), self.reranker),
            citations=Citations(trace),
            corpus=result.corpus,
        )

    async def _until_final(
        self,
        request: Resolved,
        on_event: ProgressSink | None = None,
        classified: tuple[TypePrediction | None, float] | None = None,
    ) -> tuple[Context, Final]:
        """Everything before the final generation: routing, then the chosen pipeline."""
        mode, chat = request.mode, request.asked.chat
        result = Result(question=request.question, mode=mode)
        result.timings = dict.fromkeys(("classify", "plan", "retrieve", "rerank"), 0.0)
        result.timings |= {"sub_answers": 0.0, "generate": 0.0}
        result.fallbacks.extend(request.notes)
        ctx = self._context(request, result, on_event)
        if chat.history and await make_standalone(ctx, chat.history):
            classified = None  # classify the standalone question
        if mode == "typed-rag" and await detect_constraints(ctx):
            classified = None  # classify the core question, without the instruction
        if classified is not None:
            prediction, result.timings["classify"] = classified
        elif request.force_type is None:
            t0 = time.perf_counter()
            (prediction,) = await self.classify([ctx.question])
            result.timings["classify"] = time.perf_counter() - t0
        else:
            prediction = None
        routing = choose(
            mode,
            prediction,
            request.force_type,
            self.settings,
            ctx.constraints is not None,
            ctx.corpus,
        )
        result.type = routing.type.value
        result.type_source = routing.source
        if routing.prediction is not None:
            result.predicted_type = routing.prediction.type.value
            result.probabilities = dict(routing.prediction.probabilities)
        ctx.trace.emit(
            "type",
            mode=mode,
            type=result.type,
            type_source=result.type_source,
            predicted_type=result.predicted_type,
            probabilities=result.probabilities,
        )

        if mode == "typed-rag" and routing.source == "none":
            ctx.trace.fallback("classify: no classifier loaded -> EVIDENCE-BASED (plain rag)")
        if mode != "llm" and self.retriever is None:
            ctx.trace.fallback(f"{mode}: no retriever configured -> answered without passages")
        try:
            final = await routing.pipeline(ctx)
        except UserError:
            raise
        except Exception:
            log.exception(
                "%s pipeline (%s) failed after %d rounds for question %r",
                mode,
                routing.type.value,
                ctx.rounds.done,
                request.question[:200],
            )
            raise
        final.messages = with_chat_options(with_instructions(final.messages, ctx.constraints), chat)
        return ctx, final


async def _events_until(
    task: asyncio.Future[Any], events: asyncio.Queue[Progress]
) -> AsyncIterator[Progress]:
    """The progress events put in ``events`` while ``task`` runs, each as it comes; the
    task is cancelled if the consumer stops early."""
    try:
        while not task.done():
            waiter = asyncio.ensure_future(events.get())
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if waiter.done():
                yield waiter.result()
            else:
                waiter.cancel()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _finish(ctx: Context, streamed: bool = False) -> Result:
    """The answer's last steps (:func:`finish`), timed as ``finish``; then, for a typed-rag
    answer over documents under ``method.support_check``, its cited sentences asked against
    their passages (:func:`drop_unsupported`, timed as ``support``).

    A streamed typed-rag answer over documents is finished as the same request unstreamed
    would be, though its text is already sent (a "check" event says it is being checked):
    when that changes it, ``streamed_answer`` keeps what was sent and ``answer`` is the
    checked text (the server sends it as ``typed_rag.checked_answer``)."""
    start = time.perf_counter()
    opts = ctx.settings.method.options()
    result, sent = ctx.result, ctx.result.answer
    amend = streamed and checked_against_documents(result)
    streamed_kinds = list(result.scaffolding)  # rewritten as it streamed
    finish(result, opts, ctx.trace.started, streamed=streamed and not amend)
    if amend:  # finished as unstreamed, which records only what is left in the text
        add_kinds(result.scaffolding, streamed_kinds)
    result.timings["finish"] = time.perf_counter() - start
    if opts.support_check and checked_against_documents(result):
        if amend:
            ctx.trace.emit("check")
        await drop_unsupported(result, lambda requests: ctx.rounds.score("support", requests))
        result.timings["total"] = time.perf_counter() - ctx.trace.started
    if amend and result.answer != sent:
        result.streamed_answer = sent
    return result
