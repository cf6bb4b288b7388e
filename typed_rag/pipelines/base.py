"""What every pipeline shares: engine rounds, retrieval, citations and the trace.

A pipeline is an async function ``prepare(ctx) -> Final``: it runs the plan
round, retrieval and any batched sub-answer round, and returns the messages of
the final generation. :class:`~typed_rag.system.TypedRAG` runs that last call
itself, whole or streamed, so the server can stream exactly the answer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from typed_rag.config import SamplingSettings, Settings
from typed_rag.constraints import Constraints, enforce, named_in, with_instructions
from typed_rag.engines.base import ChatRequest, ChatResult, Engine
from typed_rag.plans import PlanError
from typed_rag.prompts import Messages
from typed_rag.rerank.base import Reranker
from typed_rag.result import CitedPassage, LLMCall, Result
from typed_rag.retrieval import Passage, Retriever

log = logging.getLogger(__name__)

P = TypeVar("P")

STAGES = ("classify", "plan", "retrieve", "rerank", "sub_answers", "generate", "total")


@dataclass
class Final:
    """The last generation of a pipeline: its trace step name and messages."""

    step: str
    messages: Messages


@dataclass
class Context:
    """One question's run: the components, the sampling seed and the trace being built."""

    question: str
    settings: Settings
    engine: Engine
    result: Result
    retriever: Retriever | None = None
    reranker: Reranker | None = None
    top_k: int = 5
    seed: int = 42
    sampling: SamplingSettings | None = None  # per-request override of settings.sampling
    # Include/exclude subtopics detected in the question (``question`` is then its core).
    constraints: Constraints | None = None
    # The asker's stop strings and output schema: the final generation only.
    stop: list[str] | None = None
    output_schema: dict[str, Any] | None = None
    rounds: int = 0
    _cited: dict[str, CitedPassage] = field(default_factory=dict)

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

    # --- engine -------------------------------------------------------------------

    def request(
        self,
        messages: Messages,
        *,
        plan: bool = False,
        seed_offset: int = 0,
        json_schema: dict[str, Any] | None = None,
    ) -> ChatRequest:
        """A chat request with the configured sampling and this question's seed."""
        s = self.sampling or self.settings.sampling
        return ChatRequest(
            messages=messages,
            temperature=s.temperature,
            top_p=s.top_p,
            max_tokens=s.plan_max_tokens if plan else s.max_tokens,
            seed=self.seed + seed_offset,
            json_schema=json_schema,
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
            )
        )

    async def generate(
        self, step: str, requests: Sequence[ChatRequest], stage: str
    ) -> list[ChatResult]:
        """One engine round: every request goes to the engine in one batch."""
        self.rounds += 1
        with self.timed(stage):
            results = await self.engine.generate(list(requests))
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
        (res,) = await self.generate(final.step, [self.final_request(final)], stage="generate")
        self.result.finish_reason = "length" if res.finish_reason == "length" else "stop"
        return res.text

    async def stream_final(self, final: Final) -> AsyncIterator[str]:
        """Stream the final generation; records the call when the engine reports it."""
        self.rounds += 1
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

        ``query`` is the (sub-)query that retrieved them, or one query per passage.
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
                )
                self._cited[p.id] = cited
                self.result.passages.append(cited)
            if cited not in out:
                out.append(cited)
        return out
