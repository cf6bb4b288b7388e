"""The OpenAI client's retry policy and request shape, against a local stub server.

Retries on 429, 5xx and connection failures; never on other 4xx.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator

import pytest

from typed_rag.engines.base import ChatRequest, EngineError
from typed_rag.engines.openai_client import OpenAIEngine, backoff_delay

COMPLETION = {
    "id": "cmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "stub",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "hello [1]"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
}


class Stub(http.server.BaseHTTPRequestHandler):
    """Answers POSTs from a script of (status, body) pairs; records every request body."""

    script: list[tuple[int, dict]] = []
    bodies: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        length = int(self.headers.get("Content-Length", 0))
        type(self).bodies.append(json.loads(self.rfile.read(length)))
        status, body = type(self).script.pop(0) if type(self).script else (200, COMPLETION)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[str]:
    Stub.script, Stub.bodies = [], []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def client(base_url: str, **kw: object) -> OpenAIEngine:
    params: dict[str, object] = {"max_retries": 3, "backoff_base_s": 0.01, "backoff_cap_s": 0.05}
    params.update(kw)
    return OpenAIEngine(base_url=base_url, model="stub", **params)  # type: ignore[arg-type]


REQ = ChatRequest(messages=[{"role": "user", "content": "hi"}], seed=5, max_tokens=7)
ERROR = {"error": {"message": "nope", "type": "invalid_request_error"}}


async def test_429_then_200_is_retried(stub: str) -> None:
    Stub.script = [(429, ERROR), (503, ERROR)]
    async with client(stub) as eng:
        (res,) = await eng.generate([REQ])
    assert res.text == "hello [1]"
    assert (res.prompt_tokens, res.completion_tokens) == (11, 3)
    assert len(Stub.bodies) == 3


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_client_errors_are_not_retried(stub: str, status: int) -> None:
    Stub.script = [(status, ERROR)]
    async with client(stub) as eng:
        with pytest.raises(EngineError, match=f"HTTP {status}"):
            await eng.generate([REQ])
    assert len(Stub.bodies) == 1
    assert eng.healthy()  # a bad request says nothing about the server's health


async def test_retries_are_bounded(stub: str) -> None:
    Stub.script = [(500, ERROR)] * 10
    async with client(stub, max_retries=2) as eng:
        with pytest.raises(EngineError, match="HTTP 500"):
            await eng.generate([REQ])
        assert not eng.healthy()
    assert len(Stub.bodies) == 3


async def test_connection_refused_is_retried_then_reported() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    async with client(f"http://127.0.0.1:{port}/v1", max_retries=1, timeout_s=5) as eng:
        with pytest.raises(EngineError, match="cannot reach"):
            await eng.generate([REQ])


async def test_request_carries_sampling_seed_and_schema(stub: str) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    req = ChatRequest(messages=[{"role": "user", "content": "hi"}], seed=9, json_schema=schema)
    async with client(stub) as eng:
        await eng.generate([req, REQ])
    async with client(stub, json_mode="json_object") as eng:
        await eng.generate([req])
    # The first two requests go out concurrently: arrival order is not fixed, so pick them by seed.
    by_seed = {body["seed"]: body for body in Stub.bodies[:2]}
    first, second, third = by_seed[9], by_seed[5], Stub.bodies[2]
    assert first["seed"] == 9 and first["temperature"] == 0.8 and first["top_p"] == 0.95
    assert first["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema},
    }
    assert "response_format" not in second and second["max_tokens"] == 7
    assert third["response_format"] == {"type": "json_object", "schema": schema}


def test_backoff_grows_and_honours_retry_after() -> None:
    delays = [backoff_delay(i, 1.0, 100.0) for i in range(5)]
    assert all(0.5 * 2**i <= d <= 2**i for i, d in enumerate(delays))
    assert backoff_delay(0, 1.0, 10.0, retry_after="3") == 3.0
    assert backoff_delay(0, 1.0, 10.0, retry_after="999") == 10.0
