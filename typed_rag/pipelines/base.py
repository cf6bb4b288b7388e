"""What every pipeline shares: engine rounds, retrieval, citations and the trace.

A pipeline is a module that owns its plan model (a :class:`Plan`), the plan's
JSON schema, parser and prompts, and an async ``prepare(ctx) -> Final``: it
runs the plan round, retrieval and any batched sub-answer round, and returns
the messages of the final generation. :class:`~typed_rag.system.TypedRAG` runs
that last call itself, whole or streamed, so the server can stream exactly the
answer. The module's :class:`Pipeline` goes into the type table
(:data:`typed_rag.pipelines.TYPED`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol, TypeVar

from typed_rag import plan_examples
from typed_rag.config import SamplingSettings, Settings
from typed_rag.constraints import Constraints, enforce, named_in, with_instructions
from typed_rag.engines.base import ChatRequest, ChatResult, Engine
from typed_rag.json_reply import PlanError
from typed_rag.messages import Messages
from typed_rag.method_settings import MethodOptions
from typed_rag.progress import Kind, Progress, ProgressSink
from typed_rag.result import CitedPassage, LLMCall, Result
from typed_rag.retrieval import Passage, Reranker, Retriever

log = logging.getLogger(__name__)

P = TypeVar("P")

# Where a question's time goes (``Result.timings``): routing's classification, plan rounds
# (with the follow-up rewrite and constraint detection), retrieval and reranking, the
# sub-answers (generated or extracted), the closed-book draft, the final answer, finishing.
STAGES = (
    "classify",
    "plan",
    "retrieve",
    "rerank",
    "sub_answers",
    "draft",
    "generate",
    "finish",
    "total",
)


@dataclass
class Final:
    """The last generation of a pipeline: its trace step name and messages, or ``text``, an
    answer that needs no generation (over documents, when no passage matched: what the
    model would write there is its memory)."""

    step: str
    messages: Messages
    text: str | None = None


@dataclass
class Context:
    """One question's run: the components, the sampling seed and the trace being built."""

    question: str
    settings: Settings
    engine: Engine
    result: Result
    top_k: int  # passages per query, and seed and sampling: the resolved request's
    seed: int
    retriever: Retriever | None = None
    # "documents" (a user's collection) or "wikipedia": what the retriever searches
    corpus: str = "wikipedia"
    reranker: Reranker | None = None
    sampling: SamplingSettings | None = None  # per-request override of settings.sampling
    # Engine queue priority of this question's calls (1: a short request, it goes first).
    priority: int = 0
    # Include/exclude subtopics detected in the question (``question`` is then its core).
    constraints: Constraints | None = None
    # Progress hook (type, plan, each sub-answer, answer start); None: nobody listens.
    on_event: ProgressSink | None = None
    started: float = field(default_factory=time.perf_counter)
    # The asker's stop strings and output schema: the final generation only.
    stop: list[str] | None = None
    output_schema: dict[str, Any] | None = None
    rounds: int = 0
    _cited: dict[str, CitedPassage] = field(default_factory=dict)

    # --- progress -----------------------------------------------------------------

    def emit(self, kind: Kind, **data: Any) -> None:
        """Tell the listener (if any) that something now exists; never fails the run."""
        if self.on_event is None:
            return
        try:
            self.on_event(Progress(kind, time.perf_counter() - self.started, data))
        except Exception:  # noqa: BLE001 - a broken listener must not break the answer
            log.exception("progress listener failed on a %s event", kind)

    def set_plan(self, trace: dict[str, Any]) -> None:
        """Record the (final) plan in the trace and announce it."""
        self.result.plan.update(trace)
        self.emit("plan", plan=trace)

    # --- timing -------------------------------------------------------------------

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            timings = self.result.timings
            timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - start

    def fallback(self, note: str) -> None:
        """Record a degradation in the trace (never silent) and log it."""
        log.info("fallback for %r: %s", self.question[:80], note)
        self.result.fallbacks.append(note)
        self.emit("fallback", note=note)

    # --- engine -------------------------------------------------------------------

    def request(
        self,
        messages: Messages,
        *,
        plan: bool = False,
        seed_offset: int = 0,
        json_schema: dict[str, Any] | None = None,
        step: str | None = None,
    ) -> ChatRequest:
        """A chat request with the configured sampling and this question's seed.

        Intermediate steps get their own token budget: plans ``plan_max_tokens``,
        ``step="sub-answer"`` / ``"perspective"`` / ``"draft"`` their budgets (never more than
        ``max_tokens``), so the final answer keeps ``max_tokens``.
        """
        s = self.sampling or self.settings.sampling
        if plan:
            max_tokens = s.plan_max_tokens
        elif step == "sub-answer":
            max_tokens = min(s.sub_answer_max_tokens, s.max_tokens)
        elif step == "perspective":
            max_tokens = min(s.perspective_max_tokens, s.max_tokens)
        elif step == "draft":
            max_tokens = min(s.draft_max_tokens, s.max_tokens)
        else:
            max_tokens = s.max_tokens
        return ChatRequest(
            messages=messages,
            temperature=s.temperature,
            top_p=s.top_p,
            max_tokens=max_tokens,
            seed=self.seed + seed_offset,
            json_schema=json_schema,
            priority=self.priority,
        )

    def record(self, step: str, result: ChatResult, ok: bool = True) -> None:
        self.result.calls.append(
            LLMCall(
                step=step,
                round=self.rounds,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                latency_s=result.latency_s,
                ok=ok,
                text=result.text,
            )
        )

    async def generate(
        self,
        step: str,
        requests: Sequence[ChatRequest],
        stage: str,
        on_result: Callable[[int, ChatResult], None] | None = None,
    ) -> list[ChatResult]:
        """One engine round: every request goes to the engine in one batch.

        With ``on_result``, it is called with (index, result) as each request
        completes, so progress can be shown before the whole round is done.
        """
        self.rounds += 1
        with self.timed(stage):
            if on_result is None:
                results = await self.engine.generate(list(requests))
            else:
                done: dict[int, ChatResult] = {}
                async for i, res in self.engine.generate_each(list(requests)):
                    done[i] = res
                    on_result(i, res)
                results = [done[i] for i in range(len(requests))]
        for res in results:
            self.record(step, res)
        return results

    async def plan(
        self,
        step: str,
        messages: Messages,
        schema: dict[str, Any],
        parser: Callable[[str], P],
        trace: dict[str, Any] | None = None,
    ) -> P | None:
        """Ask for a plan under ``schema``; retry with a new seed; None after the last try.

        Each attempt is its own round. The caller records the fallback it takes.
        The plan prompt is told the asker's coverage constraints, if any. Attempts
        (and errors) are recorded in ``trace``, by default ``result.plan``.
        """
        trace = self.result.plan if trace is None else trace
        messages = with_instructions(messages, self.constraints)
        attempts = 1 + max(0, (self.sampling or self.settings.sampling).plan_retries)
        errors: list[str] = []
        for attempt in range(attempts):
            req = self.request(messages, plan=True, seed_offset=attempt, json_schema=schema)
            self.rounds += 1
            with self.timed("plan"):
                (res,) = await self.engine.generate([req])
            try:
                parsed = parser(res.text)
            except PlanError as exc:
                self.record(step, res, ok=False)
                errors.append(str(exc))
                log.debug("plan attempt %d unparseable: %s", attempt + 1, exc)
                continue
            self.record(step, res)
            trace["attempts"] = attempt + 1
            return parsed
        trace["attempts"] = attempts
        trace["errors"] = errors
        return None

    def enforce(self, what: str, items: list[str], add_missing: bool = True) -> list[str]:
        """Plan items after the coverage constraints (see :func:`constraints.enforce`).

        What was dropped or added is recorded under ``result.constraints[what]``.
        """
        if self.constraints is None or self.constraints.empty:
            return items
        done = enforce(items, self.constraints, add_missing)
        if done.dropped or done.added:
            trace = self.result.constraints if self.result.constraints is not None else {}
            trace[what] = {"dropped": done.dropped, "added": done.added}
        return done.items

    def final_request(self, final: Final) -> ChatRequest:
        req = self.request(final.messages, json_schema=self.output_schema)
        return replace(req, stop=list(self.stop)) if self.stop else req

    async def run_final(self, final: Final) -> str:
        self.emit("answer", step=final.step)
        if final.text is not None:
            return final.text
        (res,) = await self.generate(final.step, [self.final_request(final)], stage="generate")
        self.result.finish_reason = "length" if res.finish_reason == "length" else "stop"
        return res.text

    async def stream_final(self, final: Final) -> AsyncIterator[str]:
        """Stream the final generation; records the call when the engine reports it. The first
        item is "" (right after the ``answer`` event), the text deltas follow."""
        self.rounds += 1
        self.emit("answer", step=final.step)
        yield ""  # the caller can pass the event on now, not with the first token
        if final.text is not None:
            yield final.text
            return
        start = time.perf_counter()
        try:
            async for delta in self.engine.stream(self.final_request(final)):
                if delta.text:
                    yield delta.text
                if delta.result is not None:
                    self.record(final.step, delta.result)
                    length = delta.result.finish_reason == "length"
                    self.result.finish_reason = "length" if length else "stop"
        finally:
            timings = self.result.timings
            timings["generate"] = timings.get("generate", 0.0) + time.perf_counter() - start

    # --- retrieval ----------------------------------------------------------------

    async def retrieve(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """Top-``k`` per query, off the event loop (BM25 is CPU-bound).

        With excluded subtopics, twice as many are fetched and the passages that
        name one go last, so they are only used when nothing else was found.
        """
        if self.retriever is None:
            return [[] for _ in queries]
        exclude = self.constraints.exclude if self.constraints else []
        depth = 2 * k if exclude else k
        with self.timed("retrieve"):
            hits = await asyncio.to_thread(self.retriever.search, list(queries), depth)
        floor = getattr(self.retriever, "floor", None)  # every query reranked, with a floor
        for query, ranked in zip(queries, hits, strict=True):
            if floor is not None and not ranked:
                self.fallback(f"retrieval: no passage for {query!r} reaches the floor {floor:g}")
        if not exclude:
            return hits
        out = []
        for ranked in hits:
            named = [bool(named_in(f"{p.title} {p.text}", exclude)) for p in ranked]
            order = sorted(range(len(ranked)), key=lambda i: named[i])  # stable
            out.append([ranked[i] for i in order][:k])
        return out

    async def rerank(self, query: str, passages: Sequence[Passage], k: int) -> list[Passage]:
        """Reranked top-``k``; without a reranker the given order is kept."""
        if self.reranker is None or not passages:
            return list(passages)[:k]
        with self.timed("rerank"):
            return await asyncio.to_thread(self.reranker.rerank, query, list(passages), k)

    def cite(self, passages: Sequence[Passage], query: str | Sequence[str]) -> list[CitedPassage]:
        """Give passages their citation numbers (one per passage id across the question).

        ``query`` is the (sub-)query that retrieved them, or one query per passage. They are
        announced at once (a ``sources`` progress event), before any answer is written.
        """
        queries = [query] * len(passages) if isinstance(query, str) else list(query)
        out: list[CitedPassage] = []
        for p, q in zip(passages, queries, strict=True):
            cited = self._cited.get(p.id)
            if cited is None:
                cited = CitedPassage(
                    citation=len(self._cited) + 1,
                    id=p.id,
                    title=p.title,
                    text=p.text,
                    score=float(p.score),
                    rerank_score=p.rerank_score,
                    query=q,
                    source=p.source,
                    page=p.page,
                    section=p.section,
                )
                self._cited[p.id] = cited
                self.result.passages.append(cited)
            if cited not in out:
                out.append(cited)
        if self.on_event is not None:  # retrieval for this query is over: show its sources
            one = query if isinstance(query, str) else None
            if one is None and len(set(queries)) == 1:
                one = queries[0]
            self.emit("sources", query=one, passages=[p.model_dump() for p in out])
        return out


Prepare = Callable[[Context], Awaitable[Final]]


class Plan(Protocol):
    """What a pipeline's plan model tells the rest of the system."""

    # The title of its JSON schema; the fake engine replies ``example`` to a request
    # under that schema, so tests drive the pipeline down its planned path.
    title: ClassVar[str]
    example: ClassVar[str]

    def to_trace(self) -> dict[str, Any]:
        """The plan as recorded in ``Result.plan``."""
        ...

    @classmethod
    def describe(cls, trace: Mapping[str, Any]) -> list[str]:
        """Lines for people (``typed-rag ask``) about the parts of ``trace`` this plan wrote."""
        ...


@dataclass(frozen=True)
class Pipeline:
    """A route of the type table: how a question is prepared, and the plan model it makes."""

    prepare: Prepare
    plan: type[Plan] | None = None  # None: the route makes no plan (plain RAG, the LLM)
    # The plan prompt for a question: its fixed part (everything before the question)
    # is prefilled at server start so that engines with a prompt cache skip it later.
    plan_prompt: Callable[[str, MethodOptions], Messages] | None = None

    def __post_init__(self) -> None:
        if self.plan is not None:
            plan_examples.register(self.plan.title, self.plan.example)


async def plan_or_fallback(
    ctx: Context,
    label: str,
    messages: Messages,
    schema: dict[str, Any],
    parser: Callable[[str], P],
    what: str = "plan",
) -> P | None:
    """The pipeline's plan; None after recording the fallback, and the caller answers with
    plain RAG. The attempts are :meth:`Context.plan`'s, per-request sampling included."""
    plan = await ctx.plan("plan", messages, schema, parser)
    if plan is None:
        attempts = ctx.result.plan.get("attempts")
        ctx.fallback(f"{label}: {what} unparseable after {attempts} attempts -> rag")
    return plan
