"""DEBATE: topic + 2-5 perspectives, one biased sub-query each, one answer each, then a mediator.

Three engine rounds: the plan, every perspective's answer in one batch, the mediator.
"""

from __future__ import annotations

from typed_rag.pipelines.base import Context, Final
from typed_rag.pipelines.plain import answer_sub_queries, prepare_rag
from typed_rag.plans import DEBATE_SCHEMA, Perspective, parse_debate
from typed_rag.prompts import debate_plan_messages, mediator_messages


async def prepare(ctx: Context) -> Final:
    plan = await ctx.plan("plan", debate_plan_messages(ctx.question), DEBATE_SCHEMA, parse_debate)
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
    subs = await answer_sub_queries(
        ctx, [p.query for p in plan.perspectives], perspectives=views, step="perspective"
    )
    responses = [(s.perspective or "", s.answer) for s in subs]
    return Final("mediate", mediator_messages(ctx.question, topic, responses))
