"""DEBATE: topic + 2-5 perspectives, one biased sub-query each, one answer each, then a mediator.

Three engine rounds: the plan, every perspective's answer in one batch, the mediator.
``method.max_sub_queries`` caps the perspectives; ``method.*`` grounding options
shape the mediation (see ``grounding``).
"""

from __future__ import annotations

from typed_rag.pipelines.base import Context, Final
from typed_rag.pipelines.grounding import anchor_queries, combine, options
from typed_rag.pipelines.plain import answer_sub_queries, prepare_rag
from typed_rag.plans import Perspective, debate_schema, parse_debate
from typed_rag.prompts import debate_plan_messages


async def prepare(ctx: Context) -> Final:
    limit = options(ctx).max_sub_queries
    plan = await ctx.plan(
        "plan",
        debate_plan_messages(ctx.question, limit),
        debate_schema(limit),
        lambda text: parse_debate(text, limit),
    )
    if plan is None:
        attempts = 1 + ctx.settings.sampling.plan_retries
        ctx.fallback(f"debate: plan unparseable after {attempts} attempts -> rag")
        return await prepare_rag(ctx)
    topic = plan.topic or ctx.question
    plan.topic = topic
    if ctx.constraints:
        # A perspective named by an excluded subtopic goes; an included one gets its own.
        queries = ctx.enforce(
            "perspectives", [f"{p.perspective}: {p.query}" for p in plan.perspectives]
        )
        by_text = {f"{p.perspective}: {p.query}": p for p in plan.perspectives}
        plan.perspectives = [by_text.get(q) or Perspective(q.split(":")[0], q) for q in queries]
    ctx.set_plan(plan.to_trace())
    views = [p.perspective for p in plan.perspectives]
    queries = anchor_queries(ctx, [p.query for p in plan.perspectives])
    subs = await answer_sub_queries(ctx, queries, perspectives=views, step="perspective")
    return await combine(ctx, subs, "mediate", topic=topic, what="perspective answer")
