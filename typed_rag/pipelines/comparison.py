"""COMPARISON: keywords per compared item -> top-K each -> union by id -> rerank -> top-K.

The plan also says what kind of comparison is asked (differences, similarities
or superiority); the final prompt is told both the kind and the items.
"""

from __future__ import annotations

from typed_rag.pipelines.base import Context, Final
from typed_rag.pipelines.grounding import guide
from typed_rag.pipelines.plain import prepare_rag, union_by_id
from typed_rag.plans import COMPARISON_SCHEMA, parse_comparison
from typed_rag.prompts import comparison_messages, comparison_plan_messages


async def prepare(ctx: Context) -> Final:
    plan = await ctx.plan(
        "plan", comparison_plan_messages(ctx.question), COMPARISON_SCHEMA, parse_comparison
    )
    if plan is None:
        attempts = 1 + ctx.settings.sampling.plan_retries
        ctx.fallback(f"comparison: plan unparseable after {attempts} attempts -> rag")
        return await prepare_rag(ctx)
    plan.keywords = ctx.enforce("keywords", plan.keywords, add_missing=False)
    ctx.set_plan(plan.to_trace())
    if not plan.is_compare:
        ctx.fallback("comparison: the plan says the question is not a comparison -> rag")
        return await prepare_rag(ctx)

    hit_lists = await ctx.retrieve(plan.keywords, ctx.top_k)
    pool, sources = union_by_id(hit_lists, plan.keywords)
    if not pool:
        ctx.fallback(
            "retrieval: no passages for the comparison keywords -> answered without passages"
        )
    source_of = {p.id: q for p, q in zip(pool, sources, strict=True)}
    ranked = await ctx.rerank(ctx.question, pool, ctx.top_k)
    cited = ctx.cite(ranked, [source_of[p.id] for p in ranked])
    messages = comparison_messages(ctx.question, plan.compare_type, plan.keywords, cited)
    return Final("answer", await guide(ctx, messages))
