"""Engine rounds: every generation of one question, its token budget, seed and record.

One :class:`Rounds` per question sends each batch of requests to the engine as one
round, counts the rounds, records every call in the trace, and gives each step its
token budget, so that the final answer keeps ``max_tokens`` whatever the steps before
it asked for.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from typed_rag.config import SamplingSettings
from typed_rag.constraints import Constraints, with_instructions
from typed_rag.engines.base import ChatRequest, ChatResult, ChoiceRequest, ChoiceResult, Engine
from typed_rag.json_reply import PlanError
from typed_rag.messages import Messages
from typed_rag.pipelines.trace import Trace
from typed_rag.result import LLMCall

log = logging.getLogger(__name__)

P = TypeVar("P")


@dataclass
class Final:
    """The last generation of a pipeline: its trace step name and messages, or ``text``, an
    answer that needs no generation (over documents, when no passage matched: what the
    model would write there is its memory)."""

    step: str
    messages: Messages
    text: str | None = None


@dataclass
class Rounds:
    """The engine calls of one question: ``sampling`` is the resolved request's (its own
    override, else the settings'), ``priority`` its engine queue priority (1: a short
    request, it goes first); ``stop`` and ``output_schema`` are the asker's, for the final
    generation only. ``done`` counts the rounds so far (each call records its round)."""

    engine: Engine
    sampling: SamplingSettings
    seed: int
    trace: Trace
    priority: int = 0
    stop: list[str] | None = None
    output_schema: dict[str, Any] | None = None
    done: int = 0

    def budget(self, plan: bool = False, step: str | None = None) -> int:
        """The step's ``max_tokens``: plans ``plan_max_tokens``; ``"sub-answer"`` and
        ``"perspective"`` ``sub_answer_max_tokens``, ``"draft"`` its own budget, never more
        than ``max_tokens``; anything else (the final answer) ``max_tokens``."""
        s = self.sampling
        if plan:
            return s.plan_max_tokens
        if step in ("sub-answer", "perspective"):
            return min(s.sub_answer_max_tokens, s.max_tokens)
        if step == "draft":
            return min(s.draft_max_tokens, s.max_tokens)
        return s.max_tokens

    def request(
        self,
        messages: Messages,
        *,
        plan: bool = False,
        seed_offset: int = 0,
        json_schema: dict[str, Any] | None = None,
        step: str | None = None,
    ) -> ChatRequest:
        """A chat request with the sampling, this question's seed and the step's budget."""
        s = self.sampling
        return ChatRequest(
            messages=messages,
            temperature=s.temperature,
            top_p=s.top_p,
            max_tokens=self.budget(plan, step),
            seed=self.seed + seed_offset,
            json_schema=json_schema,
            priority=self.priority,
        )

    def record(self, step: str, result: ChatResult | ChoiceResult, ok: bool = True) -> None:
        """One call in ``result.calls``, with the round it belongs to (a verdict, a
        :class:`ChoiceResult`, generates no text)."""
        chat = isinstance(result, ChatResult)
        self.trace.result.calls.append(
            LLMCall(
                step=step,
                round=self.done,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens if chat else 0,
                latency_s=result.latency_s,
                ok=ok,
                text=result.text if chat else "",
            )
        )

    async def score(self, step: str, requests: Sequence[ChoiceRequest]) -> list[ChoiceResult]:
        """One engine round of one-token verdicts (no text), each recorded as a call of
        ``step`` and timed as that stage."""
        self.done += 1
        with self.trace.timed(step):
            results = await self.engine.score_choices(list(requests))
        for res in results:
            self.record(step, res)
        return results

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
        self.done += 1
        with self.trace.timed(stage):
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
        constraints: Constraints | None = None,
    ) -> P | None:
        """Ask for a plan under ``schema``; retry with a new seed; None after the last try.

        Each attempt is its own round. The caller records the fallback it takes.
        The plan prompt is told the asker's coverage ``constraints``, if any. Attempts
        (and errors) are recorded in ``trace``, by default ``result.plan``.
        """
        trace = self.trace.result.plan if trace is None else trace
        messages = with_instructions(messages, constraints)
        attempts = 1 + max(0, self.sampling.plan_retries)
        errors: list[str] = []
        for attempt in range(attempts):
            req = self.request(messages, plan=True, seed_offset=attempt, json_schema=schema)
            self.done += 1
            with self.trace.timed("plan"):
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

    def final_request(self, final: Final) -> ChatRequest:
        """The final generation's request: the answer's budget, the asker's stop strings
        and output schema."""
        req = self.request(final.messages, json_schema=self.output_schema)
        return replace(req, stop=list(self.stop)) if self.stop else req

    async def run_final(self, final: Final) -> str:
        """The final answer, whole (``final.text`` when it needs no generation)."""
        self.trace.emit("answer", step=final.step)
        if final.text is not None:
            return final.text
        (res,) = await self.generate(final.step, [self.final_request(final)], stage="generate")
        self.trace.result.finish_reason = "length" if res.finish_reason == "length" else "stop"
        return res.text

    async def stream_final(self, final: Final) -> AsyncIterator[str]:
        """Stream the final generation; records the call when the engine reports it. The first
        item is "" (right after the ``answer`` event), the text deltas follow."""
        self.done += 1
        self.trace.emit("answer", step=final.step)
        yield ""  # the caller can pass the event on now, not with the first token
        if final.text is not None:
            yield final.text
            return
        with self.trace.timed("generate"):
            async for delta in self.engine.stream(self.final_request(final)):
                if delta.text:
                    yield delta.text
                if delta.result is not None:
                    self.record(final.step, delta.result)
                    length = delta.result.finish_reason == "length"
                    self.trace.result.finish_reason = "length" if length else "stop"
