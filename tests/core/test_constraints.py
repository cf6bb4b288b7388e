"""Coverage-conditioned questions: detection, plan enforcement, prompts and the trace."""

from __future__ import annotations

import json

import pytest

from tests.core.conftest import FixedClassifier
from typed_rag.constraints import (
    Constraints,
    enforce,
    has_cue,
    mentions,
    parse_constraints,
    with_instructions,
)
from typed_rag.engines.base import ChatRequest
from typed_rag.engines.fake import scripted_responder
from typed_rag.json_reply import PlanError
from typed_rag.pipelines.prompting import rag_messages
from typed_rag.types import QuestionType as T

Q = "Why do leaves change color in autumn? Skip chlorophyll, I mainly want the pigments."
FOUND = json.dumps(
    {
        "question": "Why do leaves change color in autumn?",
        "include": ["pigments"],
        "exclude": ["chlorophyll"],
    }
)


def user_text(req: ChatRequest) -> str:
    return req.messages[-1]["content"]


def test_cue_words_gate_detection() -> None:
    assert has_cue(Q)
    assert has_cue("Explain generative AI, but leave out recent trends.")
    assert not has_cue("Why do leaves change color in autumn?")


def test_parse_constraints_accepts_variants_and_drops_contradictions() -> None:
    c = parse_constraints(
        'Sure: {"question": "Explain AI", "included": "history", "exclude": ["trends", "History"]}',
        "orig",
    )
    assert c == Constraints("Explain AI", [], ["trends"])  # "history" listed both ways
    assert parse_constraints('{"include": [], "exclude": []}', "orig") == Constraints("orig")
    with pytest.raises(PlanError):
        parse_constraints('{"question": "q", "include": 3, "exclude": []}', "orig")
    with pytest.raises(PlanError):
        parse_constraints("no json here", "orig")


def test_mentions_needs_the_topic_words_not_just_one() -> None:
    assert mentions("What happens to chlorophyll in autumn", "chlorophyll")
    assert mentions("recent trends in generative models", "recent trend")
    assert not mentions("the history of generative models", "recent trends")
    assert mentions(
        "economic and military causes of the fall", "military, economic and social causes"
    )
    assert not mentions("economic decline", "military, economic and social causes")


def test_enforce_drops_excluded_adds_missing_and_never_empties() -> None:
    c = Constraints("Why do leaves change color?", ["pigments"], ["chlorophyll"])
    done = enforce(["chlorophyll breakdown", "day length and trees"], c)
    assert done.items == ["day length and trees", "pigments: Why do leaves change color?"]
    assert done.dropped == ["chlorophyll breakdown"] and len(done.added) == 1
    only = enforce(["chlorophyll breakdown"], Constraints("q?", [], ["chlorophyll"]))
    assert only.items == ["q?"]
    assert enforce(["leaf pigments"], c).added == []  # already covered


def test_instructions_go_before_the_closing_heading() -> None:
    c = Constraints("q", ["pigments"], ["chlorophyll"])
    msgs = with_instructions(rag_messages("q", []), c)
    text = user_text(ChatRequest(messages=msgs))
    assert text.index("Make sure to cover: pigments") < text.rindex("### Answer")
    assert "Leave out completely (do not discuss or mention): chlorophyll" in text
    assert with_instructions(msgs, None) is msgs


async def test_detected_constraints_shape_retrieval_plan_prompts_and_trace(
    make_rag, settings, retriever
) -> None:
    settings.constraints.mode = "cue"
    plan = json.dumps({"sub_queries": ["chlorophyll breakdown in leaves", "days shorten trees"]})
    responder = scripted_responder({"coverage_constraints": FOUND, "sub_query_plan": plan})
    classifier = FixedClassifier(T.REASON)
    rag, engine = make_rag(responder, classifier=classifier)
    result = await rag.answer(Q)

    assert result.question == Q and result.type == "REASON"
    assert result.constraints is not None and result.constraints["detected"]
    assert result.constraints["exclude"] == ["chlorophyll"]
    assert result.constraints["sub_queries"] == {
        "dropped": ["chlorophyll breakdown in leaves"],
        "added": ["pigments: Why do leaves change color in autumn?"],
    }
    assert result.plan["sub_queries"] == [
        "days shorten trees",
        "pigments: Why do leaves change color in autumn?",
    ]
    first, plan_req = engine.batches[0][0], engine.batches[1][0]
    assert first.json_schema["title"] == "coverage_constraints"
    assert "Leave out completely" in user_text(plan_req)  # the planner is told
    assert "Skip chlorophyll" not in user_text(plan_req)  # ... and sees the core question
    sub_answers = engine.batches[2]
    assert all("Make sure to cover" not in user_text(r) for r in sub_answers)
    assert all("chlorophyll" in user_text(r).split("### The asker")[1] for r in sub_answers)
    final = user_text(engine.batches[3][0])
    assert "Make sure to cover: pigments" in final
    # Retrieval used the core question's sub-queries, never the instruction text.
    searched = [q for queries, _ in retriever.searches for q in queries]
    assert all("Skip" not in q for q in searched)


async def test_excluded_passages_go_last_in_retrieval(make_rag, settings, retriever) -> None:
    settings.constraints.mode = "always"
    found = json.dumps(
        {"question": "Why do leaves change color?", "include": [], "exclude": ["chlorophyll"]}
    )
    rag, _ = make_rag(scripted_responder({"coverage_constraints": found}))
    result = await rag.answer("Why do leaves change color?", force_type=T.EVIDENCE_BASED, top_k=2)
    # BM25 ranks "Autumn leaf color" (which names chlorophyll) first; it is demoted
    # behind the only other match, and used only because nothing else was found.
    assert [p.title for p in result.passages] == ["Tea", "Autumn leaf color"]
    assert retriever.searches[-1][1] == 4  # twice top_k fetched, then demoted


async def test_cue_mode_skips_the_detector_and_off_changes_nothing(make_rag, settings) -> None:
    settings.constraints.mode = "cue"
    rag, engine = make_rag()
    result = await rag.answer("Why do leaves change color in autumn?", force_type=T.REASON)
    assert result.constraints is None
    assert all(
        r.json_schema is None or r.json_schema["title"] != "coverage_constraints"
        for batch in engine.batches
        for r in batch
    )
    settings.constraints.mode = "off"
    result = await rag.answer(Q, force_type=T.REASON)
    assert result.constraints is None and "Skip chlorophyll" in user_text(engine.batches[-1][0])


async def test_unparseable_detector_output_is_a_recorded_fallback(make_rag, settings) -> None:
    settings.constraints.mode = "always"
    rag, _ = make_rag(scripted_responder({"coverage_constraints": "nope"}))
    result = await rag.answer(Q, force_type=T.EVIDENCE_BASED)
    assert result.constraints == {
        "detected": False,
        "attempts": 3,
        "errors": result.constraints["errors"],
    }
    assert any(f.startswith("constraints:") for f in result.fallbacks)
    assert result.answer  # answered with the question as is


async def test_debate_perspective_on_an_excluded_subtopic_is_dropped(make_rag, settings) -> None:
    settings.constraints.mode = "always"
    found = json.dumps({"question": "Is nuclear power good?", "include": [], "exclude": ["waste"]})
    debate = json.dumps(
        {
            "debate_topic": "nuclear power",
            "dist_opinion": ["waste concerns", "climate benefits", "cost"],
            "sub_queries": {
                "waste concerns": "nuclear waste storage",
                "climate benefits": "nuclear power low carbon",
                "cost": "nuclear construction costs",
            },
        }
    )
    rag, _ = make_rag(scripted_responder({"coverage_constraints": found, "debate_plan": debate}))
    result = await rag.answer("Is nuclear power good? Leave out the waste.", force_type=T.DEBATE)
    assert [s.perspective for s in result.sub_answers] == ["climate benefits", "cost"]
