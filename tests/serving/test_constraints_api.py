"""Coverage constraints found in a question are reported to an OpenAI client."""

from __future__ import annotations

import json

import openai

from tests.serving.conftest import ProbeEngine
from typed_rag.engines.fake import scripted_responder


def test_detected_constraints_reach_the_typed_rag_object(serve) -> None:
    found = json.dumps(
        {"question": "Why do leaves change color?", "include": [], "exclude": ["chlorophyll"]}
    )
    engine = ProbeEngine(scripted_responder({"coverage_constraints": found}))
    with serve(engine=engine, **{"constraints.mode": "cue"}) as srv:
        client = openai.OpenAI(base_url=srv.api, api_key="unused", max_retries=0)
        question = "Why do leaves change color? Skip chlorophyll."
        resp = client.chat.completions.create(
            model="typed-rag", messages=[{"role": "user", "content": question}]
        )
        plain = client.chat.completions.create(
            model="typed-rag", messages=[{"role": "user", "content": "Why is the sky blue?"}]
        )
    info = resp.typed_rag  # type: ignore[attr-defined]
    assert info["constraints"]["detected"] is True
    assert info["constraints"]["exclude"] == ["chlorophyll"]
    assert info["constraints"]["question"] == "Why do leaves change color?"
    assert plain.typed_rag.get("constraints") is None  # type: ignore[attr-defined]  # no cue
