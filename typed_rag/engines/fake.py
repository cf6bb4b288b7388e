"""A scripted fake engine for tests of control flow (as DSPy tests do): no model, real interface.

``responder(request) -> str`` decides each reply; every batch is recorded so
tests can assert how many rounds were made and what went in each.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence

from typed_rag.engines.base import ChatRequest, ChatResult, Engine, StreamDelta

Responder = Callable[[ChatRequest], str]


def echo_responder(request: ChatRequest) -> str:
    """Default: valid JSON ``{}`` for schema requests, otherwise a short answer citing [1]."""
    if request.json_schema is not None:
        return "{}"
    return "A fake answer [1]."


class FakeEngine(Engine):
    name = "fake"

    def __init__(self, responder: Responder = echo_responder, delay_s: float = 0.0) -> None:
        self.model = "fake"
        self.responder = responder
        self.delay_s = delay_s
        self.batches: list[list[ChatRequest]] = []

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

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        (result,) = await self.generate([request])
        words = result.text.split(" ")
        for i, word in enumerate(words):
            yield StreamDelta(text=word if i == 0 else " " + word)
            await asyncio.sleep(0)
        yield StreamDelta(text="", result=result)
