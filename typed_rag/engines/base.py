"""The one engine interface every pipeline talks to.

An engine takes a *batch* of chat requests and returns one result per request,
so that the independent calls of a question (sub-answers, perspectives) reach
the backend together. Chat templates are always applied by the backend; callers
pass messages, never raw prompt strings.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


class EngineError(RuntimeError):
    """A backend failed in a way the caller should report (not a user error)."""


class ContextLengthError(EngineError):
    """A prompt longer than the model's context: the request's fault (the server says 400)."""


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion request. ``json_schema`` constrains the output to JSON."""

    messages: list[dict[str, str]]
    temperature: float = 0.8
    top_p: float = 0.95
    max_tokens: int = 512
    seed: int | None = None
    stop: list[str] | None = None
    json_schema: dict[str, Any] | None = None
    # A short request is 1: engines that queue requests run it first, and llama.cpp in its
    # short lane beside a long call, so it never waits behind long ones; the text is the same.
    priority: int = 0


@dataclass
class ChatResult:
    """A finished completion with its cost."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str = "stop"


@dataclass(frozen=True)
class ChoiceRequest:
    """Score continuations of a chat: the reply starts with ``prefix``, then a choice.

    A judge that must answer ``[[k]]`` is asked for the probability of each
    ``k`` after the prefix ``[[`` instead of sampling one verdict: one forward
    pass, no output that can be cut off or fail to parse, and a distribution
    from which an expected rank follows. The prefix and each choice are tokenized
    on their own; llama.cpp takes one-token choices only, vLLM any (the sum of the
    choice's token logprobs).
    """

    messages: list[dict[str, str]]
    prefix: str
    choices: tuple[str, ...]


@dataclass
class ChoiceResult:
    """Log-probabilities of each choice (over the whole vocabulary) and what it cost."""

    logprobs: dict[str, float]
    prompt_tokens: int = 0
    latency_s: float = 0.0


@dataclass
class StreamDelta:
    """A piece of a streamed completion; the last one has ``result`` set."""

    text: str
    result: ChatResult | None = field(default=None)


class Engine(abc.ABC):
    """An LLM backend. Implementations must be safe to call from many tasks at once.

    Cancelling the awaiting task (client went away) must stop the work for it.
    """

    name: str = "engine"
    model: str = ""
    # Whether score_choices works (next-token probabilities): commands that read them check
    # this before they build anything (engines.factory.backend_scores_choices).
    scores_choices: bool = False

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Load the model; called once before the first request."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release the model and any worker processes."""

    def healthy(self) -> bool:
        """False once the backend has died; the server reports 503 then."""
        return True

    async def prefill(self, messages: list[dict[str, str]]) -> None:  # noqa: B027 - optional
        """Evaluate a prompt without generating, so a prompt cache holds its prefix."""

    @abc.abstractmethod
    async def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        """Run a batch of requests together; results are in request order."""

    async def generate_each(
        self, requests: Sequence[ChatRequest]
    ) -> AsyncIterator[tuple[int, ChatResult]]:
        """Run a batch like :meth:`generate`, yielding ``(index, result)`` as each completes.

        Lets a caller show a sub-answer before the whole round is done. Default:
        the whole batch, then its results in order.
        """
        for i, result in enumerate(await self.generate(requests)):
            yield i, result

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceResult]:
        """Next-token log-probabilities of each request's choices (judges with a distribution).

        Backends that do not expose token probabilities (``scores_choices`` False) raise
        :class:`EngineError`.
        """
        raise EngineError(
            f"the {self.name} engine (engine.backend={self.name}) cannot score choices "
            "(no token probabilities); use engine.backend=llamacpp or vllm, "
            "or a judge protocol that samples a verdict"
        )

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        """Stream one completion. Default: generate, then yield it whole."""
        (result,) = await self.generate([request])
        yield StreamDelta(text=result.text)
        yield StreamDelta(text="", result=result)

    async def __aenter__(self) -> Engine:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class PerRequestEngine(Engine):
    """A backend that serves one request per call (vLLM's async engine, an HTTP server):
    a batch is its requests submitted together, each cancellable on its own."""

    @abc.abstractmethod
    async def _one(self, req: ChatRequest) -> ChatResult:
        """Run one request to completion."""

    async def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        await self.start()
        # cancelling a request closes its connection / aborts it in the engine
        return await gather_or_cancel([self._one(req) for req in requests])

    async def generate_each(
        self, requests: Sequence[ChatRequest]
    ) -> AsyncIterator[tuple[int, ChatResult]]:
        await self.start()
        async for item in each_or_cancel([self._one(req) for req in requests]):
            yield item


async def gather_or_cancel(calls: Sequence[Awaitable[T]]) -> list[T]:
    """Run concurrent calls; if one fails or the caller is cancelled, cancel and reap the rest.

    Backends that take one request per call (vLLM, HTTP) use it so a batch is
    submitted together and a departed client stops all of its work.
    """
    tasks = [asyncio.ensure_future(c) for c in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def each_or_cancel(calls: Sequence[Awaitable[T]]) -> AsyncIterator[tuple[int, T]]:
    """Like :func:`gather_or_cancel`, but yield ``(index, result)`` as each call completes.

    If one fails, the consumer is cancelled, or it closes the generator early
    (``contextlib.aclosing``), the rest are cancelled and reaped.
    """
    tasks = [asyncio.ensure_future(c) for c in calls]
    index = {task: i for i, task in enumerate(tasks)}
    pending: set[asyncio.Future[T]] = set(tasks)
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=index.__getitem__):
                yield index[task], task.result()
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
