"""``/v1/chat/completions``: validate, wait for a slot, answer (whole or streamed), account.

Every request runs as a task that is cancelled when its client disconnects
or its time (``server.request_timeout_s``, queue wait included) runs out;
cancelling it cancels the engine work under it. Failures become OpenAI
error objects: a status code before the response starts, an in-band
``data: {"error": ...}`` event (followed by ``data: [DONE]``) once a stream
has begun.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import ValidationError
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from serving import errors
from serving.admission import Admission, Slot
from serving.bodies import (
    CHARS_PER_TOKEN,
    PASSAGE_TOKENS,
    PROMPT_TOKENS,
    check_output_schema,
    check_unicode,
    context_window,
    decode_json,
    window_setting,
)
from serving.errors import APIError
from serving.metrics import ServerMetrics
from serving.protocol import (
    FIELD_POLICY,
    MODES,
    AssistantMessage,
    ChatCompletionChunk,
    ChatCompletionRequest,
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
from typed_rag.conversation import ChatOptions, Turn
from typed_rag.engines.base import ContextLengthError, EngineError
from typed_rag.errors import UserError
from typed_rag.progress import Progress
from typed_rag.result import Result

log = logging.getLogger(__name__)

T = TypeVar("T")

CLIENT_CLOSED = 499  # nginx's status for "client closed the request"; only seen in metrics/logs
DONE = "data: [DONE]\n\n"
KEEPALIVE = ": keep-alive\n\n"  # an SSE comment; clients (and the openai SDK) skip it
SYSTEM_ROLES = ("system", "developer")


@dataclass(frozen=True)
class Prepared:
    """A validated request's question, what the chat adds, and the fitted ``top_k``."""

    question: str
    chat: ChatOptions
    top_k: int | None
    notes: list[str]


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


async def _wait_for_disconnect(request: Request) -> None:
    """Return once the client has closed the connection (the body is already read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


class OpenAIServingChat:
    """The work behind the chat endpoint; the router in :mod:`serving.app` only calls it."""

    def __init__(self, state: ServerState, admission: Admission, metrics: ServerMetrics) -> None:
        self.state = state
        self.admission = admission
        self.metrics = metrics
        self.server = state.settings.server
        self._streams: set[_Pump] = set()

    def drain(self) -> None:
        """The server is stopping (SIGTERM): end every open stream with an in-band
        error event and ``[DONE]``, so clients see why their answer stopped."""
        for pump in list(self._streams):
            pump.fail(
                APIError(
                    503,
                    "the server is shutting down; retry the request",
                    type="service_unavailable_error",
                    code="server_shutting_down",
                )
            )

    # -- request parsing -------------------------------------------------

    async def parse(self, raw: Request) -> ChatCompletionRequest:
        """The validated request, or an :class:`APIError` (400/413) naming what is wrong.

        The body's size and nesting depth are checked before it is decoded, and
        strings must be valid Unicode (no unpaired surrogates), so no body can
        reach the decoder's recursion limit or the tokenizer's encoding.
        """
        content_type = raw.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "application/json":
            raise errors.bad_request(
                f"expected Content-Type: application/json, got {content_type or 'none'!r}",
                code="invalid_content_type",
            )
        body = await self._read_body(raw)
        data = decode_json(body, self.server.max_json_depth)
        if not isinstance(data, dict):
            raise errors.bad_request("request body must be a JSON object", code="invalid_json")
        check_unicode(data)
        try:
            req = ChatCompletionRequest.model_validate(data)
        except ValidationError as exc:
            raise _from_validation(exc) from None
        if req.model not in MODES:
            raise errors.bad_request(
                f"unknown model {req.model!r}; this server offers: {', '.join(MODES)}",
                param="model",
                code="model_not_found",
            )
        check_output_schema(req.output_schema())
        return req

    async def _read_body(self, raw: Request) -> bytes:
        """The body, refusing (413) anything over ``server.max_body_bytes`` before holding it."""
        limit = self.server.max_body_bytes
        too_large = APIError(
            413,
            f"request body exceeds {limit} bytes (server.max_body_bytes)",
            code="request_too_large",
        )
        declared = raw.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise too_large
        chunks: list[bytes] = []
        size = 0
        try:
            async for part in raw.stream():
                size += len(part)
                if size > limit:
                    raise too_large
                chunks.append(part)
        except ClientDisconnect:
            raise errors.bad_request(
                "the client disconnected before sending the whole body", code="incomplete_body"
            ) from None
        return b"".join(chunks)

    def question_of(self, req: ChatCompletionRequest) -> Prepared:
        """The last user message (the question) and what the rest of the request adds.

        Earlier user/assistant turns become the conversation a follow-up is
        rewritten from; system and developer messages instruct the final answer.
        Each user or system message may have ``server.max_input_chars`` characters
        (the OpenAPI schema says so too); blank user messages fail validation.
        """
        limit = self.server.max_input_chars
        for i, m in enumerate(req.messages):
            size = len(m.text())
            if m.role in ("user", *SYSTEM_ROLES) and size > limit:
                raise errors.bad_request(
                    f"messages[{i}] ({m.role}) has {size} characters; this server accepts "
                    f"at most {limit} per message (server.max_input_chars)",
                    param=f"messages.{i}.content",
                    code="input_too_long",
                )
        users = [i for i, m in enumerate(req.messages) if m.role == "user"]
        if not users:
            raise errors.bad_request(
                "'messages' has no message with role 'user' to answer", param="messages"
            )
        last = users[-1]
        question = req.messages[last].text().strip()
        system = "\n\n".join(
            text for m in req.messages if m.role in SYSTEM_ROLES and (text := m.text().strip())
        )
        history = [
            Turn(role=m.role, text=m.text())
            for m in req.messages[:last]
            if m.role not in SYSTEM_ROLES and m.text().strip()
        ]
        chat = ChatOptions(
            history=history,
            system=system,
            stop=req.stop_strings(),
            json_schema=req.output_schema(),
        )
        top_k, notes = self._fit_context(req, question, system)
        return Prepared(question=question, chat=chat, top_k=top_k, notes=notes)

    def _fit_context(
        self, req: ChatCompletionRequest, question: str, system: str
    ) -> tuple[int | None, list[str]]:
        """``top_k`` lowered so the final prompt fits the model's context, before any engine call.

        An estimate: passages of at most :data:`PASSAGE_TOKENS` tokens, the question
        and system text, the prompt's own instructions, and the answer's tokens
        (up to half the window; the engine stops an answer at the window's end).
        A lowered ``top_k`` is reported in ``typed_rag.fallbacks``; a request
        whose text alone leaves no room is a 400 naming the limit.
        """
        window = context_window(self.state.settings)
        if window is None or req.model == "llm":
            return req.top_k, []
        settings = self.state.settings
        answer = req.max_completion_tokens or req.max_tokens or settings.sampling.max_tokens
        reserve = min(answer, window // 2)
        fixed = PROMPT_TOKENS + (len(question) + len(system)) // CHARS_PER_TOKEN
        fits = (window - reserve - fixed) // PASSAGE_TOKENS
        if fits < 1:
            raise errors.bad_request(
                f"the question and system messages (~{fixed} tokens with the prompt) and "
                f"{reserve} answer tokens leave no room for a passage in the model's context "
                f"of {window} tokens ({window_setting(settings)})",
                param="messages",
                code="context_length_exceeded",
            )
        top_k = req.top_k or settings.retrieval.top_k
        if top_k <= fits:
            return req.top_k, []
        note = (
            f"context: top_k {top_k} -> {fits}, so passages (~{PASSAGE_TOKENS} tokens each), "
            f"the question and {reserve} answer tokens fit the model's context of {window} "
            f"tokens ({window_setting(settings)})"
        )
        return fits, [note]

    # -- the endpoint ----------------------------------------------------

    async def create(self, raw: Request) -> Response:
        started = time.perf_counter()
        mode = "unknown"
        try:
            req = await self.parse(raw)
            mode = req.model
            prep = self.question_of(req)
            if not self.state.ready:
                raise errors.overloaded(
                    f"the model is not ready (status: {self.state.describe()['status']}); "
                    "retry later",
                    status=503,
                    retry_after_s=5,
                )
            slot = self.admission.reserve()
        except APIError as exc:
            self.metrics.observe_error(mode, exc.status, exc.code)
            return exc.response()

        deadline = asyncio.get_running_loop().time() + self.server.request_timeout_s
        request_id = completion_id()
        if req.stream:
            return await self._start_stream(raw, req, prep, slot, deadline, request_id, started)
        try:
            result = await self._guarded(raw, slot, deadline, lambda: self._answer(req, prep))
        except ClientDisconnected:
            self._count_cancel(request_id, mode)
            return Response(status_code=CLIENT_CLOSED)
        except APIError as exc:
            self.metrics.observe_error(mode, exc.status, exc.code)
            return exc.response()
        except Exception as exc:  # noqa: BLE001 - turned into an OpenAI 500 below
            err = self._internal(exc, request_id, mode, prep.question)
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
        return JSONResponse(response.model_dump(mode="json", exclude_none=True))

    # -- running under a slot, a deadline and the client's presence -------

    async def _guarded(
        self,
        raw: Request,
        slot: Slot,
        deadline: float,
        work: Callable[[], Awaitable[T]] | None,
    ) -> T | None:
        """Wait for the slot, then run ``work``; cancel it on disconnect or deadline."""

        async def job() -> T | None:
            await slot.acquire()
            return await work() if work is not None else None

        task = asyncio.ensure_future(job())
        watcher = asyncio.ensure_future(_wait_for_disconnect(raw))
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

    def _answer_kwargs(self, req: ChatCompletionRequest, prep: Prepared) -> dict[str, Any]:
        return {
            "mode": req.model,
            "force_type": req.force_type,
            "top_k": prep.top_k,
            "seed": req.engine_seed(),
            "sampling": req.sampling(),
            "chat": prep.chat,
        }

    async def _answer(self, req: ChatCompletionRequest, prep: Prepared) -> Result:
        try:
            result = await self.state.rag.answer(prep.question, **self._answer_kwargs(req, prep))
            result.fallbacks.extend(prep.notes)
            return result
        except ContextLengthError as exc:
            raise _context_error(exc) from None
        except UserError as exc:
            raise errors.bad_request(str(exc)) from None

    # -- streaming ------------------------------------------------------------

    async def _start_stream(
        self,
        raw: Request,
        req: ChatCompletionRequest,
        prep: Prepared,
        slot: Slot,
        deadline: float,
        request_id: str,
        started: float,
    ) -> Response:
        # Wait for the slot before sending headers, so a timeout or a
        # disconnect in the queue is still an ordinary status code.
        try:
            await self._guarded(raw, slot, deadline, None)
        except ClientDisconnected:
            slot.release()
            self._count_cancel(request_id, req.model)
            return Response(status_code=CLIENT_CLOSED)
        except APIError as exc:
            slot.release()
            self.metrics.observe_error(req.model, exc.status, exc.code)
            return exc.response()
        events = self._stream_events(req, prep, deadline, request_id, started)
        return SSEResponse(events, on_close=slot.release)

    async def _stream_events(
        self,
        req: ChatCompletionRequest,
        prep: Prepared,
        deadline: float,
        request_id: str,
        started: float,
    ) -> AsyncIterator[str]:
        created = int(time.time())

        def chunk(delta: DeltaMessage, **extra: Any) -> str:
            return ChatCompletionChunk(
                id=request_id,
                created=created,
                model=req.model,
                choices=[StreamChoice(delta=delta, finish_reason=extra.pop("finish", None))],
                **extra,
            ).sse()

        # One task drives the whole answer stream (engine generators stay in
        # one task); this generator only forwards its events, so it can send
        # keep-alive comments while a long plan round runs and stop the work
        # at the deadline or when the client leaves.
        stream = self.state.rag.answer_stream(
            prep.question, progress=req.progress_events, **self._answer_kwargs(req, prep)
        )
        pump = _Pump(stream)
        self._streams.add(pump)
        loop = asyncio.get_running_loop()
        result: Result | None = None
        error: APIError | None = None
        first_token = True
        try:
            yield chunk(DeltaMessage(role="assistant", content=""))
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise errors.timeout(self.server.request_timeout_s)
                got, event = await pump.next(min(self.server.sse_keepalive_s, remaining))
                if not got:
                    if loop.time() < deadline:
                        yield KEEPALIVE
                    continue
                if event is _END:
                    break
                if isinstance(event, Result):
                    result = event
                    result.fallbacks.extend(prep.notes)
                elif isinstance(event, Progress):
                    # Empty content, so OpenAI clients that only read delta.content skip it.
                    progress = ProgressEvent.model_validate(event.to_dict())
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
                typed_rag=self._info(req, result, latency),
            )
            self._count_done(req.model, result, latency)
        except asyncio.CancelledError:
            # The client went away (Starlette cancels the response) or the server stops.
            self._count_cancel(request_id, req.model)
            raise
        except APIError as exc:
            error = exc
        except ContextLengthError as exc:
            error = _context_error(exc)
        except UserError as exc:
            error = errors.bad_request(str(exc))
        except Exception as exc:  # noqa: BLE001 - sent in-band as an OpenAI error
            error = self._internal(exc, request_id, req.model, prep.question)
        finally:
            self._streams.discard(pump)
            await pump.stop()
        if error is not None:
            self.metrics.observe_error(req.model, error.status, error.code)
            yield error.sse()
        yield DONE

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
            return APIError(
                503,
                "the language model backend failed; the server log has the details",
                type="service_unavailable_error",
                code="engine_error",
            )
        return errors.internal()


def _context_error(exc: ContextLengthError) -> APIError:
    """The engine found a prompt longer than its context: the request's fault, not a 503."""
    return errors.bad_request(str(exc), param="messages", code="context_length_exceeded")


_ROLE_TAGS = frozenset({"user", "system", "developer", "assistant", "tool"})
_FORMAT_TAGS = frozenset({"text", "json_object", "json_schema"})
_TYPE_LABELS = frozenset({"str", "int", "float", "bool", "dict", "list", "none"})


def _param(loc: tuple[Any, ...]) -> str | None:
    """The field's dotted path, without pydantic's union labels (message role, member type)."""
    out: list[str] = []
    for i, part in enumerate(loc):
        prev = loc[i - 1] if i else None
        if isinstance(part, int):
            out.append(str(part))
        elif isinstance(prev, int) and out[:1] == ["messages"] and part in _ROLE_TAGS:
            continue
        elif prev == "response_format" and part in _FORMAT_TAGS:
            continue
        elif "[" in part or "-" in part or part in _TYPE_LABELS:
            continue
        else:
            out.append(part)
    return ".".join(out) or None


def _from_validation(exc: ValidationError) -> APIError:
    """The most telling problem (a union's "wrong type" errors come last), naming its field."""
    problems = sorted(exc.errors(), key=lambda e: str(e.get("type", "")).endswith("_type"))
    first = problems[0]
    param = _param(tuple(first.get("loc", ())))
    kind = first.get("type")
    msg = first.get("msg", "invalid value")
    if param == "messages" and kind == "missing":
        return errors.bad_request("'messages' is required", param="messages")
    if param == "messages" and kind == "too_short":
        return errors.bad_request("'messages' must not be empty", param="messages")
    if kind == "string_pattern_mismatch":
        msg = "must not be empty or blank"
    top = (param or "").split(".")[0]
    policy = FIELD_POLICY.get(top)
    if policy is not None and policy[0] == "rejected":
        param = top
        msg += f" ({param} is not supported: {policy[1]})"
        return errors.bad_request(
            f"invalid '{param}': {msg}", param=param, code="unsupported_parameter"
        )
    return errors.bad_request(f"invalid '{param}': {msg}", param=param, code="invalid_value")


_END = object()


class _Pump:
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
        await self._queue.put(("item", _END))

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

        Re-raises what the source raised; ``_END`` marks its end.
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
        await _aclose(self._source)


async def _aclose(stream: AsyncIterator[Any]) -> None:
    close = getattr(stream, "aclose", None)
    if close is None:
        return
    try:
        await close()
    except Exception:  # noqa: BLE001 - the stream already failed or finished
        log.debug("error while closing an answer stream", exc_info=True)
