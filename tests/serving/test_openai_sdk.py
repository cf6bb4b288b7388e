"""The real ``typed-rag serve`` in a subprocess, called with the unmodified ``openai`` SDK.

The server is built only from settings, as a user runs it: the fake engine
backend over a BM25 index of the tiny corpus built by ``typed-rag index build``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.conftest import TINY_PASSAGES, write_tsv
from tests.serving.conftest import cli_server

QUESTION = "Why do leaves change color in autumn?"


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("cli-server")
    corpus = write_tsv(tmp / "tiny.tsv", TINY_PASSAGES)
    with cli_server(tmp, corpus) as url:
        yield url


@pytest.fixture
def client(server_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server_url + "/v1", api_key="unused", max_retries=0)


def test_completion(client: openai.OpenAI) -> None:
    resp = client.chat.completions.create(
        model="typed-rag",
        messages=[
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": QUESTION},
        ],
        seed=7,
    )
    assert resp.object == "chat.completion"
    assert resp.choices[0].message.role == "assistant"
    assert resp.choices[0].message.content == "A fake answer [1]."
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage is not None and resp.usage.total_tokens > 0
    info = resp.typed_rag  # type: ignore[attr-defined]  # kept by the SDK as an extra field
    assert info["mode"] == "typed-rag"
    assert info["type"] is not None
    citations = info["citations"]
    assert citations, info
    assert [c["citation"] for c in citations] == list(range(1, len(citations) + 1))
    ids = {pid for pid, _, _ in TINY_PASSAGES}
    for c in citations:
        assert c["id"] in ids and c["title"] and c["snippet"]
    # BM25 over the tiny corpus puts the autumn passage first for this question
    assert citations[0]["id"] in {"p1", "p2"}
    assert info["timings"]["total"] > 0


def test_streamed_completion_joins_to_the_final_text(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(
        model="rag", messages=[{"role": "user", "content": QUESTION}]
    )
    stream = client.chat.completions.create(
        model="rag",
        messages=[{"role": "user", "content": QUESTION}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert last.usage is not None and last.usage.completion_tokens > 0
    info = last.typed_rag  # type: ignore[attr-defined]
    assert info["mode"] == "rag" and info["citations"]
    # before the last chunk, typed_rag only marks progress chunks (empty content + an event)
    for c in chunks[:-1]:
        extra = getattr(c, "typed_rag", None)
        assert extra is None or ("event" in extra and not c.choices[0].delta.content)


def test_trace_on_request(client: openai.OpenAI) -> None:
    resp = client.chat.completions.create(
        model="typed-rag",
        messages=[{"role": "user", "content": QUESTION}],
        extra_body={"include_trace": True, "force_type": "reason", "top_k": 2},
    )
    info = resp.typed_rag  # type: ignore[attr-defined]
    assert info["type"] == "REASON" and info["type_source"] == "forced"
    trace = info["trace"]
    assert trace["question"] == QUESTION
    assert {c["step"] for c in trace["calls"]} >= {"plan"}
    assert all(len(p["text"]) > 0 for p in trace["passages"])


def test_models_list(client: openai.OpenAI) -> None:
    models = client.models.list()
    assert sorted(m.id for m in models.data) == ["llm", "rag", "typed-rag"]


def test_unknown_model_is_bad_request(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": QUESTION}]
        )
    assert info.value.code == "model_not_found"
    assert "gpt-4o" in info.value.message


def test_health_and_metrics(server_url: str, client: openai.OpenAI) -> None:
    health = httpx.get(server_url + "/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    client.chat.completions.create(model="llm", messages=[{"role": "user", "content": QUESTION}])
    text = httpx.get(server_url + "/metrics").text
    assert 'typed_rag_requests_total{mode="llm",status="200"}' in text
    assert "typed_rag_request_latency_seconds_bucket" in text
    assert 'typed_rag_tokens_total{kind="completion"}' in text
    assert "typed_rag_queue_depth" in text


def test_serve_reports_a_missing_index(tmp_path: Path) -> None:
    """A broken setup ends the server with a message naming the problem, not a hang."""
    import subprocess
    import sys

    from tests.serving.conftest import REPO, free_port

    config = tmp_path / "c.toml"
    config.write_text(
        f'home = "{tmp_path}"\n[retrieval]\nindex_dir = "{tmp_path / "no-index"}"\n'
        '[engine]\nbackend = "fake"\n[server]\nui = false\n'
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "--config",
            str(config),
            "serve",
            "--port",
            str(free_port()),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "no-index" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr.split("typed-rag: error:")[-1]
