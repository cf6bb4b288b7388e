"""REASON and INSTRUCTION: 2-5 single-aspect sub-queries, one RAG answer each, then aggregation.

Three engine rounds: the plan, every sub-answer in one batch, the aggregator.
``method.max_sub_queries`` and ``method.sub_query_style`` shape the plan;
``method.*`` grounding options shape the aggregation (see ``grounding``).
"""

from __future__ import annotations

from typed_rag.pipelines.base import Context, Final
from typed_rag.pipelines.grounding import anchor_queries, combine, options
from typed_rag.pipelines.plain import answer_sub_queries, prepare_rag
from typed_rag.plans import parse_sub_queries, sub_query_schema
from typed_rag.prompts import decomposition_plan_messages
from typed_rag.types import QuestionType


async def prepare(ctx: Context, question_type: QuestionType) -> Final:
    opts = options(ctx)
    limit = opts.max_sub_queries
    messages = decomposition_plan_messages(
        ctx.question, question_type.value, limit, opts.sub_query_style
    )
    plan = await ctx.plan(
        "plan", messages, sub_query_schema(limit), lambda text: parse_sub_queries(text, limit)
    )
    if plan is None:
        attempts = 1 + ctx.settings.sampling.plan_retries
        ctx.fallback(
            f"{question_type.value.lower()}: plan unparseable after {attempts} attempts -> rag"
        )
        return await prepare_rag(ctx)
    plan.sub_queries = ctx.enforce("sub_queries", plan.sub_queries)
    ctx.set_plan(plan.to_trace())
    subs = await answer_sub_queries(ctx, anchor_queries(ctx, plan.sub_queries))
    return await combine(ctx, subs, "aggregate")


async def prepare_reason(ctx: Context) -> Final:
    return await prepare(ctx, QuestionType.REASON)


async def prepare_instruction(ctx: Context) -> Final:
    return await prepare(ctx, QuestionType.INSTRUCTION)
