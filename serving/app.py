"""The HTTP router: routes, auth and error handlers; the work lives in :mod:`serving.serving_chat`.

``create_app(settings)`` builds the FastAPI app; the TypedRAG instance is
built in the background once the server listens (``/health`` says 503 until
then). Tests may pass a ready-made ``rag`` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from serving import documents_api, errors, openapi
from serving.admission import Admission
from serving.collection_cards import collection_cards
from serving.config_view import public_settings
from serving.errors import APIError
from serving.jobs import JobQueue
from serving.metrics import ServerMetrics
from serving.responses import ConfigResponse, ModelCard, ModelList
from serving.serving_chat import OpenAIServingChat
from serving.state import ServerState
from serving.training_pause import TrainingPause
from typed_rag.classifier.interim import finetune_pid_path
from typed_rag.config import Settings
from typed_rag.pipelines import MODES

log = logging.getLogger(__name__)

MODE_DESCRIPTIONS = {
    "typed-rag": "type-aware decomposition: classify, plan per type, retrieve, answer",
    "rag": "plain retrieval-augmented generation (the paper's RAG baseline)",
    "llm": "the language model alone, no retrieval (the paper's LLM baseline)",
}


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

    async def require_key(request: Request) -> None:
        expected = server.api_key
        if not expected:
            return
        header = request.headers.get("authorization", "")
        scheme, _, key = header.partition(" ")
        if not header:
            raise errors.unauthorized("missing API key: send it as 'Authorization: Bearer <key>'")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            key.strip().encode(), expected.encode()
        ):
            raise errors.unauthorized("invalid API key")

    @app.post("/v1/chat/completions", dependencies=[Depends(require_key)])
    async def chat_completions(request: Request) -> Response:
        return await chat.create(request)

    @app.get("/v1/models", dependencies=[Depends(require_key)])
    async def list_models() -> ModelList:
        root = state.model_name()
        return ModelList(
            data=[ModelCard(id=m, root=root, description=MODE_DESCRIPTIONS[m]) for m in MODES]
        )

    @app.get("/v1/config", dependencies=[Depends(require_key)])
    async def config() -> ConfigResponse:
        """The settings in force, every ``auto`` resolved; no key, token or server path."""
        resolved = await asyncio.to_thread(state.resolved_settings)
        return ConfigResponse(settings=public_settings(resolved, state.paths.home))

    @app.get("/v1/collections", dependencies=[Depends(require_key)])
    async def collections() -> JSONResponse:
        """The collections a request's ``collection`` field may name."""
        cards = await asyncio.to_thread(collection_cards, settings)
        return JSONResponse({"object": "list", "data": cards})

    documents_api.install(app, settings, jobs, require_key)

    @app.get("/health")
    async def health() -> JSONResponse:
        body = state.describe()
        headers = {} if state.ready else {"Retry-After": "5"}
        return JSONResponse(body, status_code=200 if state.ready else 503, headers=headers)

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        """Browsers ask for it; "no icon" instead of a 404 in every log."""
        return Response(status_code=204, headers={"Cache-Control": "max-age=86400"})

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)

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

    async def validation(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        err = errors.validation_error(exc)
        metrics.errors.labels(code=err.code).inc()
        return err.response()

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
