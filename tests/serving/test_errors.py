"""Every way a request can fail comes back in the OpenAI error shape, never as a traceback."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.serving.conftest import (
    LiveServer,
    ProbeEngine,
    live_server,
    make_rag,
    server_settings,
)
from typed_rag.engines.base import EngineError

Q = {"role": "user", "content": "Why do leaves change color in autumn?"}


def assert_openai_error(r: httpx.Response, status: int, code: str | None = None) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"error"}, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"]
    assert "Traceback" not in r.text and 'File "' not in r.text
    if code is not None:
        assert err["code"] == code, err
    return err


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    settings = server_settings(tmp_path_factory.mktemp("errors"), **{"server.max_input_chars": 200})
    with live_server(settings, make_rag(settings)) as server:
        yield server


def post(srv: LiveServer, body: object, **kw: object) -> httpx.Response:
    return httpx.post(srv.api + "/chat/completions", json=body, timeout=30, **kw)


def test_invalid_json_is_400(srv: LiveServer) -> None:
    r = httpx.post(
        srv.api + "/chat/completions",
        content=b'{"messages": [',
        headers={"content-type": "application/json"},
    )
    err = assert_openai_error(r, 400, "invalid_json")
    assert "not valid JSON" in err["message"]


def test_json_that_is_not_an_object_is_400(srv: LiveServer) -> None:
    assert_openai_error(post(srv, [1, 2]), 400, "invalid_json")


def test_wrong_content_type_is_400(srv: LiveServer) -> None:
    r = httpx.post(
        srv.api + "/chat/completions",
        content=json.dumps({"messages": [Q]}),
        headers={"content-type": "text/plain"},
    )
    err = assert_openai_error(r, 400, "invalid_content_type")
    assert "text/plain" in err["message"]


def test_missing_messages_is_400(srv: LiveServer) -> None:
    err = assert_openai_error(post(srv, {"model": "typed-rag"}), 400)
    assert err["param"] == "messages"


def test_empty_messages_is_400(srv: LiveServer) -> None:
    err = assert_openai_error(post(srv, {"messages": []}), 400)
    assert err["param"] == "messages" and "empty" in err["message"]


def test_no_user_message_is_400(srv: LiveServer) -> None:
    body = {"messages": [{"role": "system", "content": "be brief"}]}
    err = assert_openai_error(post(srv, body), 400)
    assert "role 'user'" in err["message"]


def test_blank_user_message_is_400(srv: LiveServer) -> None:
    body = {"messages": [{"role": "user", "content": "   "}]}
    err = assert_openai_error(post(srv, body), 400)
    assert err["param"] == "messages.0.content"


def test_unknown_model_is_400_and_names_the_choices(srv: LiveServer) -> None:
    err = assert_openai_error(
        post(srv, {"model": "gpt-4", "messages": [Q]}), 400, "model_not_found"
    )
    assert err["param"] == "model"
    assert "'gpt-4'" in err["message"] and "typed-rag" in err["message"]


def test_over_long_input_is_400(srv: LiveServer) -> None:
    body = {"messages": [{"role": "user", "content": "why " * 100}]}
    err = assert_openai_error(post(srv, body), 400, "input_too_long")
    assert "200" in err["message"] and "max_input_chars" in err["message"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", "hot"),
        ("temperature", 3.5),
        ("top_p", 0),
        ("max_tokens", 0),
        ("seed", "abc"),
        ("stream", "maybe"),
        ("n", 2),
        ("top_k", 0),
        ("include_trace", [1]),
        ("force_type", "SMALLTALK"),
        ("messages", "hello"),
        ("stream_options", {"include_usage": "sometimes"}),
    ],
)
def test_bad_field_types_are_400_not_422(srv: LiveServer, field: str, value: object) -> None:
    body: dict[str, object] = {"messages": [Q], field: value}
    err = assert_openai_error(post(srv, body), 400)
    assert err["param"] is not None and err["param"].startswith(field), err


def test_bad_message_role_is_400(srv: LiveServer) -> None:
    err = assert_openai_error(post(srv, {"messages": [{"role": "wizard", "content": "hi"}]}), 400)
    assert err["param"].startswith("messages.0")


def test_over_large_body_is_413(srv: LiveServer) -> None:
    body = {"messages": [Q], "user": "x" * 1_100_000}
    err = assert_openai_error(post(srv, body), 413, "request_too_large")
    assert "max_body_bytes" in err["message"]


def test_unknown_endpoint_and_method_are_openai_shaped(srv: LiveServer) -> None:
    assert_openai_error(httpx.get(srv.api + "/completions"), 404, "not_found")
    assert_openai_error(httpx.get(srv.api + "/chat/completions"), 405, "method_not_allowed")


def test_errors_are_counted_in_metrics(srv: LiveServer) -> None:
    before = srv.metric("typed_rag_errors_total", 'code="model_not_found"')
    post(srv, {"model": "nope", "messages": [Q]})
    assert srv.metric("typed_rag_errors_total", 'code="model_not_found"') == before + 1


# --- errors that need their own server --------------------------------------------


def test_api_key_required_when_set(tmp_path: Path) -> None:
    settings = server_settings(tmp_path, **{"server.api_key": "s3cret"})
    with live_server(settings, make_rag(settings)) as srv:
        err = assert_openai_error(post(srv, {"messages": [Q]}), 401, "invalid_api_key")
        assert "Bearer" in err["message"]
        wrong = {"Authorization": "Bearer nope"}
        assert_openai_error(post(srv, {"messages": [Q]}, headers=wrong), 401, "invalid_api_key")
        assert_openai_error(httpx.get(srv.api + "/models", headers=wrong), 401)
        ok = post(srv, {"messages": [Q]}, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200, ok.text
        # health and metrics stay open for probes and scrapers
        assert httpx.get(srv.url + "/health").status_code == 200


def test_full_queue_gives_429_with_retry_after(tmp_path: Path) -> None:
    engine = ProbeEngine(gate=threading.Event())  # the first request runs until the 429 is seen
    settings = server_settings(tmp_path, **{"server.max_concurrent": 1, "server.max_queue": 1})
    with live_server(settings, make_rag(settings, engine)) as srv:
        body = {"model": "rag", "messages": [Q]}
        results: list[httpx.Response] = []

        def call() -> None:
            results.append(post(srv, body))

        first = threading.Thread(target=call)
        first.start()
        _wait_until(lambda: srv.metric("typed_rag_requests_in_flight") == 1)
        second = threading.Thread(target=call)
        second.start()
        _wait_until(lambda: srv.metric("typed_rag_queue_depth") == 1)
        r = post(srv, body)
        err = assert_openai_error(r, 429, "rate_limit_exceeded")
        assert int(r.headers["retry-after"]) >= 1
        assert "max_queue" in err["message"]
        engine.gate.set()
        first.join(30)
        second.join(30)
        assert [x.status_code for x in results] == [200, 200]


def test_request_timeout_is_504(tmp_path: Path) -> None:
    engine = ProbeEngine(delay_s=3.0)
    settings = server_settings(tmp_path, **{"server.request_timeout_s": 0.5})
    with live_server(settings, make_rag(settings, engine)) as srv:
        err = assert_openai_error(
            post(srv, {"model": "llm", "messages": [Q]}), 504, "request_timeout"
        )
        assert "0.5" in err["message"]
        _wait_until(lambda: engine.cancelled == 1)  # the engine work was stopped too


def test_timeout_during_a_stream_is_in_band(tmp_path: Path) -> None:
    engine = ProbeEngine(token_delay_s=0.4)
    settings = server_settings(tmp_path, **{"server.request_timeout_s": 1.0})
    with live_server(settings, make_rag(settings, engine)) as srv:
        body = {"model": "llm", "messages": [Q], "stream": True}
        events = sse_events(srv, body)
        assert events[-1] == "[DONE]"
        err = json.loads(events[-2])["error"]
        assert err["code"] == "request_timeout"
        assert any("content" in e for e in events[:-2])  # some tokens came first


def test_engine_failure_is_500_without_traceback(tmp_path: Path, caplog) -> None:
    engine = ProbeEngine(fail_with=ValueError("secret internal detail"))
    settings = server_settings(tmp_path)
    with live_server(settings, make_rag(settings, engine)) as srv:
        r = post(srv, {"model": "llm", "messages": [Q]})
        err = assert_openai_error(r, 500, "internal_error")
        assert "secret internal detail" not in r.text
        assert err["type"] == "internal_server_error"


def test_engine_error_is_503(tmp_path: Path) -> None:
    engine = ProbeEngine(fail_with=EngineError("backend crashed"))
    settings = server_settings(tmp_path)
    with live_server(settings, make_rag(settings, engine)) as srv:
        assert_openai_error(post(srv, {"model": "llm", "messages": [Q]}), 503, "engine_error")


def test_error_mid_stream_is_sent_in_band_then_done(tmp_path: Path) -> None:
    engine = ProbeEngine(fail_in_stream=RuntimeError("boom"))
    settings = server_settings(tmp_path)
    with live_server(settings, make_rag(settings, engine)) as srv:
        body = {"model": "rag", "messages": [Q], "stream": True}
        events = sse_events(srv, body)
        assert events[-1] == "[DONE]"
        err = json.loads(events[-2])
        assert set(err) == {"error"} and err["error"]["code"] == "internal_error"
        assert "boom" not in err["error"]["message"]
        contents = [json.loads(e)["choices"][0]["delta"].get("content") for e in events[:-2]]
        assert "".join(c for c in contents if c) == "A fake"  # the part before the failure


def test_health_is_503_while_loading_then_200(tmp_path: Path) -> None:
    gate = threading.Event()

    class SlowStart(ProbeEngine):
        async def start(self) -> None:
            while not gate.is_set():
                await asyncio.sleep(0.02)

    settings = server_settings(tmp_path)
    with live_server(settings, make_rag(settings, SlowStart()), wait=False) as srv:
        r = httpx.get(srv.url + "/health")
        assert r.status_code == 503 and r.json()["status"] == "loading"
        err = assert_openai_error(post(srv, {"messages": [Q]}), 503, "service_unavailable")
        assert "not ready" in err["message"]
        gate.set()
        _wait_until(lambda: httpx.get(srv.url + "/health").status_code == 200)
        assert post(srv, {"messages": [Q]}).status_code == 200


def test_health_is_503_after_the_engine_died(tmp_path: Path) -> None:
    engine = ProbeEngine()
    settings = server_settings(tmp_path)
    with live_server(settings, make_rag(settings, engine)) as srv:
        assert httpx.get(srv.url + "/health").json()["status"] == "ok"
        engine.alive = False
        r = httpx.get(srv.url + "/health")
        assert r.status_code == 503 and r.json()["status"] == "unhealthy"
        assert_openai_error(post(srv, {"messages": [Q]}), 503)


def test_failed_start_reports_why(tmp_path: Path) -> None:
    class Broken(ProbeEngine):
        async def start(self) -> None:
            raise FileNotFoundError("model file /nowhere/model.gguf not found")

    settings = server_settings(tmp_path)
    with live_server(settings, make_rag(settings, Broken()), wait=False) as srv:
        _wait_until(lambda: httpx.get(srv.url + "/health").json()["status"] == "failed")
        body = httpx.get(srv.url + "/health").json()
        # Why, without the server's path (the log has it whole).
        assert body["error"] == "model file <path>/model.gguf not found"


# --- helpers ------------------------------------------------------------------------


def sse_events(srv: LiveServer, body: dict) -> list[str]:
    """The ``data:`` payloads of one streamed response."""
    out = []
    with httpx.stream("POST", srv.api + "/chat/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                out.append(line[len("data: ") :])
    return out


def _wait_until(check, timeout_s: float = 10.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_every_error_is_counted_under_its_own_code(srv: LiveServer) -> None:
    posts = [
        {"messages": []},  # no code of its own before: now invalid_request
        {"messages": [{"role": "system", "content": "x"}]},
        {"messages": [Q], "logprobs": True},
    ]
    for body in posts:
        post(srv, body)
    httpx.get(srv.api + "/nowhere")
    text = httpx.get(srv.url + "/metrics").text
    assert 'code="unknown"' not in text
    for code in ("invalid_request", "unsupported_parameter", "not_found"):
        assert srv.metric("typed_rag_errors_total", f'code="{code}"') >= 1, code


@pytest.mark.parametrize("method", ["TRACE", "PUT", "DELETE", "PATCH"])
def test_undeclared_methods_are_405_with_allow(srv: LiveServer, method: str) -> None:
    for path, allowed in (("/v1/chat/completions", "POST"), ("/health", "GET")):
        r = httpx.request(method, srv.url + path)
        assert_openai_error(r, 405, "method_not_allowed")
        assert allowed in r.headers["allow"], r.headers
