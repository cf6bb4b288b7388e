"""Every OpenAI chat request field is honoured, rejected (400 naming it), or reported as ignored.

The field list comes from the installed ``openai`` SDK, so a field added
upstream fails :func:`test_every_openai_field_has_one_policy` until it is
classified here and in the README table.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import httpx
import openai
import pytest
from openai.types.chat import completion_create_params

from serving.protocol import FIELD_POLICY, TYPED_RAG_FIELDS, ChatCompletionRequest
from tests.serving.conftest import LiveServer, ProbeEngine, live_server, make_rag, server_settings
from tests.serving.test_errors import assert_openai_error
from typed_rag.engines.base import ChatRequest, ChatResult, StreamDelta

REPO = Path(__file__).resolve().parents[2]
Q = {"role": "user", "content": "Why do leaves change color in autumn?"}

# A value that exercises each rejected / ignored field (a new field needs one).
REJECTED_SAMPLES: dict[str, object] = {
    "n": 2,
    "logprobs": True,
    "top_logprobs": 3,
    "logit_bias": {"50256": -100},
    "tool_choice": "required",
    "function_call": {"name": "get_weather"},
    "audio": {"voice": "alloy", "format": "mp3"},
    "modalities": ["text", "audio"],
    "web_search_options": {},
    "moderation": {"policy": {"input": {"mode": "block"}}},
}
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
IGNORED_SAMPLES: dict[str, object] = {
    "tools": [TOOL],
    "functions": [{"name": "get_weather", "parameters": {}}],
    "parallel_tool_calls": True,
    "presence_penalty": 0.5,
    "frequency_penalty": 0.5,
    "prediction": {"type": "content", "content": "x"},
    "user": "u-1",
    "metadata": {"team": "a"},
    "store": True,
    "service_tier": "auto",
    "prompt_cache_key": "k",
    "prompt_cache_options": {"ttl": "1h"},
    "prompt_cache_retention": "24h",
    "safety_identifier": "s",
    "reasoning_effort": "low",
    "verbosity": "low",
}


def openai_fields() -> set[str]:
    """Field names of both request shapes (``stream`` is only in their subclasses)."""
    out: set[str] = set()
    for params in (
        completion_create_params.CompletionCreateParamsNonStreaming,
        completion_create_params.CompletionCreateParamsStreaming,
    ):
        out |= set(params.__required_keys__) | set(params.__optional_keys__)
    return out


class CuttingEngine(ProbeEngine):
    """Honours ``max_tokens`` (one word per token) and reports ``length`` when it cuts."""

    async def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        out = await super().generate(requests)
        for req, res in zip(requests, out, strict=True):
            words = res.text.split()
            if req.json_schema is None and len(words) > req.max_tokens:
                res.text = " ".join(words[: req.max_tokens])
                res.finish_reason = "length"
        return out

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:  # type: ignore[override]
        (res,) = await self.generate([request])
        yield StreamDelta(text=res.text)
        yield StreamDelta(text="", result=res)


@pytest.fixture(scope="module")
def engine() -> CuttingEngine:
    return CuttingEngine(responder=lambda r: "{}" if r.json_schema else "one two three [1].")


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, engine: CuttingEngine) -> Iterator[LiveServer]:
    settings = server_settings(tmp_path_factory.mktemp("fields"))
    with live_server(settings, make_rag(settings, engine)) as server:
        yield server


def post(srv: LiveServer, **fields: object) -> httpx.Response:
    body = {"model": "rag", "messages": [Q], **fields}
    return httpx.post(srv.api + "/chat/completions", json=body, timeout=30)


def test_every_openai_field_has_one_policy() -> None:
    fields = openai_fields()
    assert fields - set(FIELD_POLICY) == set(), "classify these in serving.protocol.FIELD_POLICY"
    assert set(FIELD_POLICY) - fields == set(), "not OpenAI fields (any more)"
    declared = set(ChatCompletionRequest.model_fields)
    assert fields <= declared  # each is validated (and in the OpenAPI schema)
    assert set(TYPED_RAG_FIELDS) <= declared and not set(TYPED_RAG_FIELDS) & fields
    classes = {name: cls for name, (cls, _) in FIELD_POLICY.items()}
    assert set(classes.values()) == {"honoured", "rejected", "ignored"}
    assert {n for n, c in classes.items() if c == "rejected"} == set(REJECTED_SAMPLES)
    assert {n for n, c in classes.items() if c == "ignored"} == set(IGNORED_SAMPLES)


def test_readme_table_lists_every_field() -> None:
    readme = (REPO / "docs" / "serving.md").read_text()
    for name, (cls, _) in FIELD_POLICY.items():
        assert f"| `{name}` | {cls} |" in readme, name


@pytest.mark.parametrize("field", sorted(REJECTED_SAMPLES))
def test_rejected_fields_are_400_naming_the_field(srv: LiveServer, field: str) -> None:
    err = assert_openai_error(post(srv, **{field: REJECTED_SAMPLES[field]}), 400)
    assert err["param"] == field, err


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("n", 1),
        ("logprobs", False),
        ("tool_choice", "none"),
        ("tool_choice", "auto"),
        ("logit_bias", {}),
        ("modalities", ["text"]),
    ],
)
def test_neutral_values_of_rejected_fields_are_accepted(
    srv: LiveServer, field: str, value: object
) -> None:
    r = post(srv, **{field: value})
    assert r.status_code == 200, r.text
    assert field not in r.json()["typed_rag"]["ignored_params"]


def test_ignored_and_unknown_fields_are_reported(srv: LiveServer) -> None:
    r = post(srv, **IGNORED_SAMPLES, my_extension=1)
    assert r.status_code == 200, r.text
    ignored = r.json()["typed_rag"]["ignored_params"]
    assert sorted(ignored) == sorted([*IGNORED_SAMPLES, "my_extension"])
    assert post(srv).json()["typed_rag"]["ignored_params"] == []


def final_call(engine: ProbeEngine) -> ChatRequest:
    return engine.calls[-1]


def test_stop_reaches_the_final_generation(srv: LiveServer, engine: CuttingEngine) -> None:
    assert post(srv, stop=["\n\n", "END"]).status_code == 200
    assert final_call(engine).stop == ["\n\n", "END"]
    assert post(srv, stop="END").status_code == 200
    assert final_call(engine).stop == ["END"]
    assert_openai_error(post(srv, stop=["a", "b", "c", "d", "e"]), 400)


def test_system_message_reaches_the_final_generation(
    srv: LiveServer, engine: CuttingEngine
) -> None:
    system = {"role": "system", "content": "Answer only in French."}
    developer = {"role": "developer", "content": "Be brief."}
    r = httpx.post(
        srv.api + "/chat/completions",
        json={"model": "rag", "messages": [system, developer, Q]},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    prompt = final_call(engine).messages[0]["content"]
    assert "Answer only in French." in prompt and "Be brief." in prompt
    assert final_call(engine).messages[-1]["content"].count("leaves change color") >= 1


def test_response_format_json_object(srv: LiveServer, engine: CuttingEngine) -> None:
    r = post(srv, response_format={"type": "json_object"})
    assert r.status_code == 200, r.text
    call = final_call(engine)
    assert call.json_schema == {"type": "object"}
    assert "JSON" in call.messages[0]["content"]
    r = post(srv, response_format={"type": "text"})
    assert r.status_code == 200 and final_call(engine).json_schema is None


def test_response_format_json_schema(srv: LiveServer, engine: CuttingEngine) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
        "required": ["answer"],
    }
    fmt = {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
    assert post(srv, response_format=fmt).status_code == 200
    assert final_call(engine).json_schema == schema
    err = assert_openai_error(post(srv, response_format={"type": "json_schema"}), 400)
    assert err["param"] == "response_format.json_schema"
    assert_openai_error(post(srv, response_format={"type": "yaml"}), 400)
    # a regex escape llama.cpp's grammars lack: a clear 400, not a crashed server
    digits = {"type": "object", "properties": {"n": {"type": "string", "pattern": "^\\d+$"}}}
    bad = {"type": "json_schema", "json_schema": {"name": "n", "schema": digits}}
    err = assert_openai_error(post(srv, response_format=bad), 400)
    assert err["param"] == "response_format.json_schema.schema" and "[0-9]" in err["message"]


def test_finish_reason_is_length_when_max_tokens_cut_the_answer(srv: LiveServer) -> None:
    client = openai.OpenAI(base_url=srv.api, api_key="x", max_retries=0)
    cut = client.chat.completions.create(model="rag", messages=[Q], max_tokens=1)  # type: ignore[list-item]
    assert cut.choices[0].message.content == "one"
    assert cut.choices[0].finish_reason == "length"
    whole = client.chat.completions.create(model="rag", messages=[Q], max_tokens=50)  # type: ignore[list-item]
    assert whole.choices[0].finish_reason == "stop"
    stream = client.chat.completions.create(
        model="rag",
        messages=[Q],  # type: ignore[list-item]
        max_tokens=2,
        stream=True,
    )
    reasons = [c.choices[0].finish_reason for c in stream if c.choices]
    assert reasons[-1] == "length"


def test_seed_of_any_int64_is_accepted(srv: LiveServer, engine: CuttingEngine) -> None:
    assert post(srv, seed=2**63 - 1).status_code == 200
    assert post(srv, seed=-5).status_code == 200
    assert 0 <= final_call(engine).seed < 2**32 + 16
    assert_openai_error(post(srv, seed=2**64), 400)


def test_json_bodies_round_trip_through_the_sdk(srv: LiveServer) -> None:
    client = openai.OpenAI(base_url=srv.api, api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(model="rag", messages=[Q], logprobs=True)  # type: ignore[list-item]
    assert exc.value.param == "logprobs"  # type: ignore[attr-defined]
    resp = client.chat.completions.create(
        model="rag",
        messages=[Q],  # type: ignore[list-item]
        tools=[TOOL],  # type: ignore[list-item]
        tool_choice="auto",
    )
    extra = json.loads(resp.model_dump_json())["typed_rag"]
    assert extra["ignored_params"] == ["tools"]
