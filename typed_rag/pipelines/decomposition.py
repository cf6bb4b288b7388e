"""REASON and INSTRUCTION: 2-5 single-aspect sub-queries, one RAG answer each, then aggregation.

Three engine rounds: the plan, every sub-answer in one batch, the aggregator.
"""

from __future__ import annotations

from typed_rag.pipelines.base import Context, Final
from typed_rag.pipelines.plain import answer_sub_queries, prepare_rag
from typed_rag.plans import SUB_QUERY_SCHEMA, parse_sub_queries
from typed_rag.prompts import aggregation_messages, decomposition_plan_messages
from typed_rag.types import QuestionType


async def prepare(ctx: Context, question_type: QuestionType) -> Final:
    messages = decomposition_plan_messages(ctx.question, question_type.value)
    plan = await ctx.plan("plan", messages, SUB_QUERY_SCHEMA, parse_sub_queries)
    if plan is None:
        attempts = 1 + ctx.settings.sampling.plan_retries
        ctx.fallback(
            f"{question_type.value.lower()}: plan unparseable after {attempts} attempts -> rag"
        )
        return await prepare_rag(ctx)
    plan.sub_queries = ctx.enforce("sub_queries", plan.sub_queries)
    ctx.set_plan(plan.to_trace())
    subs = await answer_sub_queries(ctx, plan.sub_queries)
    pairs = [(s.query, s.answer) for s in subs]
    return Final("aggregate", aggregation_messages(ctx.question, pairs))


async def prepare_reason(ctx: Context) -> Final:
    return await prepare(ctx, QuestionType.REASON)


async def prepare_instruction(ctx: Context) -> Final:
    return await prepare(ctx, QuestionType.INSTRUCTION)
