"""No body a client can send gets a 5xx: depth, size, Unicode and context limits, over HTTP.

Each bad body is sent on one keep-alive connection followed by a good
request, so a server that resets the connection after a failure is caught.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from serving.bodies import json_depth
from tests.serving.conftest import LiveServer, ProbeEngine, live_server, make_rag, server_settings
from tests.serving.test_errors import assert_openai_error
from typed_rag.engines.base import ContextLengthError

Q = {"role": "user", "content": "Why do leaves change color in autumn?"}
GOOD = json.dumps({"model": "rag", "messages": [Q]}).encode()
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def engine() -> ProbeEngine:
    return ProbeEngine()


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, engine: ProbeEngine) -> Iterator[LiveServer]:
    # top_k up to 100, so that fitting to the context (not the top_k bound) is what acts
    settings = server_settings(tmp_path_factory.mktemp("bodies"), **{"server.max_top_k": 100})
    with live_server(settings, make_rag(settings, engine)) as server:
        yield server


@pytest.fixture
def client(srv: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=srv.api, timeout=30, headers=JSON) as c:
        yield c


def send_then_good(client: httpx.Client, body: bytes) -> httpx.Response:
    """POST ``body``, then a good request on the same connection (it must still work)."""
    r = client.post("/chat/completions", content=body)
    ok = client.post("/chat/completions", content=GOOD)
    assert ok.status_code == 200, ok.text
    return r


def test_json_depth_counts_brackets_outside_strings() -> None:
    assert json_depth(b'{"a": [1, {"b": "[[[[{{{"}]}') == 3
    assert json_depth(b'"\\"[[["') == 0
    assert json_depth(b"[" * 50 + b"]" * 50) == 50


def test_deep_nesting_is_400_and_the_connection_survives(client: httpx.Client) -> None:
    deep = b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    err = assert_openai_error(send_then_good(client, deep), 400, "invalid_json")
    assert "max_json_depth" in err["message"] and "100001" in err["message"]


def test_nesting_within_the_limit_still_reaches_validation(client: httpx.Client) -> None:
    body = json.dumps({"messages": [Q], "metadata": {"a": "b"}, "x": [[[[1]]]]}).encode()
    assert send_then_good(client, body).status_code == 200


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("huge integer", b'{"messages": [], "seed": 1' + b"0" * 5000 + b"}"),
        ("invalid utf-8", b'{"messages": [{"role": "user", "content": "\xff\xfe why"}]}'),
        ("empty body", b""),
        ("truncated", b'{"messages": [{"role": "user", "content": "why'),
        ("null", b"null"),
        ("a string", b'"why"'),
        (
            "NaN temperature",
            b'{"messages": [{"role": "user", "content": "why"}], "temperature": NaN}',
        ),
        (
            "infinite top_p",
            b'{"messages": [{"role": "user", "content": "why"}], "top_p": Infinity}',
        ),
        ("content object", b'{"messages": [{"role": "user", "content": {"a": 1}}]}'),
        ("image part", b'{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}'),
        ("message is a list", b'{"messages": [[1]]}'),
    ],
)
def test_bodies_the_parser_cannot_take_are_400(
    client: httpx.Client, name: str, body: bytes
) -> None:
    assert_openai_error(send_then_good(client, body), 400)


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        ('{"messages": [{"role": "user", "content": "why \\ud800 is it"}]}', "messages.0.content"),
        ('{"messages": [{"role": "user", "content": "why"}], "user": "\\udfff"}', "user"),
        (
            '{"messages": [{"role": "user", "content": [{"type": "text", "text": "\\ud83d"}]}]}',
            "messages.0.content.0.text",
        ),
    ],
)
def test_unpaired_surrogates_are_400_naming_the_field(
    client: httpx.Client, raw: str, param: str
) -> None:
    err = assert_openai_error(send_then_good(client, raw.encode()), 400, "invalid_unicode")
    assert err["param"] == param and "surrogate" in err["message"]


def test_paired_surrogates_are_fine(client: httpx.Client) -> None:
    raw = '{"model": "rag", "messages": [{"role": "user", "content": "why is \\ud83d\\ude00 so?"}]}'
    assert send_then_good(client, raw.encode()).status_code == 200


def test_top_k_beyond_the_context_is_fitted_before_any_engine_call(
    client: httpx.Client,
) -> None:
    body = json.dumps({"model": "rag", "messages": [Q], "top_k": 100}).encode()
    r = client.post("/chat/completions", content=body)
    assert r.status_code == 200, r.text
    (note,) = r.json()["typed_rag"]["fallbacks"]
    assert note.startswith("context: top_k 100 -> 49,") and "8192" in note, note
    body = json.dumps({"model": "rag", "messages": [Q], "top_k": 40}).encode()
    assert client.post("/chat/completions", content=body).json()["typed_rag"]["fallbacks"] == []
    body = json.dumps({"model": "llm", "messages": [Q], "top_k": 100}).encode()
    r = client.post("/chat/completions", content=body)
    assert r.status_code == 200 and r.json()["typed_rag"]["fallbacks"] == []  # no passages


def test_fitting_uses_the_retriever_depth_it_computed(tmp_path: Path) -> None:
    engine = ProbeEngine()
    settings = server_settings(tmp_path, **{"server.max_top_k": 100})
    rag = make_rag(settings, engine)
    seen: list[int] = []
    search = rag.retriever.search

    def spy(queries, k):  # type: ignore[no-untyped-def]
        seen.append(k)
        return search(queries, k)

    rag.retriever.search = spy  # type: ignore[method-assign]
    with live_server(settings, rag) as srv:
        body = {"model": "rag", "messages": [Q], "top_k": 100, "max_tokens": 8000}
        r = httpx.post(srv.api + "/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    assert seen == [(8192 - 4096 - 312) // 150]  # half the window kept for the answer


def test_text_that_leaves_no_room_is_400_naming_the_limit(client: httpx.Client) -> None:
    systems = [{"role": "system", "content": "Be brief and clear. " * 199} for _ in range(8)]
    body = json.dumps({"model": "rag", "messages": [*systems, Q]}).encode()
    err = assert_openai_error(client.post("/chat/completions", content=body), 400)
    assert err["code"] == "context_length_exceeded" and err["param"] == "messages"
    assert "8192" in err["message"] and "engine.n_ctx" in err["message"]


def test_over_long_system_message_is_400(client: httpx.Client) -> None:
    system = {"role": "system", "content": "be brief. " * 1000}
    body = json.dumps({"model": "rag", "messages": [system, Q]}).encode()
    err = assert_openai_error(client.post("/chat/completions", content=body), 400)
    assert err["code"] == "input_too_long" and err["param"] == "messages.0.content"


def test_engine_context_overflow_is_400_not_503(tmp_path: Path) -> None:
    engine = ProbeEngine(fail_with=ContextLengthError("prompt is 9000 tokens, longer than 8192"))
    settings = server_settings(tmp_path)
    with live_server(settings, make_rag(settings, engine)) as srv:
        for stream in (False, True):
            body = {"model": "rag", "messages": [Q], "stream": stream}
            r = httpx.post(srv.api + "/chat/completions", json=body, timeout=30)
            if not stream:
                err = assert_openai_error(r, 400, "context_length_exceeded")
                assert "9000 tokens" in err["message"]
            else:
                events = [line for line in r.text.splitlines() if line.startswith("data: ")]
                error = json.loads(events[-2][6:])["error"]
                assert error["code"] == "context_length_exceeded" and events[-1] == "data: [DONE]"
