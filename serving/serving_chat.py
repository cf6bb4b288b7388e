"""``/v1/chat/completions``: validate, wait for a slot, answer (whole or streamed), account.

Every request runs as a task that is cancelled when its client disconnects
or its time (``server.request_timeout_s``, queue wait included) runs out;
cancelling it cancels the engine work under it. A streamed request gets its
headers and first chunk at once, then ``queued`` progress chunks (its place in the
queue) and keep-alive comments until it runs. Failures become OpenAI error
objects: a status code before the response starts, an in-band
``data: {"error": ...}`` event (followed by ``data: [DONE]``) once a stream
has begun.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from serving import errors
from serving.admission import Admission, Slot
from serving.chat_request import resolve_chat
from serving.errors import APIError
from serving.metrics import ServerMetrics
from serving.protocol import ChatCompletionRequest
from serving.responses import (
    AssistantMessage,
    ChatCompletionChunk,
    ChatCompletionResponse,
    Choice,
    DeltaMessage,
    ProgressEvent,
    StreamChoice,
    TypedRAGInfo,
    completion_id,
    usage_of,
)
from serving.state import ServerState
from serving.streams import (
    DONE,
    END,
    KEEPALIVE,
    ClientDisconnected,
    Pump,
    SSEResponse,
    wait_for_disconnect,
)
from serving.validation import check_model
from typed_rag.engines.base import EngineError
from typed_rag.progress import Progress
from typed_rag.request import Resolved
from typed_rag.result import Result

log = logging.getLogger(__name__)

T = TypeVar("T")

QUEUE_POLL_S = 0.25  # how often a queued stream looks at its place in the queue


def shutting_down() -> APIError:
    return APIError(
        503,
        "the server is shutting down; retry the request",
        type="service_unavailable_error",
        code="server_shutting_down",
    )


CLIENT_CLOSED = 499  # nginx's status for "client closed the request"; only seen in metrics/logs


class OpenAIServingChat:
    """The work behind the chat endpoint; its router (:mod:`serving.routes.chat`) only calls it."""

    def __init__(self, state: ServerState, admission: Admission, metrics: ServerMetrics) -> None:
        self.state = state
        self.admission = admission
        self.metrics = metrics
        self.server = state.settings.server
        self.paths = state.paths  # no server path reaches a client
        self._streams: set[Pump] = set()
        self._closing = False

    def drain(self) -> None:
        """The server is stopping (SIGTERM): end every open stream with an in-band
        error event and ``[DONE]``, so clients see why their answer stopped."""
        self._closing = True  # streams still queued end at their next look at the queue
        for pump in list(self._streams):
            pump.fail(shutting_down())

    # -- the endpoint ----------------------------------------------------

    async def create(self, req: ChatCompletionRequest, raw: Request) -> Response:
        """Answer ``req``, validated by FastAPI; ``raw`` is watched for the client leaving."""
        started = time.perf_counter()
        mode = "unknown"
        try:
            check_model(req)
            mode = req.model
            request = resolve_chat(req, self.state.settings)
            if not self.state.ready:
                raise errors.overloaded(
                    f"the model is not ready (status: {self.state.describe()['status']}); "
                    "retry later",
                    status=503,
                    retry_after_s=5,
                )
            slot = self.admission.reserve(short=request.short)
        except APIError as exc:
            self.metrics.observe_error(mode, exc.status, exc.code)
            return self._for_client(exc).response()

        deadline = asyncio.get_running_loop().time() + self.server.request_timeout_s
        request_id = completion_id()
        if req.stream:
            events = self._stream_events(req, request, slot, deadline, request_id, started)
            return SSEResponse(events, on_close=slot.release)
        try:
            result = await self._guarded(raw, slot, deadline, lambda: self._answer(request))
        except ClientDisconnected:
            self._count_cancel(request_id, mode)
            return Response(status_code=CLIENT_CLOSED)
        except APIError as exc:
            self.metrics.observe_error(mode, exc.status, exc.code)
            return self._for_client(exc, request.asked.collection).response()
        except Exception as exc:  # noqa: BLE001 - turned into an OpenAI 500 below
            err = self._internal(exc, request_id, mode, request.question)
            self.metrics.observe_error(mode, err.status, err.code)
            return err.response()
        finally:
            slot.release()

        latency = time.perf_counter() - started
        response = ChatCompletionResponse(
            id=request_id,
            model=req.model,
            choices=[
                Choice(
                    message=AssistantMessage(content=result.answer),
                    finish_reason=result.finish_reason,
                )
            ],
            usage=usage_of(result),
            typed_rag=self._info(req, result, latency),
        )
        self._count_done(req.model, result, latency)
        scrub = self.paths.for_collection(request.asked.collection)
        return JSONResponse(scrub.walk(response.model_dump(mode="json", exclude_none=True)))

    # -- running under a slot, a deadline and the client's presence -------

    async def _guarded(
        self, raw: Request, slot: Slot, deadline: float, work: Callable[[], Awaitable[T]]
    ) -> T:
        """Wait for the slot, then run ``work``; cancel it on disconnect or deadline."""

        async def job() -> T:
            await slot.acquire()
            return await work()

        task = asyncio.ensure_future(job())
        watcher = asyncio.ensure_future(wait_for_disconnect(raw))
        loop = asyncio.get_running_loop()
        try:
            done, _ = await asyncio.wait(
                {task, watcher},
                timeout=max(0.0, deadline - loop.time()),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            watcher.cancel()
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if task in done:
            return task.result()
        if watcher in done:
            raise ClientDisconnected
        raise errors.timeout(self.server.request_timeout_s)

    async def _answer(self, request: Resolved) -> Result:
        try:
            return await self.state.rag.answer(request)
        except Exception as exc:
            err = errors.from_core(exc)
            if err is None:
                raise
            raise err from None

    # -- streaming ------------------------------------------------------------

    async def _queued(
        self, slot: Slot, deadline: float, started: float, progress: bool
    ) -> AsyncIterator[ProgressEvent | None]:
        """While ``slot`` waits: a ``queued`` event each time its place changes (with
        ``progress``), None when a keep-alive comment is due; a 504 at the deadline."""
        loop = asyncio.get_running_loop()
        shown, quiet_since = 0, loop.time()
        while place := slot.position:
            if self._closing:
                raise shutting_down()
            if progress and place != shown:
                shown, quiet_since = place, loop.time()
                elapsed = time.perf_counter() - started
                yield ProgressEvent(event="queued", elapsed_s=round(elapsed, 3), position=place)
            elif loop.time() - quiet_since >= self.server.sse_keepalive_s:
                quiet_since = loop.time()
                yield None
            if await slot.wait(min(QUEUE_POLL_S, max(0.0, deadline - loop.time()))):
                return
            if loop.time() >= deadline:
                raise errors.timeout(self.server.request_timeout_s)

    async def _stream_events(
        self,
        req: ChatCompletionRequest,
        request: Resolved,
        slot: Slot,
        deadline: float,
        request_id: str,
        started: float,
    ) -> AsyncIterator[str]:
        created = int(time.time())
        scrub = self.paths.for_collection(request.asked.collection)

        def chunk(delta: DeltaMessage, **extra: Any) -> str:
            return ChatCompletionChunk(
                id=request_id,
                created=created,
                model=req.model,
                choices=[StreamChoice(delta=delta, finish_reason=extra.pop("finish", None))],
                **extra,
            ).sse()

        yield chunk(DeltaMessage(role="assistant", content=""))  # headers and a first event now
        try:
            async for waiting in self._queued(slot, deadline, started, req.progress_events):
                if waiting is None:
                    yield KEEPALIVE
                else:
                    yield chunk(DeltaMessage(content=""), typed_rag=waiting)
        except asyncio.CancelledError:
            self._count_cancel(request_id, req.model)  # the client left while queued
            raise
        except APIError as exc:
            self.metrics.observe_error(req.model, exc.status, exc.code)
            yield self._for_client(exc, request.asked.collection).sse()
            yield DONE
            return
        # One task drives the whole answer stream (engine generators stay in
        # one task); this generator only forwards its events, so it can send
        # keep-alive comments while a long plan round runs and stop the work
        # at the deadline or when the client leaves.
        stream = self.state.rag.answer_stream(request, progress=req.progress_events)
        pump = Pump(stream)
        self._streams.add(pump)
        if self._closing:  # it left the queue after the drain began
            pump.fail(shutting_down())
        loop = asyncio.get_running_loop()
        result: Result | None = None
        error: APIError | None = None
        first_token = True
        try:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise errors.timeout(self.server.request_timeout_s)
                got, event = await pump.next(min(self.server.sse_keepalive_s, remaining))
                if not got:
                    if loop.time() < deadline:
                        yield KEEPALIVE
                    continue
                if event is END:
                    break
                if isinstance(event, Result):
                    result = event
                elif isinstance(event, Progress):
                    # Empty content, so OpenAI clients that only read delta.content skip it.
                    progress = ProgressEvent.model_validate(scrub.walk(event.to_dict()))
                    yield chunk(DeltaMessage(content=""), typed_rag=progress)
                elif event:
                    if first_token:
                        first_token = False
                        self.metrics.first_token.observe(time.perf_counter() - started)
                    yield chunk(DeltaMessage(content=event))
            if result is None:
                raise RuntimeError("answer_stream ended without yielding a Result")
            latency = time.perf_counter() - started
            yield chunk(
                DeltaMessage(),
                finish=result.finish_reason,
                usage=usage_of(result),
                typed_rag=TypedRAGInfo.model_validate(
                    scrub.walk(self._info(req, result, latency).model_dump(mode="json"))
                ),
            )
            self._count_done(req.model, result, latency)
        except asyncio.CancelledError:
            # The client went away (Starlette cancels the response) or the server stops.
            self._count_cancel(request_id, req.model)
            raise
        except APIError as exc:
            error = exc
        except Exception as exc:  # noqa: BLE001 - sent in-band as an OpenAI error
            error = errors.from_core(exc) or self._internal(
                exc, request_id, req.model, request.question
            )
        finally:
            self._streams.discard(pump)
            await pump.stop()
        if error is not None:
            self.metrics.observe_error(req.model, error.status, error.code)
            yield self._for_client(error, request.asked.collection).sse()
        yield DONE

    def _for_client(self, error: APIError, collection: str | None = None) -> APIError:
        """``error`` as the client may read it: its message may quote an exception that
        names a server path (a missing index, a model file); the log keeps the original."""
        error.message = self.paths.message(error.message, self.paths.for_collection(collection))
        return error

    # -- accounting -------------------------------------------------------

    def _info(self, req: ChatCompletionRequest, result: Result, latency: float) -> TypedRAGInfo:
        pipeline = result.timings.get("total")
        server_timings = {"total": round(latency, 6)}
        if pipeline is not None:
            server_timings["overhead"] = round(max(0.0, latency - pipeline), 6)
        return TypedRAGInfo.from_result(
            result,
            include_trace=req.include_trace,
            server_timings=server_timings,
            ignored_params=req.ignored_params(),
        )

    def _count_done(self, mode: str, result: Result, latency: float) -> None:
        self.metrics.observe_done(
            mode,
            200,
            question_type=result.type,
            latency_s=latency,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
        )
        log.info(
            "chat mode=%s type=%s rounds=%d tokens=%d/%d latency=%.3fs",
            mode,
            result.type,
            result.rounds,
            result.prompt_tokens,
            result.completion_tokens,
            latency,
        )

    def _count_cancel(self, request_id: str, mode: str) -> None:
        self.metrics.cancelled.inc()
        self.metrics.requests.labels(mode=mode, status=str(CLIENT_CLOSED)).inc()
        log.info("chat %s cancelled: client disconnected", request_id)

    def _internal(self, exc: Exception, request_id: str, mode: str, question: str) -> APIError:
        log.error(
            "chat %s failed (mode=%s, question=%r)",
            request_id,
            mode,
            question[:200],
            exc_info=exc,
        )
        if isinstance(exc, EngineError) or not self.state.engine_healthy():
            return errors.engine_failed()
        return errors.internal()
