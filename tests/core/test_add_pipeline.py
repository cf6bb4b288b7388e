"""Adding a pipeline is one module plus one line in the type table.

The toy pipeline below stands for a new module: it owns its plan model (with
its example reply and description), schema, parser, prompt and ``prepare``.
Registered with one line in ``TYPED``, it answers through ``TypedRAG`` on the
default fake engine, which replays its example plan, and its plan is
described for ``typed-rag ask`` -- nothing else was edited.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from typed_rag.engines.fake import scripted_responder
from typed_rag.json_reply import extract_json, lookup, string_list
from typed_rag.messages import ANALYST_SYSTEM, chat
from typed_rag.pipelines import TYPED, describe_plan, example_plans
from typed_rag.pipelines.base import Context, Final, Pipeline, plan_or_fallback
from typed_rag.pipelines.plain import prepare_rag, union_by_id
from typed_rag.pipelines.prompting import rag_messages
from typed_rag.types import QuestionType as T

Q = "Why do leaves change color in autumn?"


class toy:  # stands for a module: typed_rag/pipelines/toy.py
    """TOY: the topics of the question, one retrieval each, then the plain RAG prompt."""

    @dataclass
    class TopicPlan:
        topics: list[str]

        title: ClassVar[str] = "toy_topic_plan"
        example: ClassVar[str] = json.dumps({"topics": ["chlorophyll", "autumn leaves"]})

        def to_trace(self) -> dict[str, Any]:
            return {"toy_topics": self.topics}

        @classmethod
        def describe(cls, trace: Mapping[str, Any]) -> list[str]:
            if not trace.get("toy_topics"):
                return []
            return [f"plan: topics: {'; '.join(trace['toy_topics'])}"]

    SCHEMA: ClassVar[dict[str, Any]] = {
        "title": TopicPlan.title,
        "type": "object",
        "properties": {"topics": {"type": "array", "items": {"type": "string"}}},
        "required": ["topics"],
    }

    @staticmethod
    def parse(text: str) -> toy.TopicPlan:
        data = extract_json(text)
        value = lookup(data, "topics") if isinstance(data, dict) else data
        return toy.TopicPlan(string_list(value, "topics", 1, 3))

    @staticmethod
    async def prepare(ctx: Context) -> Final:
        messages = chat(
            ANALYST_SYSTEM, f"List the topics of this question as JSON.\n{ctx.question}"
        )
        plan = await plan_or_fallback(ctx, "toy", messages, toy.SCHEMA, toy.parse)
        if plan is None:
            return await prepare_rag(ctx)
        ctx.trace.set_plan(plan.to_trace())
        pool, sources = union_by_id(await ctx.retrieve(plan.topics, ctx.top_k), plan.topics)
        cited = ctx.citations.cite(pool[: ctx.top_k], sources[: ctx.top_k])
        return Final("answer", rag_messages(ctx.question, cited))

    PIPELINE = Pipeline(prepare, TopicPlan)


async def test_a_toy_pipeline_answers_after_one_line_in_the_type_table(monkeypatch, make_rag):
    monkeypatch.setitem(TYPED, T.FACTOID, toy.PIPELINE)  # the one line in the type table

    rag, engine = make_rag()  # the default fake engine: replays every registered example plan
    result = await rag.answer(Q, force_type=T.FACTOID)

    assert example_plans()["toy_topic_plan"] == toy.TopicPlan.example
    plans = [r for r in engine.calls if r.json_schema is not None]
    assert [r.json_schema["title"] for r in plans] == ["toy_topic_plan"]
    assert result.plan["toy_topics"] == ["chlorophyll", "autumn leaves"]
    assert result.fallbacks == []
    assert result.passages and {p.query for p in result.passages} <= {
        "chlorophyll",
        "autumn leaves",
    }
    assert result.answer == "A fake answer [1]." and result.citations == [1]
    assert describe_plan(result.plan) == ["plan: topics: chlorophyll; autumn leaves"]


async def test_a_toy_plan_that_never_parses_falls_back_to_rag_with_the_request_retries(
    monkeypatch, make_rag
):
    monkeypatch.setitem(TYPED, T.FACTOID, toy.PIPELINE)
    rag, engine = make_rag(scripted_responder(plans={"toy_topic_plan": "no plan here"}))

    result = await rag.answer(Q, force_type=T.FACTOID)
    assert result.fallbacks == ["toy: plan unparseable after 3 attempts -> rag"]
    assert result.passages and result.passages[0].query == Q  # plain RAG's query

    result = await rag.answer(Q, force_type=T.FACTOID, sampling={"plan_retries": 0})
    assert result.fallbacks == ["toy: plan unparseable after 1 attempts -> rag"]
