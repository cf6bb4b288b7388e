"""EXPERIENCE: keywords -> a wide pool -> reranked against the keywords -> top-K.

The keywords say which experiences the asker wants; reranking a wider pool by
them keeps passages that match that intent, then the plain RAG prompt answers.
The pool is retrieved with the question (default), the keywords (the paper's
Section 3.3) or both, merged round-robin (``method.experience_retrieval``).
"""

from __future__ import annotations

from typed_rag.pipelines.base import Context, Final
from typed_rag.pipelines.grounding import guide, options
from typed_rag.pipelines.plain import prepare_rag, union_by_id
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

    keywords = " ".join(plan.keywords)
    by = options(ctx).experience_retrieval
    queries = {
        "question": [ctx.question],
        "keywords": [keywords],
        "both": [ctx.question, keywords],
    }[by]
    pool_size = max(ctx.settings.retrieval.experience_pool, ctx.top_k)
    pool, sources = union_by_id(await ctx.retrieve(queries, pool_size), queries)
    if not pool:
        ctx.fallback(
            f"retrieval: no passages for the {by.replace('both', 'question or keywords')} "
            "-> answered without passages"
        )
    source_of = {p.id: q for p, q in zip(pool, sources, strict=True)}
    ranked = await ctx.rerank(keywords, pool, ctx.top_k)
    cited = ctx.cite(ranked, [source_of[p.id] for p in ranked])
    return Final("answer", await guide(ctx, rag_messages(ctx.question, cited)))
