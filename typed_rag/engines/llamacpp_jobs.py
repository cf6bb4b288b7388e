"""The llama.cpp worker thread's plumbing: jobs, their stopping guard, and results handed back.

One thread owns the ``Llama`` object (it is not thread-safe); callers on any event
loop put a :class:`Job` on its queue and await a future the thread settles
through :func:`post`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from typed_rag.cpuinfo import llama_threads

DeltaSink = Callable[[str], None]


@dataclass
class Job:
    """One request on its way through the worker thread."""

    request: Any  # ChatRequest, ChoiceRequest or the engine's PrefillRequest
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    on_delta: DeltaSink | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)


class Guard:
    """Stopping criterion: ends a request once cancelled or at its token limit.

    llama-cpp-python calls it after sampling each token with the ids evaluated
    so far, so ``len(ids) - prompt_len + 1`` is the number of the token just sampled.
    """

    def __init__(
        self,
        cancelled: threading.Event,
        prompt_len: int,
        limit: int,
        pause: Callable[[], None] = lambda: None,
    ) -> None:
        self.cancelled = cancelled
        self.prompt_len = prompt_len
        self.limit = limit
        self.hit_limit = False
        self.pause = pause  # called between tokens: waits while a short request runs

    def __call__(self, ids: Any, _logits: Any) -> bool:
        self.pause()
        if self.cancelled.is_set():
            return True
        if len(ids) - self.prompt_len + 1 > self.limit:
            self.hit_limit = True
            return True
        return False


def post(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn`` on the caller's loop; a loop that has gone away simply gets nothing."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:  # loop closed: its caller is gone
        pass


def resolve(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    """Settle ``future`` with a result or an exception, unless it is already settled."""
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)  # type: ignore[arg-type]


def default_threads() -> int:
    """llama.cpp's threads when ``engine.n_threads`` is unset: this machine's physical cores
    (:func:`typed_rag.cpuinfo.llama_threads`, which ``resolve_settings`` also reads)."""
    return llama_threads()
