"""The baselines and the plain-RAG route: ``llm`` (no retrieval) and ``rag`` (top-K, RAG prompt).

Typed-RAG answers EVIDENCE-BASED, FACTOID and NOT-A-QUESTION this way, and
every typed pipeline falls back to :func:`prepare_rag` when its plan fails.
"""

from __future__ import annotations

from collections.abc import Sequence

from typed_rag.pipelines.base import Context, Final
from typed_rag.prompts import cited_numbers, llm_messages, rag_messages
from typed_rag.result import SubAnswer


async def prepare_llm(ctx: Context) -> Final:
    """Figure 8: the question alone; no retrieval."""
    return Final("answer", llm_messages(ctx.question))


async def prepare_rag(ctx: Context) -> Final:
    """Figure 9: top-K passages for the question, then the RAG prompt."""
    (hits,) = await ctx.retrieve([ctx.question], ctx.top_k)
    if not hits:
        ctx.fallback("retrieval: no passages for the question -> answered without passages")
    cited = ctx.cite(hits, ctx.question)
    return Final("answer", rag_messages(ctx.question, cited))


async def answer_sub_queries(
    ctx: Context,
    queries: Sequence[str],
    perspectives: Sequence[str] | None = None,
    step: str = "sub-answer",
) -> list[SubAnswer]:
    """Top-K per sub-query, then one RAG answer per sub-query, all in ONE engine round."""
    hit_lists = await ctx.retrieve(queries, ctx.top_k)
    requests = []
    for query, hits in zip(queries, hit_lists, strict=True):
        if not hits:
            ctx.fallback(
                f"retrieval: no passages for sub-query {query!r} -> answered without passages"
            )
        requests.append(ctx.request(rag_messages(query, ctx.cite(hits, query))))
    results = await ctx.generate(step, requests, stage="sub_answers")
    shown = {p.citation for p in ctx.result.passages}
    subs: list[SubAnswer] = []
    for i, (query, res) in enumerate(zip(queries, results, strict=True)):
        subs.append(
            SubAnswer(
                query=query,
                answer=res.text.strip(),
                perspective=perspectives[i] if perspectives else None,
                citations=[n for n in cited_numbers(res.text) if n in shown],
            )
        )
    ctx.result.sub_answers = subs
    return subs
