"""Stopping the server (SIGTERM) ends open streams with an in-band error event and [DONE]."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from cli.serve import _drain_streams_on_exit
from tests.serving.conftest import ProbeEngine, live_server, make_rag, server_settings
from typed_rag.engines.base import ChatRequest, ChatResult

Q = {"role": "user", "content": "Why do leaves change color in autumn?"}


class LoopProbe(ProbeEngine):
    """Remembers the server's event loop (to deliver the signal there, as the OS would)."""

    loop: asyncio.AbstractEventLoop | None = None

    async def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        self.loop = asyncio.get_running_loop()
        return await super().generate(requests)

    async def stream(self, request: ChatRequest):  # type: ignore[override]
        self.loop = asyncio.get_running_loop()
        async for delta in super().stream(request):
            yield delta


def test_sigterm_ends_open_streams_with_an_error_event(tmp_path: Path) -> None:
    engine = LoopProbe(gate=threading.Event())  # the answer never comes on its own
    settings = server_settings(tmp_path)
    with live_server(settings, make_rag(settings, engine)) as srv:
        _drain_streams_on_exit(srv.server, srv.app)
        lines: list[str] = []

        def client() -> None:
            body = {"model": "rag", "messages": [Q], "stream": True}
            with httpx.stream("POST", srv.api + "/chat/completions", json=body, timeout=30) as r:
                lines.extend(line for line in r.iter_lines() if line.startswith("data: "))

        reader = threading.Thread(target=client)
        reader.start()
        deadline = time.monotonic() + 20
        while engine.loop is None or engine.started == 0:
            assert time.monotonic() < deadline, "the stream never reached the engine"
            time.sleep(0.02)
        started = time.monotonic()
        engine.loop.call_soon_threadsafe(srv.server.handle_exit, signal.SIGTERM, None)
        reader.join(15)
        assert not reader.is_alive()
        assert time.monotonic() - started < 5  # not the 10 s graceful timeout
    assert lines[-1] == "data: [DONE]", lines
    error = json.loads(lines[-2][len("data: ") :])["error"]
    assert error["code"] == "server_shutting_down" and "shutting down" in error["message"]
    assert engine.cancelled == 1  # the engine work stopped too
