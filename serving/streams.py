"""Server-sent events: the streaming response, its end markers, and the pump that feeds it.

An answer stream runs in its own task (:class:`Pump`) so the endpoint can wait for
the next piece with a timeout (keep-alive comments, the request deadline) and
cancel the work under it when the client leaves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

log = logging.getLogger("serving.serving_chat")  # named as before the split

DONE = "data: [DONE]\n\n"
KEEPALIVE = ": keep-alive\n\n"  # an SSE comment; clients (and the openai SDK) skip it


class ClientDisconnected(Exception):
    """The client went away before its answer was ready."""


class SSEResponse(StreamingResponse):
    """A streaming response that always gives its slot back, even if never iterated."""

    def __init__(self, content: AsyncIterator[str], on_close: Callable[[], None]) -> None:
        super().__init__(
            content,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()


async def wait_for_disconnect(request: Request) -> None:
    """Return once the client has closed the connection (the body is already read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


END = object()


class Pump:
    """Runs an async iterator in its own task and hands its items over one at a time."""

    def __init__(self, source: AsyncIterator[Any]) -> None:
        self._source = source
        self._queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize=256)
        self._task = asyncio.ensure_future(self._run())
        self._getter: asyncio.Future[tuple[str, Any]] | None = None

    async def _run(self) -> None:
        try:
            async for item in self._source:
                await self._queue.put(("item", item))
        except Exception as exc:  # noqa: BLE001 - re-raised in the consumer
            await self._queue.put(("error", exc))
            return
        await self._queue.put(("item", END))

    def fail(self, exc: BaseException) -> None:
        """End the stream with ``exc``: the source stops, the consumer raises it next."""
        if not self._task.done():
            self._task.cancel()
        while True:
            try:
                self._queue.put_nowait(("error", exc))
                return
            except asyncio.QueueFull:
                self._queue.get_nowait()  # the stream is ending: drop a queued piece

    async def next(self, timeout: float) -> tuple[bool, Any]:
        """``(True, item)``, or ``(False, None)`` if nothing came within ``timeout``.

        Re-raises what the source raised; ``END`` marks its end.
        """
        if self._getter is None:
            self._getter = asyncio.ensure_future(self._queue.get())
        done, _ = await asyncio.wait({self._getter}, timeout=timeout)
        if not done:
            return False, None
        kind, item = self._getter.result()
        self._getter = None
        if kind == "error":
            raise item
        return True, item

    async def stop(self) -> None:
        """Cancel the source's task (and the engine work under it); close the source."""
        if self._getter is not None:
            self._getter.cancel()
        if not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await aclose(self._source)


async def aclose(stream: AsyncIterator[Any]) -> None:
    close = getattr(stream, "aclose", None)
    if close is None:
        return
    try:
        await close()
    except Exception:  # noqa: BLE001 - the stream already failed or finished
        log.debug("error while closing an answer stream", exc_info=True)
