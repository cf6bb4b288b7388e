"""The app: its routers, auth and error handlers; the work lives in :mod:`serving.serving_chat`.

``create_app(settings)`` builds the FastAPI app from one router per endpoint family
(:mod:`serving.routes`); the TypedRAG instance is built in the background once the
server listens (``/health`` says 503 until then). Tests may pass a ready-made ``rag``
instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from serving import errors, openapi
from serving.admission import Admission
from serving.auth import key_guard
from serving.errors import APIError
from serving.jobs import JobQueue
from serving.metrics import ServerMetrics
from serving.routes import chat as chat_routes
from serving.routes import collections, health, models
from serving.serving_chat import OpenAIServingChat
from serving.state import ServerState
from serving.training_pause import TrainingPause
from serving.validation import from_validation
from typed_rag.classifier.interim import finetune_pid_path
from typed_rag.config import Settings

log = logging.getLogger(__name__)


def create_app(
    settings: Settings,
    rag: Any | None = None,
    *,
    on_fatal: Callable[[str], None] | None = None,
) -> FastAPI:
    """Build the server app. ``on_fatal(message)`` is called if TypedRAG fails to start."""
    server = settings.server
    metrics = ServerMetrics()
    state = ServerState(settings, rag, on_fatal=on_fatal)
    pause = TrainingPause(finetune_pid_path(settings))
    admission = Admission(
        server.max_concurrent, server.max_queue, metrics, server.short_slots, pause
    )
    chat = OpenAIServingChat(state, admission, metrics)
    jobs = JobQueue(settings)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        jobs.recover()
        pause.release_left_over()
        if settings.documents.uploads == "on" and not server.api_key:
            log.warning(
                "documents.uploads is on without server.api_key: anyone who reaches this "
                "server can upload files and start indexing jobs"
            )
        loader = asyncio.create_task(state.load())
        try:
            yield
        finally:
            if not loader.done():
                loader.cancel()
                await asyncio.gather(loader, return_exceptions=True)
            pause.resume()
            await jobs.close()
            await state.close()

    app = FastAPI(
        title="Typed-RAG",
        summary="OpenAI-compatible chat completions answered by Typed-RAG",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.typed_rag = state
    app.state.metrics = metrics
    app.state.admission = admission
    app.state.chat = chat
    app.state.jobs = jobs

    require_key = key_guard(server)
    # In this order, as the OpenAPI document lists them.
    app.include_router(chat_routes.router(chat, require_key))
    app.include_router(models.router(state, require_key))
    app.include_router(collections.router(settings, jobs, require_key))
    app.include_router(health.router(state, metrics))

    _install_error_handlers(app, metrics)
    openapi.install(
        app,
        auth=bool(server.api_key),
        max_input_chars=server.max_input_chars,
        max_top_k=server.max_top_k,
    )
    if server.ui:
        _mount_ui(app, settings)
    return app


def _allowed_methods(request: Request) -> str:
    """Every method of every route at this path (Starlette names only the first route's,
    and a path such as ``/v1/collections`` has a GET route and a POST route)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, APIRoute) and route.path_regex.match(request.url.path):
            methods |= route.methods or set()
    return ", ".join(sorted(methods))


def _install_error_handlers(app: FastAPI, metrics: ServerMetrics) -> None:
    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, APIError)
        if request.url.path.startswith("/v1/chat"):
            metrics.observe_error("unknown", exc.status, exc.code)
        return exc.response()

    async def validation(request: Request, exc: Exception) -> Response:
        """FastAPI's 422 for a body the request model refuses: the OpenAI 400 naming the field."""
        assert isinstance(exc, RequestValidationError)
        return await api_error(request, from_validation(exc.errors()))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404:
            err = errors.not_found(f"no such endpoint: {request.method} {request.url.path}")
        elif exc.status_code == 405:
            allow = _allowed_methods(request) or (exc.headers or {}).get("Allow", "")
            err = errors.method_not_allowed(
                f"method {request.method} is not allowed on {request.url.path}"
                + (f"; allowed: {allow}" if allow else "")
            )
            if allow:
                err.headers["Allow"] = allow
        else:
            err = APIError(exc.status_code, str(exc.detail))
        metrics.errors.labels(code=err.code).inc()
        return err.response()

    async def unexpected(request: Request, exc: Exception) -> Response:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        metrics.errors.labels(code="internal_error").inc()
        return errors.internal().response()

    app.add_exception_handler(APIError, api_error)
    app.add_exception_handler(RequestValidationError, validation)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)


def _mount_ui(app: FastAPI, settings: Settings) -> None:
    """Serve the Gradio demo at ``/ui``; it talks to this server's own OpenAI endpoint."""
    try:
        from ui.demo import mount_demo  # heavy: gradio
    except ImportError as exc:
        log.warning(
            "server.ui is on but gradio is missing (%s); /ui is disabled. "
            "Install the 'ui' extra: pip install 'typed-rag[ui]'",
            exc,
        )
        return
    server = settings.server
    host = server.host if server.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    mount_demo(
        app,
        f"http://{host}:{server.port}/v1",
        path="/ui",
        api_key=server.api_key,
        concurrency=server.max_concurrent + server.max_queue,
        timeout_s=server.request_timeout_s + 5,
    )
