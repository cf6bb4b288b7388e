"""Progress chunks in the OpenAI stream: what a typed question is doing before its answer.

Each is an ordinary ``chat.completion.chunk`` with an empty ``delta.content``
and a top-level ``typed_rag`` object that has an ``event`` key. Checked with the
real ``openai`` SDK (text unchanged, events easy to skip) and a raw httpx SSE
reader (the wire format itself).
"""

from __future__ import annotations

import json
import time

import httpx
import openai

from tests.serving.conftest import ProbeEngine

QUESTION = "Why do leaves change color in autumn?"


def test_openai_sdk_streams_the_same_text_and_the_events_are_easy_to_skip(serve) -> None:
    with serve(ProbeEngine(token_delay_s=0.01)) as srv:
        client = openai.OpenAI(base_url=srv.api, api_key="unused", max_retries=0)
        whole = client.chat.completions.create(
            model="typed-rag", messages=[{"role": "user", "content": QUESTION}]
        )
        chunks = list(
            client.chat.completions.create(
                model="typed-rag",
                messages=[{"role": "user", "content": QUESTION}],
                stream=True,
            )
        )
    # what any OpenAI client does: join delta.content
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content == "A fake answer [1]."
    # the events: chunks whose typed_rag has an "event"; the last typed_rag is the full trace
    extras = [getattr(c, "typed_rag", None) for c in chunks]
    events = [x for x in extras if x is not None and "event" in x]
    assert [e["event"] for e in events] == [
        "type",
        "plan",
        "sources",
        "sources",
        "sub_answer",
        "sub_answer",
        "answer",
    ]
    # each sub-query's sources as soon as its retrieval ends, before any sub-answer
    found = [p for e in events if e["event"] == "sources" for p in e["passages"]]
    assert found and all(p["citation"] >= 1 and p["title"] and p["text"] for p in found)
    events = [e for e in events if e["event"] != "sources"]
    assert events[0]["type"] == "REASON" and events[0]["probabilities"]["REASON"] > 0.5
    assert events[1]["plan"]["sub_queries"] == [
        "why do leaves change color",
        "what happens to chlorophyll in autumn",
    ]
    # (an anchored sub-query is searched as "<sub-query> (context: <question>)")
    assert {
        e["query"].split(" (context: ")[0] for e in events if e["event"] == "sub_answer"
    } == set(events[1]["plan"]["sub_queries"])
    for c in chunks:
        if getattr(c, "typed_rag", None) and "event" in c.typed_rag:  # type: ignore[attr-defined]
            assert c.choices[0].delta.content == "" and c.choices[0].finish_reason is None
    final = chunks[-1].typed_rag  # type: ignore[attr-defined]
    assert "event" not in final and final["type"] == "REASON" and len(final["sub_answers"]) == 2
    # every event arrives before the first token of the answer
    first_text = next(i for i, c in enumerate(chunks) if c.choices and c.choices[0].delta.content)
    last_event = max(i for i, x in enumerate(extras) if x is not None and "event" in x)
    assert last_event < first_text


def sse(srv, body: dict) -> list[tuple[float, dict | str]]:
    """(seconds since sending, parsed data) for each SSE data line."""
    out: list[tuple[float, dict | str]] = []
    t0 = time.perf_counter()
    with httpx.stream("POST", srv.api + "/chat/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                data = line[len("data: ") :]
                out.append(
                    (time.perf_counter() - t0, data if data == "[DONE]" else json.loads(data))
                )
    return out


def test_raw_sse_wire_format_and_first_event_before_the_slow_plan(serve) -> None:
    # every engine call takes 1 s: the type event must not wait for any of them
    with serve(ProbeEngine(delay_s=1.0)) as srv:
        body = {
            "model": "typed-rag",
            "messages": [{"role": "user", "content": QUESTION}],
            "stream": True,
        }
        events = sse(srv, body)
    assert events[-1][1] == "[DONE]"
    chunks = [d for _, d in events[:-1]]
    assert all(isinstance(c, dict) and c["object"] == "chat.completion.chunk" for c in chunks)
    progress = [(t, c) for t, c in events[:-1] if "event" in c.get("typed_rag", {})]  # type: ignore[union-attr]
    kinds = [c["typed_rag"]["event"] for _, c in progress]  # type: ignore[index]
    assert kinds[:2] == ["type", "plan"] and kinds[-1] == "answer"
    first_t, first = progress[0]
    assert first["typed_rag"]["event"] == "type"  # type: ignore[index]
    assert first_t < 0.9  # before the 1 s plan call could have finished
    assert first["typed_rag"]["elapsed_s"] < 0.9  # type: ignore[index]
    for _, c in progress:
        assert c["choices"] == [{"index": 0, "delta": {"content": ""}}]  # type: ignore[index]
        assert set(c["typed_rag"]) >= {"event", "elapsed_s"}  # type: ignore[arg-type]
    plan_t = progress[1][0]
    answer_t = progress[-1][0]
    text_t = next(t for t, c in events[:-1] if c["choices"][0]["delta"].get("content"))  # type: ignore[index,union-attr]
    # each event is sent when its stage is reached: the plan after its 1 s call, the answer
    # before its own 1 s call, whose text follows
    assert plan_t >= 0.9 and text_t - answer_t >= 0.9


def test_progress_events_can_be_turned_off(serve) -> None:
    with serve(ProbeEngine()) as srv:
        body = {
            "model": "typed-rag",
            "messages": [{"role": "user", "content": QUESTION}],
            "stream": True,
            "progress_events": False,
        }
        events = sse(srv, body)
    extras = [d.get("typed_rag") for _, d in events[:-1] if isinstance(d, dict)]
    assert [x for x in extras if x is not None and "event" in x] == []
    assert extras[-1] is not None and extras[-1]["type"] == "REASON"
