"""Outline-guided answering for coverage-conditioned questions (``constraints.outline``).

The paper's RAG setting: a planner writes the outline for the whole
conditioned question (instruction included), each of the outline's
sub-queries retrieves its own passages, and the answer is written with the
sub-queries as its sections, each filled from what its query found. Against
the project's constraint mode, the outline replaces both the typed plan and
the lexical filtering of plan items; the retrieval still ranks passages that
name an excluded subtopic last, and the final prompt still gets the
coverage section (TypedRAG adds it to every final generation).

One engine round for the prompted planner (none for an in-process trained
one), one for the answer. A planner reply with no outline falls back to
plain RAG, recorded in the trace.
"""

from __future__ import annotations

from dataclasses import replace

from typed_rag.messages import format_passages
from typed_rag.pipelines.base import Context, Final
from typed_rag.pipelines.plain import prepare_rag, union_by_id
from typed_rag.qtree.planner import load_planner, parse_planner_output
from typed_rag.qtree.prompts import outline_answer_prompt, planner_messages
from typed_rag.qtree.tree import TreeError

# A tree of 39 short questions and the outline. In the outline-vs-cue run every reply
# that held an outline was at most 793 tokens; the 6 of 60 that reached the former
# 2048 cap ran on without one, so the lower cap only cuts what is lost anyway.
OUTLINE_TOKENS = 1024


def conditioned_text(ctx: Context) -> str:
    """The question with its instruction: the standalone rewrite if any, else as asked.

    Constraint detection replaces ``ctx.question`` by the core question; the
    planner must see the instruction, so it reads the question from the trace.
    """
    rewrite = ctx.result.rewrite or {}
    return str(rewrite.get("question") or ctx.result.question)


async def plan_outline(ctx: Context, conditioned: str) -> list[str] | None:
    """The outline's sub-queries from ``constraints.planner``; None when it has none."""
    spec = ctx.settings.constraints.planner
    try:
        if spec == "prompt":
            base = ctx.rounds.request(planner_messages(conditioned), plan=True)
            req = replace(base, max_tokens=max(base.max_tokens, OUTLINE_TOKENS))
            (res,) = await ctx.rounds.generate("outline", [req], stage="plan")
            return parse_planner_output(res.text)
        planner = load_planner(spec)
        with ctx.trace.timed("plan"):
            return await planner.plan(conditioned)
    except TreeError as exc:
        ctx.trace.fallback(f"outline: planner gave no outline ({exc}) -> rag")
        return None


async def prepare_outline_guided(ctx: Context) -> Final:
    """Plan the outline, retrieve per sub-query, and ask for an answer that follows it."""
    conditioned = conditioned_text(ctx)
    queries = await plan_outline(ctx, conditioned)
    if not queries:
        return await prepare_rag(ctx)
    ctx.trace.set_plan({"outline": queries, "planner": ctx.settings.constraints.planner})
    hit_lists = await ctx.retrieve(queries, ctx.top_k)
    hits, sources = union_by_id(hit_lists, queries)
    if not hits:
        ctx.trace.fallback("retrieval: no passages for the outline -> answered without passages")
    limit = 2 * ctx.top_k
    cited = ctx.citations.cite(hits[:limit], sources[:limit])
    blocks = []
    for i, query in enumerate(queries, start=1):
        mine = [p for p in cited if p.query == query]
        found = format_passages(mine) if mine else "(nothing found)"
        blocks.append(f"#### For section {i}: {query}\n{found}")
    return Final("answer", outline_answer_prompt(conditioned, queries, "\n\n".join(blocks)))
