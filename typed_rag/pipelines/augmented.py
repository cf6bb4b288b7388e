"""Core sub-question retrieval augmentation (Xie et al., "Do RAG Systems Cover What Matters?").

Plain RAG retrieves once, for the whole question, and tends to fill all K
slots with passages about its most prominent aspect. Here the planner lists
the question's core sub-questions; the question and each sub-question
retrieve a pool; and K passages are picked from the pooled candidates to
cover the queries together (greedy facility location over reranker scores:
each pick adds the most to the sum, over queries, of the best score any
picked passage has for that query). The final prompt is plain RAG's, so the
only change is which passages the model sees (unless ``method.*`` options add
guidance; ``method.core_sub_questions = "listed"`` names these sub-questions).

Two engine rounds: the plan and the answer. Used for the types listed in
``augment.types``. With ``augment.end_to_end`` (Xie et al.'s M4) each core
sub-question instead retrieves its own top-K and is answered, and the
aggregator combines those answers (three rounds).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from typed_rag.pipelines.base import Context, Final, Pipeline, plan_or_fallback
from typed_rag.pipelines.core_questions import (
    CorePlan,
    core_sub_question_messages,
    core_sub_question_schema,
    parse_core_sub_questions,
)
from typed_rag.pipelines.decomposition import aggregation_messages
from typed_rag.pipelines.grounding import combine, guide
from typed_rag.pipelines.plain import answer_sub_queries, prepare_rag, union_by_id
from typed_rag.pipelines.prompting import rag_messages
from typed_rag.retrieval import Passage


def cover_select(scores: Sequence[Sequence[float]], k: int) -> list[int]:
    """Indices of ``k`` candidates that together score best on every query.

    ``scores[q][p]`` is candidate p's score for query q. Each query's scores
    are min-max scaled to [0, 1] over the pool, so no query dominates by
    scale; then candidates are picked greedily by marginal gain, ties to the
    earlier candidate.
    """
    if not scores:
        return []
    n = len(scores[0])
    scaled: list[list[float]] = []
    for row in scores:
        lo, hi = min(row), max(row)
        scaled.append([(x - lo) / (hi - lo) if hi > lo else 0.0 for x in row])
    best = [0.0] * len(scaled)
    chosen: list[int] = []
    for _ in range(min(k, n)):
        gain, pick = -1.0, -1
        for p in range(n):
            if p in chosen:
                continue
            g = sum(max(0.0, row[p] - b) for row, b in zip(scaled, best, strict=True))
            if g > gain:
                gain, pick = g, p
        chosen.append(pick)
        best = [max(b, row[pick]) for row, b in zip(scaled, best, strict=True)]
    return chosen


async def prepare(ctx: Context) -> Final:
    limit = max(1, ctx.settings.augment.max_sub_questions)
    plan = await plan_or_fallback(
        ctx,
        "augment",
        core_sub_question_messages(ctx.question, limit),
        core_sub_question_schema(limit),
        lambda text: parse_core_sub_questions(text, limit),
        what="core sub-questions",
    )
    if plan is None:
        return await prepare_rag(ctx)
    subs = ctx.enforce("sub_questions", plan.sub_questions)
    ctx.set_plan({"core_sub_questions": subs, "augmented": True})
    if ctx.settings.augment.end_to_end:  # M4: answer each core sub-question, then combine
        ctx.result.plan["end_to_end"] = True
        return await combine(
            ctx,
            await answer_sub_queries(ctx, subs),
            "aggregate",
            lambda kept, passages: aggregation_messages(
                ctx.question, [(s.query, s.answer) for s in kept], passages
            ),
            what="core sub-answer",
        )
    queries = [ctx.question, *subs]
    depth = max(ctx.settings.augment.pool_per_query, ctx.top_k)
    pool, sources = union_by_id(await ctx.retrieve(queries, depth), queries)
    if not pool:
        ctx.fallback("retrieval: no passages for the question or its sub-questions")
    picked = await _select(ctx, queries, pool)
    cited = ctx.cite([pool[i] for i in picked], [sources[i] for i in picked])
    return Final("answer", await guide(ctx, rag_messages(ctx.question, cited)))


async def _select(ctx: Context, queries: Sequence[str], pool: list[Passage]) -> list[int]:
    """Reranker-scored coverage selection; without a reranker, the round-robin pool order."""
    if ctx.reranker is None or len(pool) <= ctx.top_k:
        return list(range(min(ctx.top_k, len(pool))))
    reranker = ctx.reranker
    with ctx.timed("rerank"):
        scores = await asyncio.to_thread(lambda: [reranker.score(q, pool) for q in queries])
    return cover_select(scores, ctx.top_k)


PIPELINE = Pipeline(prepare, CorePlan)
