"""Outline-guided answering (``constraints.outline``): the outline drives retrieval and the answer."""

from __future__ import annotations

import json

import pytest

from typed_rag.engines.base import ChatRequest
from typed_rag.engines.fake import scripted_responder
from typed_rag.qtree.answering import OUTLINE_TOKENS
from typed_rag.qtree.planner import format_target, parse_planner_output
from typed_rag.qtree.prompts import planner_messages
from typed_rag.qtree.tree import TreeError
from typed_rag.types import QuestionType as T

Q = "Why do leaves change color in autumn? Skip chlorophyll, I want the pigments."
FOUND = json.dumps(
    {
        "question": "Why do leaves change color in autumn?",
        "include": ["pigments"],
        "exclude": ["chlorophyll"],
    }
)
OUTLINE = [
    "1. Which pigments colour autumn leaves?",
    "1.1. What are carotenoids?",
    "1.2. What are anthocyanins?",
    "1.3. Why do days shortening matter?",
]


def answer(reply: str):
    def respond(req: ChatRequest) -> str:
        user = req.messages[-1]["content"]
        if "the line 'Outline:'" in user:
            return reply
        return "Carotenoids and anthocyanins show [1]."

    return respond


def test_planner_target_round_trips_through_the_parser() -> None:
    text = format_target({"1": "A?", "1.1": "B?"}, OUTLINE, with_tree=True)
    assert text.splitlines()[:3] == ["1. A?", "1.1. B?", "Outline:"]
    assert parse_planner_output(text) == [line.split(". ", 1)[1] for line in OUTLINE]
    assert parse_planner_output("Outline:\n- a?\n- a?\n- b?") == ["a?", "b?"]
    assert "Request: " + Q in planner_messages(Q)[-1]["content"]


@pytest.mark.parametrize(
    ("reply", "queries"),
    [  # shapes the prompted 1.5B planner wrote in the outline-vs-cue run
        (
            "Outline:\n1. 1.1. Where is it?\n2. 1.1.1. Which country?",
            ["Where is it?", "Which country?"],
        ),
        ("Outline:\n**1.1. Where is it?**\n- `1.2` When?", ["Where is it?", "When?"]),
        (
            "Outline: 1. Where was it? 2. When did it end? 3) Why?",
            ["Where was it?", "When did it end?", "Why?"],
        ),
        ("Outline:\n1.1.\n1.1.1.\n1.2. Real query 2.5 times?", ["Real query 2.5 times?"]),
    ],
)
def test_planner_parser_takes_the_queries_out_of_untidy_replies(
    reply: str, queries: list[str]
) -> None:
    assert parse_planner_output(reply) == queries


def test_planner_reply_with_only_numbers_has_no_outline() -> None:
    with pytest.raises(TreeError, match="empty"):
        parse_planner_output("Outline:\n1.1.\n1.1.1.\n")


async def test_outline_drives_retrieval_and_the_answer(make_rag, settings, retriever) -> None:
    settings.constraints.mode = "always"
    settings.constraints.outline = True
    reply = "1. Leaves?\n1.1. Colour?\nOutline:\n" + "\n".join(OUTLINE)
    rag, engine = make_rag(scripted_responder({"coverage_constraints": FOUND}, answer(reply)))
    result = await rag.answer(Q, force_type=T.REASON)

    queries = [line.split(". ", 1)[1] for line in OUTLINE]
    assert result.plan["outline"] == queries and result.plan["planner"] == "prompt"
    assert [c.step for c in result.calls] == ["constraints", "outline", "answer"]
    planner_req = engine.batches[1][0]
    assert "Request: " + Q in planner_req.messages[-1]["content"]  # sees the instruction
    assert planner_req.max_tokens == OUTLINE_TOKENS > settings.sampling.plan_max_tokens
    searched = [q for qs, _ in retriever.searches for q in qs]
    assert searched == queries
    final = engine.batches[2][0].messages[-1]["content"]
    assert "### Outline\n1. Which pigments colour autumn leaves?" in final
    assert "#### For section 2: What are carotenoids?" in final
    assert "Leave out completely (do not discuss or mention): chlorophyll" in final
    assert result.passages and all(p.query in queries for p in result.passages)
    assert result.answer.startswith("Carotenoids")


async def test_no_outline_falls_back_to_rag(make_rag, settings) -> None:
    settings.constraints.mode = "always"
    settings.constraints.outline = True
    rag, _ = make_rag(scripted_responder({"coverage_constraints": FOUND}, answer("no idea")))
    result = await rag.answer(Q, force_type=T.REASON)
    assert any(f.startswith("outline: planner gave no outline") for f in result.fallbacks)
    assert "outline" not in result.plan and result.answer


async def test_outline_off_or_no_constraints_leave_the_pipelines_alone(make_rag, settings) -> None:
    settings.constraints.mode = "always"
    rag, engine = make_rag(scripted_responder({"coverage_constraints": FOUND}))
    result = await rag.answer(Q, force_type=T.REASON)
    assert "outline" not in result.plan and "sub_queries" in result.plan
    settings.constraints.outline = True
    empty = json.dumps({"question": Q, "include": [], "exclude": []})
    rag, engine = make_rag(scripted_responder({"coverage_constraints": empty}))
    result = await rag.answer(Q, force_type=T.REASON)
    assert "outline" not in result.plan
