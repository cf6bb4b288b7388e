"""A scripted fake engine for tests of control flow (as DSPy tests do): no model, real interface.

``responder(request) -> str`` decides each reply; every batch is recorded so
tests can assert how many rounds were made and what went in each.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

from typed_rag.engines.base import (
    ChatRequest,
    ChatResult,
    ChoiceRequest,
    ChoiceResult,
    Engine,
    StreamDelta,
)
from typed_rag.plan_examples import example_for, examples

Responder = Callable[[ChatRequest], str]
# Probabilities (need not sum to 1: the rest of the vocabulary) per choice of a request.
Chooser = Callable[[ChoiceRequest], Mapping[str, float]]


def valid_plan(title: str) -> str:
    """The example reply for a plan schema title (``{}`` for unknown ones): whoever defines
    a plan schema registers one (:mod:`typed_rag.plan_examples`), so the fake engine drives
    every typed pipeline down its planned path, a pipeline registered in a test included."""
    return example_for(title)


def valid_plans() -> dict[str, str]:
    """The registered plan examples, by schema title."""
    return examples()


def echo_responder(request: ChatRequest) -> str:
    """Default: a valid plan for a known plan schema (``{}`` for others), else an answer citing [1]."""
    if request.json_schema is not None:
        return valid_plan(str(request.json_schema.get("title")))
    return "A fake answer [1]."


def scripted_responder(
    plans: Mapping[str, str | Sequence[str]] | None = None,
    answer: str | Callable[[ChatRequest], str] = "A fake answer [1].",
) -> Responder:
    """Reply to plan requests by schema title, and to all others with ``answer``.

    A list of plan replies is consumed one per call (the last one repeats), so
    tests can script "malformed, malformed, valid". Titles not in ``plans``
    get :func:`valid_plan`.
    """
    queues = {k: [v] if isinstance(v, str) else list(v) for k, v in (plans or {}).items()}

    def respond(request: ChatRequest) -> str:
        if request.json_schema is not None:
            title = str(request.json_schema.get("title"))
            queue = queues.get(title)
            if not queue:
                return valid_plan(title)
            return queue.pop(0) if len(queue) > 1 else queue[0]
        return answer(request) if callable(answer) else answer

    return respond


class FakeEngine(Engine):
    name = "fake"
    scores_choices = True

    def __init__(
        self,
        responder: Responder = echo_responder,
        delay_s: float = 0.0,
        chooser: Chooser | None = None,
    ) -> None:
        self.model = "fake"
        self.responder = responder
        self.chooser = chooser
        self.delay_s = delay_s
        self.batches: list[list[ChatRequest]] = []
        self.choice_calls: list[ChoiceRequest] = []

    @property
    def calls(self) -> list[ChatRequest]:
        return [r for batch in self.batches for r in batch]

    async def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        self.batches.append(list(requests))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        out = []
        for req in requests:
            text = self.responder(req)
            prompt_tokens = sum(len(m["content"].split()) for m in req.messages)
            out.append(
                ChatResult(
                    text=text,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=len(text.split()),
                    latency_s=self.delay_s,
                )
            )
        return out

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceResult]:
        """Log of the chooser's probabilities; without a chooser, the choice that the responder's
        text reply continues its prefix with (certain), else uniform."""
        self.choice_calls.extend(requests)
        out = []
        for req in requests:
            probs = self.chooser(req) if self.chooser else self._from_responder(req)
            logprobs = {
                c: math.log(probs[c]) if probs.get(c, 0.0) > 0 else -math.inf for c in req.choices
            }
            out.append(ChoiceResult(logprobs=logprobs, prompt_tokens=len(req.prefix.split())))
        return out

    def _from_responder(self, req: ChoiceRequest) -> dict[str, float]:
        text = self.responder(ChatRequest(messages=req.messages))
        for choice in req.choices:
            if req.prefix + choice in text:
                return {choice: 1.0}
        return dict.fromkeys(req.choices, 1 / len(req.choices))

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        (result,) = await self.generate([request])
        words = result.text.split(" ")
        for i, word in enumerate(words):
            yield StreamDelta(text=word if i == 0 else " " + word)
            await asyncio.sleep(0)
        yield StreamDelta(text="", result=result)
