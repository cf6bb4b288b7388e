"""``typed-rag serve`` (the OpenAI-compatible server) and ``typed-rag ui`` (the demo alone)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from types import FrameType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import uvicorn

from serving.app import create_app
from serving.replicas import serve_replicas
from typed_rag.config import Settings
from typed_rag.errors import UserError

log = logging.getLogger(__name__)


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"port must be 1-65535, got {port}")
    return port


def _replicas(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of replicas: {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"--replicas must be at least 1, got {n}")
    return n


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``serve`` and ``ui``."""
    serve = sub.add_parser(
        "serve",
        help="run the OpenAI-compatible chat server (with the demo at /ui)",
        description="Serve /v1/chat/completions, /v1/models, /health and /metrics; the model "
        "is chosen by the settings (engine.backend, engine.model).",
    )
    serve.add_argument("--host", help="address to listen on (default: server.host, 127.0.0.1)")
    serve.add_argument("--port", type=_port, help="port (default: server.port, 8000)")
    serve.add_argument("--no-ui", action="store_true", help="do not mount the demo at /ui")
    serve.add_argument(
        "--replicas",
        type=_replicas,
        default=1,
        help="N > 1: run N Ray Serve replicas behind one address (needs typed-rag[ray]); "
        "1 (default): one uvicorn server",
    )
    serve.add_argument(
        "--ray-address",
        help="with --replicas: join this Ray cluster ('auto', 'ray://head:10001'; "
        "default: start one on this machine)",
    )
    serve.set_defaults(func=run_serve)

    ui = sub.add_parser(
        "ui",
        help="run the Gradio demo alone against a running server",
        description="Start the chat demo; it calls the server's OpenAI endpoint at --api.",
    )
    ui.add_argument(
        "--api",
        required=True,
        help="the server's base URL, e.g. http://127.0.0.1:8000 (the /v1 is added if missing)",
    )
    ui.add_argument("--host", default="127.0.0.1", help="address for the demo (127.0.0.1)")
    ui.add_argument("--port", type=_port, default=7860, help="port for the demo (7860)")
    ui.add_argument("--api-key", help="the server's API key (default: server.api_key)")
    ui.set_defaults(func=run_ui)


def _with_server(settings: Settings, **changes: object) -> Settings:
    changes = {k: v for k, v in changes.items() if v is not None}
    return settings.with_section("server", **changes) if changes else settings


def run_serve(args: argparse.Namespace, settings: Settings) -> int:
    settings = _with_server(
        settings, host=args.host, port=args.port, ui=False if args.no_ui else None
    )
    srv = settings.server
    if srv.max_concurrent < 1 or srv.max_queue < 0:
        raise UserError(
            "server.max_concurrent must be >= 1 and server.max_queue >= 0 "
            f"(got {srv.max_concurrent} and {srv.max_queue})"
        )
    if args.replicas > 1 or args.ray_address:
        return serve_replicas(settings, args.replicas, args.ray_address)
    fatal: list[str] = []
    holder: dict[str, uvicorn.Server] = {}

    def on_fatal(message: str) -> None:
        fatal.append(message)
        if "server" in holder:
            holder["server"].should_exit = True

    app = create_app(settings, on_fatal=on_fatal)
    config = uvicorn.Config(
        app,
        host=srv.host,
        port=srv.port,
        log_level="info",
        timeout_graceful_shutdown=10,
        log_config=None,  # keep the CLI's logging setup
    )
    server = uvicorn.Server(config)
    holder["server"] = server
    _drain_streams_on_exit(server, app)
    log.info(
        "serving Typed-RAG on http://%s:%d (engine %s, model %s)",
        srv.host,
        srv.port,
        settings.engine.backend,
        settings.engine.model,
    )
    try:
        server.run()
    except SystemExit as exc:  # uvicorn exits when it cannot bind
        print(
            f"typed-rag: error: could not serve on {srv.host}:{srv.port} (see the log above)",
            file=sys.stderr,
        )
        return int(exc.code or 1)
    if fatal:
        print(f"typed-rag: error: Typed-RAG failed to start: {fatal[0]}", file=sys.stderr)
        return 1
    return 0


def _drain_streams_on_exit(server: Any, app: Any) -> None:
    """On SIGTERM/SIGINT, end open streams with an error event and ``[DONE]`` first.

    uvicorn waits (``timeout_graceful_shutdown``) for open connections before it
    stops; a stream that is told why it ends closes at once instead of being cut.
    """
    original = server.handle_exit

    def handle_exit(sig: int, frame: FrameType | None) -> None:
        # Signal handlers run on the main thread, where uvicorn's loop runs.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None:
            loop.call_soon_threadsafe(app.state.chat.drain)
        original(sig, frame)

    server.handle_exit = handle_exit


def normalise_api_url(url: str) -> str:
    """``http://host:port`` or ``.../v1`` -> the ``/v1`` base URL the SDK wants."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UserError(f"--api must be an http(s) URL such as http://127.0.0.1:8000, got {url!r}")
    path = parts.path.rstrip("/")
    if not path.endswith("/v1"):
        path += "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def run_ui(args: argparse.Namespace, settings: Settings) -> int:
    api = normalise_api_url(args.api)
    try:
        from ui.demo import launch  # heavy: gradio
    except ImportError as exc:
        raise UserError(
            f"the demo needs gradio ({exc}); install it with: pip install 'typed-rag[ui]'"
        ) from None
    launch(
        api,
        host=args.host,
        port=args.port,
        api_key=args.api_key or settings.server.api_key,
        timeout_s=settings.server.request_timeout_s + 5,
    )
    return 0
