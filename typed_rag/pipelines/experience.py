"""EXPERIENCE: keywords -> a wide pool for the question -> reranked against the keywords -> top-K.

The keywords say which experiences the asker wants; reranking a wider pool by
them keeps passages that match that intent, then the plain RAG prompt answers.
"""

from __future__ import annotations

from typed_rag.pipelines.base import Context, Final
from typed_rag.pipelines.plain import prepare_rag
from typed_rag.plans import KEYWORD_SCHEMA, parse_keywords
from typed_rag.prompts import experience_plan_messages, rag_messages


async def prepare(ctx: Context) -> Final:
    plan = await ctx.plan(
        "plan", experience_plan_messages(ctx.question), KEYWORD_SCHEMA, parse_keywords
    )
    if plan is None:
        attempts = 1 + ctx.settings.sampling.plan_retries
        ctx.fallback(f"experience: plan unparseable after {attempts} attempts -> rag")
        return await prepare_rag(ctx)
    plan.keywords = ctx.enforce("keywords", plan.keywords, add_missing=False)
    if ctx.constraints:  # the wanted subtopics steer the reranking too
        plan.keywords += [t for t in ctx.constraints.include if t not in plan.keywords]
    ctx.set_plan(plan.to_trace())

    pool_size = max(ctx.settings.retrieval.experience_pool, ctx.top_k)
    (pool,) = await ctx.retrieve([ctx.question], pool_size)
    if not pool:
        ctx.fallback("retrieval: no passages for the question -> answered without passages")
    ranked = await ctx.rerank(" ".join(plan.keywords), pool, ctx.top_k)
    cited = ctx.cite(ranked, ctx.question)
    return Final("answer", rag_messages(ctx.question, cited))
