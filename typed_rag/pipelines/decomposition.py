"""REASON and INSTRUCTION: 2-5 single-aspect sub-queries, one RAG answer each, then aggregation.

Three engine rounds: the plan, every sub-answer in one batch, the aggregator.
``method.max_sub_queries`` shapes the plan;
``method.*`` grounding options shape the aggregation (see ``grounding``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from typed_rag.json_reply import read_string_list, string_list_schema
from typed_rag.messages import ANALYST_SYSTEM, Messages, chat
from typed_rag.method_settings import MethodOptions
from typed_rag.pipelines.base import Context, Final, Pipeline, plan_or_fallback
from typed_rag.pipelines.grounding import (
    anchor_queries,
    combine,
    options,
)
from typed_rag.pipelines.plain import answer_sub_queries, prepare_rag
from typed_rag.types import QuestionType

MIN_SUB_QUERIES = 2
MAX_SUB_QUERIES = 5

AGGREGATOR_SYSTEM = (
    "You combine answers. You receive an original question and several question-answer "
    "pairs; each question looks at one aspect of the original. You merge what they found "
    "into one concise, accurate answer to the original question."
)


@dataclass
class DecompositionPlan:
    sub_queries: list[str]

    title: ClassVar[str] = "sub_query_plan"
    example: ClassVar[str] = json.dumps(
        {"sub_queries": ["why do leaves change color", "what happens to chlorophyll in autumn"]}
    )

    def to_trace(self) -> dict[str, Any]:
        return {"sub_queries": self.sub_queries}

    @classmethod
    def describe(cls, trace: Mapping[str, Any]) -> list[str]:
        if not trace.get("sub_queries"):
            return []
        return ["plan: sub-queries:"] + [
            f"  {i}. {q}" for i, q in enumerate(trace["sub_queries"], 1)
        ]


def sub_query_schema(limit: int = MAX_SUB_QUERIES) -> dict[str, Any]:
    """The decomposition plan: 2 to ``limit`` sub-queries."""
    return string_list_schema(DecompositionPlan.title, "sub_queries", MIN_SUB_QUERIES, limit)


SUB_QUERY_SCHEMA: dict[str, Any] = sub_query_schema()


def parse_sub_queries(text: str, limit: int = MAX_SUB_QUERIES) -> DecompositionPlan:
    """2 to ``limit`` sub-queries; extra ones are cut (the first are kept)."""
    names = ("sub_queries", "subqueries", "queries", "multiple_sub_queries")
    return DecompositionPlan(read_string_list(text, names, MIN_SUB_QUERIES, limit))


_DECOMPOSE_KIND = {
    "REASON": (
        "a reason question: it asks why something is the case or what lies behind a concept "
        "or event",
        '"Why do cats purr?"',
        '{"sub_queries": ["what produces the purring sound in cats", "in which situations do '
        'cats purr", "what purring tells about a cat\'s health or mood"]}',
    ),
    "INSTRUCTION": (
        "an instruction question: it asks how to do something, as guidance or steps to follow",
        '"How do I fix a flat bicycle tyre?"',
        '{"sub_queries": ["tools needed to repair a bicycle puncture", "how to take the tyre '
        'off a bicycle wheel", "how to patch or replace an inner tube"]}',
    ),
}


def decomposition_plan_messages(question: str, question_type: str, limit: int = 5) -> Messages:
    """Split a reason or instruction question into 2-``limit`` sub-queries, each looking at
    one aspect of the question (the paper's Figures 13/14 reword the whole question instead:
    measured, not kept)."""
    key = question_type.upper() if question_type.upper() in _DECOMPOSE_KIND else "REASON"
    kind, example_q, example_a = _DECOMPOSE_KIND[key]
    steps = (
        "1. Break it into sub-queries that keep its intent but each look at a single "
        "aspect of it, worded differently from one another.\n"
        f"2. Write between 2 and {limit} distinct sub-queries, each usable on its own as a "
        "search query about the question's own subject (name the subject; no pronouns).\n\n"
    )
    user = (
        f"Act as a query analyst. The question below is {kind}.\n"
        f"{steps}"
        "### Output format\n"
        f'{{"sub_queries": [2 to {limit} strings]}}\n\n'
        "### Example\n"
        f"Question: {example_q}\n"
        f"Output: {example_a}\n\n"
        f"### Question\n{question}\n\n"
        "### Output\n"
    )
    return chat(ANALYST_SYSTEM, user)


def aggregation_messages(question: str, pairs: Sequence[tuple[str, str]]) -> Messages:
    """Merge the sub-query answers into one answer to the original question."""
    qa = "\n\n".join(
        f"Question {i}: {q}\nAnswer {i}: {a.strip()}" for i, (q, a) in enumerate(pairs, 1)
    )
    user = (
        "Use the question-answer pairs below to write a short, clear answer to the original "
        "question. Keep the citation numbers such as [2] that the answers use, next to the "
        "facts they support.\n\n"
        f"### Original question\n{question}\n\n"
        f"### Question-answer pairs\n{qa}\n\n"
        "### Answer\n"
    )
    return chat(AGGREGATOR_SYSTEM, user)


def plan_prompt(question_type: QuestionType) -> Callable[[str, MethodOptions], Messages]:
    """The plan prompt of ``question_type`` as the method options shape it."""
    return lambda question, opts: decomposition_plan_messages(
        question, question_type.value, opts.max_sub_queries
    )


async def prepare(ctx: Context, question_type: QuestionType) -> Final:
    opts = options(ctx)
    limit = opts.max_sub_queries
    plan = await plan_or_fallback(
        ctx,
        question_type.value.lower(),
        plan_prompt(question_type)(ctx.question, opts),
        sub_query_schema(limit),
        lambda text: parse_sub_queries(text, limit),
    )
    if plan is None:
        return await prepare_rag(ctx)
    plan.sub_queries = ctx.enforce("sub_queries", plan.sub_queries)
    ctx.trace.set_plan(plan.to_trace())
    queries = anchor_queries(ctx, plan.sub_queries)
    subs = await answer_sub_queries(ctx, queries)
    return await combine(
        ctx,
        subs,
        "aggregate",
        lambda kept: aggregation_messages(ctx.question, [(s.query, s.answer) for s in kept]),
    )


async def prepare_reason(ctx: Context) -> Final:
    return await prepare(ctx, QuestionType.REASON)


async def prepare_instruction(ctx: Context) -> Final:
    return await prepare(ctx, QuestionType.INSTRUCTION)


REASON = Pipeline(prepare_reason, DecompositionPlan, plan_prompt(QuestionType.REASON))
INSTRUCTION = Pipeline(
    prepare_instruction, DecompositionPlan, plan_prompt(QuestionType.INSTRUCTION)
)
