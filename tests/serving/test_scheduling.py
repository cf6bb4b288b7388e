"""What a client sees while it waits, over real HTTP: a queue that speaks, a short lane,
a server that is warm when it says ready, truthful timings, and bounded requests."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import openai
import pytest

from tests.serving.conftest import (
    ProbeEngine,
    live_server,
    make_rag,
    server_settings,
)
from tests.serving.test_errors import assert_openai_error
from typed_rag.engines.base import ChatRequest, ChatResult

WHY = {"role": "user", "content": "Why do leaves change color in autumn?"}


def wait_until(check, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


class LongGate(ProbeEngine):
    """Holds every call of a long request (priority 0) until ``hold`` is set; short ones
    (priority 1) pass. Records the priority of each call."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = threading.Event()
        self.priorities: list[int] = []

    async def _held(self, requests: Sequence[ChatRequest]) -> None:
        self.priorities.extend(r.priority for r in requests)
        while any(r.priority == 0 for r in requests) and not self.hold.is_set():
            await asyncio.sleep(0.01)

    async def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        await self._held(requests)
        return await super().generate(requests)

    async def stream(self, request: ChatRequest):  # type: ignore[override]
        await self._held([request])
        async for delta in super().stream(request):
            yield delta


def post(url: str, body: dict, timeout: float = 30) -> httpx.Response:
    return httpx.post(url + "/chat/completions", json=body, timeout=timeout)


def test_a_queued_stream_gets_headers_at_once_then_its_place(tmp_path: Path) -> None:
    engine = LongGate()
    overrides = {"server.max_concurrent": 1, "server.max_queue": 4, "server.sse_keepalive_s": 0.3}
    settings = server_settings(tmp_path, **overrides)
    with live_server(settings, make_rag(settings, engine)) as srv:
        blocker = threading.Thread(target=post, args=(srv.api, {"messages": [WHY]}))
        blocker.start()
        wait_until(lambda: srv.metric("typed_rag_requests_in_flight") == 1)
        body = {"model": "typed-rag", "messages": [WHY], "stream": True}
        started = time.perf_counter()
        with httpx.stream("POST", srv.api + "/chat/completions", json=body, timeout=30) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith(
                "text/event-stream"
            )
            lines = r.iter_lines()
            first = next(line for line in lines if line)
            first_byte = time.perf_counter() - started
            assert json.loads(first[6:])["choices"][0]["delta"]["role"] == "assistant"
            queued = json.loads(next(line for line in lines if line)[6:])
            assert queued["typed_rag"]["event"] == "queued"
            assert queued["typed_rag"]["position"] == 1
            assert queued["choices"][0]["delta"]["content"] == ""
            comment = next(line for line in lines if line)
            assert comment == ": keep-alive"  # nothing changed for a while: the line stays open
            engine.hold.set()
            rest = [line for line in lines if line]
        blocker.join(30)
        assert first_byte < 1.0, first_byte
        assert rest[-1] == "data: [DONE]"
        events = [json.loads(line[6:]) for line in rest if line.startswith("data: {")]
        kinds = [e.get("typed_rag", {}).get("event") for e in events]
        assert kinds.index("type") < kinds.index("plan")  # the pipeline's own events follow
        assert (
            "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
            == "A fake answer [1]."
        )


def test_the_sdk_reads_a_queued_stream_as_an_ordinary_one(tmp_path: Path) -> None:
    engine = LongGate()
    settings = server_settings(tmp_path, **{"server.max_concurrent": 1})
    with live_server(settings, make_rag(settings, engine)) as srv:
        blocker = threading.Thread(target=post, args=(srv.api, {"messages": [WHY]}))
        blocker.start()
        wait_until(lambda: srv.metric("typed_rag_requests_in_flight") == 1)
        threading.Timer(0.5, engine.hold.set).start()
        client = openai.OpenAI(base_url=srv.api, api_key="x", max_retries=0)
        stream = client.chat.completions.create(model="typed-rag", messages=[WHY], stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        blocker.join(30)
    assert text == "A fake answer [1]."


def test_a_stream_that_times_out_in_the_queue_says_so_in_band(tmp_path: Path) -> None:
    engine = LongGate()
    overrides = {"server.max_concurrent": 1, "server.request_timeout_s": 1.0}
    settings = server_settings(tmp_path, **overrides)
    with live_server(settings, make_rag(settings, engine)) as srv:
        blocker = threading.Thread(target=post, args=(srv.api, {"messages": [WHY]}))
        blocker.start()
        wait_until(lambda: srv.metric("typed_rag_requests_in_flight") == 1)
        body = {"messages": [WHY], "stream": True}
        r = httpx.post(srv.api + "/chat/completions", json=body, timeout=30)
        engine.hold.set()
        blocker.join(30)
    events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert json.loads(events[-2])["error"]["code"] == "request_timeout"


def test_a_short_request_does_not_wait_behind_long_ones(tmp_path: Path) -> None:
    engine = LongGate()
    overrides = {"server.max_concurrent": 2, "server.max_queue": 4, "server.short_slots": 1}
    settings = server_settings(tmp_path, **overrides)
    with live_server(settings, make_rag(settings, engine)) as srv:
        longs = [
            threading.Thread(target=post, args=(srv.api, {"messages": [WHY]})) for _ in range(3)
        ]
        for t in longs:
            t.start()
        wait_until(lambda: srv.metric("typed_rag_requests_in_flight") == 2)
        wait_until(lambda: srv.metric("typed_rag_queue_depth") == 1)  # the third long waits
        started = time.perf_counter()
        short = post(srv.api, {"model": "llm", "messages": [WHY], "max_tokens": 8})
        short_s = time.perf_counter() - started
        small_rag = post(srv.api, {"model": "rag", "messages": [WHY], "max_tokens": 16})
        assert srv.metric("typed_rag_queue_depth") == 1  # the long one still waits its turn
        engine.hold.set()
        for t in longs:
            t.join(30)
    assert short.status_code == 200 and small_rag.status_code == 200, small_rag.text
    assert short.json()["choices"][0]["message"]["content"] == "A fake answer [1]."
    assert short_s < 2.0, short_s
    assert 1 in engine.priorities  # the short requests' calls asked the engine to go first


def test_short_requests_queue_behind_short_ones_only(tmp_path: Path) -> None:
    engine = ProbeEngine(gate=threading.Event())
    overrides = {"server.max_concurrent": 1, "server.max_queue": 0, "server.short_slots": 1}
    settings = server_settings(tmp_path, **overrides)
    with live_server(settings, make_rag(settings, engine)) as srv:
        body = {"model": "llm", "messages": [WHY]}
        blocker = threading.Thread(target=post, args=(srv.api, body))
        blocker.start()
        wait_until(lambda: srv.metric("typed_rag_requests_in_flight") == 1)
        r = post(srv.api, body)  # no long request runs: the lane stays closed, the queue is 0
        engine.gate.set()
        blocker.join(30)
    assert_openai_error(r, 429, "rate_limit_exceeded")


def test_ready_means_warm(tmp_path: Path) -> None:
    engine = ProbeEngine(gate=threading.Event())  # the warm-up call waits on the gate
    settings = server_settings(tmp_path, **{"server.warm_up": True})
    rag = make_rag(settings, engine)
    searched: list[int] = []
    search = rag.retriever.search

    def spy(queries, k):  # type: ignore[no-untyped-def]
        searched.append(k)
        return search(queries, k)

    rag.retriever.search = spy  # type: ignore[method-assign]
    with live_server(settings, rag, wait=False) as srv:
        wait_until(lambda: httpx.get(srv.url + "/health").json()["status"] == "warming")
        r = httpx.get(srv.url + "/health")
        assert r.status_code == 503 and r.headers["retry-after"]
        assert searched == [settings.retrieval.top_k] and engine.started == 1
        err = assert_openai_error(post(srv.api, {"messages": [WHY]}), 503, "service_unavailable")
        assert "warming" in err["message"]
        engine.gate.set()
        wait_until(lambda: httpx.get(srv.url + "/health").status_code == 200)
        assert engine.finished == 1  # the warm-up call, before any user request
        assert post(srv.api, {"messages": [WHY]}).status_code == 200


@pytest.mark.parametrize("stream", [False, True])
def test_timings_add_up_to_the_wall_time(tmp_path: Path, stream: bool) -> None:
    engine = ProbeEngine(delay_s=0.15)
    settings = server_settings(tmp_path)
    with live_server(settings, make_rag(settings, engine)) as srv:
        body = {"messages": [WHY], "stream": stream, "include_trace": True}
        r = post(srv.api, body)
    if stream:
        last = [json.loads(x[6:]) for x in r.text.splitlines() if x.startswith("data: {")][-1]
        timings = last["typed_rag"]["timings"]
    else:
        timings = r.json()["typed_rag"]["timings"]
    total = timings.pop("total")
    # the default profile: a plan round, extracted sub-answers, the answer (REASON: no draft)
    assert min(timings["plan"], timings["generate"]) >= 0.14
    assert timings.get("draft", 0.0) == 0.0
    assert timings["sub_answers"] > 0 and timings["finish"] > 0  # timed, not left at 0.0
    assert abs(sum(timings.values()) - total) <= 0.05 * total, (timings, total)


def test_top_k_beyond_the_server_bound_is_400_naming_the_setting(tmp_path: Path) -> None:
    settings = server_settings(tmp_path)
    with live_server(settings, make_rag(settings)) as srv:
        err = assert_openai_error(post(srv.api, {"messages": [WHY], "top_k": 21}), 400)
        assert err["param"] == "top_k" and err["code"] == "invalid_value"
        assert "at most 20" in err["message"] and "server.max_top_k" in err["message"]
        assert post(srv.api, {"messages": [WHY], "top_k": 20}).status_code == 200
        client = openai.OpenAI(base_url=srv.api, api_key="x", max_retries=0)
        with pytest.raises(openai.BadRequestError, match="max_top_k"):
            client.chat.completions.create(model="rag", messages=[WHY], extra_body={"top_k": 100})
        doc = httpx.get(srv.url + "/openapi.json").json()
        top_k = doc["components"]["schemas"]["ChatCompletionRequest"]["properties"]["top_k"]
        assert top_k["anyOf"][0]["maximum"] == 20


@pytest.mark.parametrize(
    "raw", [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e999"], ids=lambda b: b.decode()
)
def test_non_finite_numbers_are_invalid_json(tmp_path: Path, raw: bytes) -> None:
    settings = server_settings(tmp_path)
    with live_server(settings, make_rag(settings)) as srv:
        body = b'{"messages": [{"role": "user", "content": "why"}], "temperature": ' + raw + b"}"
        r = httpx.post(
            srv.api + "/chat/completions",
            content=body,
            headers={"content-type": "application/json"},
        )
    err = assert_openai_error(r, 400, "invalid_json")
    assert "not finite" in err["message"] and raw.decode().lstrip("-") in err["message"]


def test_favicon_is_not_a_404(tmp_path: Path) -> None:
    settings = server_settings(tmp_path)
    with live_server(settings, make_rag(settings)) as srv:
        r = httpx.get(srv.url + "/favicon.ico")
    assert r.status_code == 204 and r.content == b""


def test_system_messages_reach_the_final_prompt_before_the_answer(tmp_path: Path) -> None:
    engine = ProbeEngine()
    settings = server_settings(tmp_path)
    rag = make_rag(settings, engine)
    with live_server(settings, rag) as srv:
        plain = post(srv.api, {"model": "rag", "messages": [WHY]})
        without = engine.calls[-1].messages
        system = {"role": "system", "content": "Answer only in French, in one sentence."}
        told = post(srv.api, {"model": "rag", "messages": [system, WHY]})
        with_system = engine.calls[-1].messages
    assert plain.status_code == told.status_code == 200
    # without system messages the prompt is exactly the Python API's (nothing added)
    direct = asyncio.run(rag.answer(WHY["content"], mode="rag"))
    assert direct.answer and engine.calls[-1].messages == without
    assert "French" not in json.dumps(without)
    user = with_system[-1]["content"]
    assert user.endswith(
        "### Instructions from the asker (follow them)\n"
        "Answer only in French, in one sentence.\n\n### Answer\n"
    )
    assert "Answer only in French" in with_system[0]["content"]


def test_sigterm_ends_a_queued_stream_with_an_error_event(tmp_path: Path) -> None:
    from cli.serve import _drain_streams_on_exit
    from tests.serving.test_shutdown import LoopProbe

    engine = LoopProbe(gate=threading.Event())  # the running answer never comes on its own
    settings = server_settings(tmp_path, **{"server.max_concurrent": 1})
    with live_server(settings, make_rag(settings, engine)) as srv:
        _drain_streams_on_exit(srv.server, srv.app)
        streams: list[list[str]] = [[], []]

        def client(i: int) -> None:
            body = {"model": "rag", "messages": [WHY], "stream": True}
            with httpx.stream("POST", srv.api + "/chat/completions", json=body, timeout=30) as r:
                streams[i].extend(line for line in r.iter_lines() if line.startswith("data: "))

        readers = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(2)]
        readers[0].start()
        wait_until(lambda: engine.loop is not None and engine.started == 1)
        readers[1].start()
        wait_until(lambda: any('"queued"' in line for line in streams[1]))
        engine.loop.call_soon_threadsafe(srv.server.handle_exit, signal.SIGTERM, None)
        for reader in readers:
            reader.join(15)
            assert not reader.is_alive()
    for lines in streams:
        assert lines[-1] == "data: [DONE]", lines
        assert json.loads(lines[-2][6:])["error"]["code"] == "server_shutting_down"
