"""Steps the typed pipelines share to ground and shape their final answer (issue 15).

With the default small generator, decomposition lost to plain RAG: sub-answers
that quote an irrelevant passage, or say nothing, reached the aggregator as
facts it could not check, and final answers had no shape and few citations.
Each step here is behind its own ``method.*`` setting (see
:class:`~typed_rag.config.MethodSettings`); with all of them off the pipelines
build the paper's prompts unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from typed_rag.config import MethodOptions
from typed_rag.finishing.subanswers import anchor, uninformative
from typed_rag.messages import Messages
from typed_rag.pipelines.base import Context, Final
from typed_rag.pipelines.prompting import (
    ANSWER_SHAPES,
    CORE_DEFINITION,
    DOCUMENTS_ONLY,
    DRAFT_USE,
    OWN_KNOWLEDGE,
    STRICT_CITE_RULE,
    llm_messages,
    rag_messages,
    with_guidance,
    with_section,
)
from typed_rag.result import CitedPassage, SubAnswer
from typed_rag.retrieval import Passage

# The combining prompt (aggregator, mediator) over the kept sub-answers.
Combiner = Callable[[Sequence[SubAnswer]], Messages]


def options(ctx: Context) -> MethodOptions:
    return ctx.settings.method.options()


async def guide(ctx: Context, messages: Messages, first: Sequence[str] = ()) -> Messages:
    """The final prompt with its answer shape, core sub-questions and citation rule, as set
    (after the pipeline's own ``first`` lines).

    Over a user's documents no type's shape is given: on the documentation devset the
    shaped answers (numbered steps, perspectives and a conclusion) ranked below plain RAG's
    and gave factual questions invented sides (docs/experiments.md, issue 77)."""
    opts = options(ctx)
    lines = list(first)
    shape = ANSWER_SHAPES.get(ctx.result.type or "")
    if opts.answer_shapes and shape and ctx.corpus != "documents":
        lines.append(shape)
    if opts.core_sub_questions == "definition":
        lines.append(CORE_DEFINITION)
    if opts.require_citations and ctx.result.passages:
        lines.append(STRICT_CITE_RULE)
    if ctx.corpus == "documents" and ctx.result.passages:
        lines.append(DOCUMENTS_ONLY)
    messages, own_lines = await with_own_knowledge(ctx, messages)
    return with_guidance(messages, lines + own_lines)


def own_knowledge(ctx: Context) -> str:
    """``method.own_knowledge`` as it applies to this question's type; never over a user's
    documents, whose answer is what the documents say (a draft is the model's memory)."""
    opts = options(ctx)
    if ctx.corpus == "documents" or ctx.result.type not in opts.own_knowledge_types:
        return "off"
    return opts.own_knowledge


async def with_own_knowledge(ctx: Context, messages: Messages) -> tuple[Messages, list[str]]:
    """``method.own_knowledge`` for this question's type: the messages with the closed-book
    draft added and the guidance lines that go with it."""
    if own_knowledge(ctx) == "off":
        return messages, []
    lines: list[str] = []
    draft = await closed_book_draft(ctx)
    if draft:
        messages = with_section(messages, "Draft answer from memory", draft)
        lines.append(DRAFT_USE)
    return messages, [*lines, OWN_KNOWLEDGE]


async def closed_book_draft(ctx: Context) -> str:
    """``method.own_knowledge = "draft"``: the LLM baseline's answer (same prompt and seed),
    one more engine round before the final one; the plan trace keeps it as ``draft``, and
    a second call returns it."""
    if "draft" in ctx.result.plan:
        return str(ctx.result.plan["draft"])
    messages = llm_messages(ctx.question)
    (res,) = await ctx.rounds.generate(
        "draft", [ctx.rounds.request(messages, step="draft")], "draft"
    )
    draft = res.text.strip()
    ctx.result.plan["draft"] = draft
    return draft


def anchor_queries(ctx: Context, queries: list[str]) -> list[str]:
    """Vague sub-queries with the question attached (``method.anchor_sub_queries``);
    the plan trace's ``anchored`` lists the ones changed."""
    if not options(ctx).anchor_sub_queries:
        return queries
    out = [anchor(ctx.question, q) for q in queries]
    changed = [q for q, a in zip(queries, out, strict=True) if a != q]
    if changed:
        ctx.result.plan["anchored"] = changed
    return out


def keep_informative(subs: Sequence[SubAnswer]) -> list[SubAnswer]:
    """The sub-answers that say something; the others get ``dropped`` set to the reason."""
    kept: list[SubAnswer] = []
    for sub in subs:
        sub.dropped = uninformative(sub.query, sub.answer)
        if sub.dropped is None:
            kept.append(sub)
    return kept


async def best_passages(ctx: Context, subs: Sequence[SubAnswer], n: int) -> list[CitedPassage]:
    """The ``n`` passages shown to ``subs`` that best fit the question, with their numbers.

    The sub-answers' lists are merged round-robin (each sub-query's best first);
    with a reranker, that pool is reranked against the original question.
    """
    by_number = {p.citation: p for p in ctx.result.passages}
    lists = [[by_number[c] for c in s.passages if c in by_number] for s in subs]
    pool: list[CitedPassage] = []
    seen: set[int] = set()
    for rank in range(max((len(x) for x in lists), default=0)):
        for ranked in lists:
            if rank < len(ranked) and ranked[rank].citation not in seen:
                seen.add(ranked[rank].citation)
                pool.append(ranked[rank])
    if ctx.search.reranker is None or len(pool) <= 1:
        return pool[:n]
    plain = [Passage(p.id, p.title, p.text, p.score) for p in pool]
    by_id = {p.id: p for p in pool}
    return [by_id[p.id] for p in await ctx.search.rerank(ctx.question, plain, n)]


async def combine(
    ctx: Context, subs: list[SubAnswer], step: str, build: Combiner, what: str = "sub-answer"
) -> Final:
    """The final generation (``step``: ``aggregate``, ``mediate``) over the sub-answers.

    ``build`` is the pipeline's combining prompt. ``method.drop_uninformative``
    leaves out sub-answers that say nothing; when none is left, the question is
    answered like plain RAG over the passages the sub-queries found.
    """
    opts = options(ctx)
    kept = keep_informative(subs) if opts.drop_uninformative else subs
    if not kept:
        ctx.trace.fallback(
            f"{step}: every {what} carried no information -> rag over the pooled passages"
        )
        passages = await best_passages(ctx, subs, ctx.top_k)
        return Final("answer", await guide(ctx, rag_messages(ctx.question, passages)))
    return Final(step, await guide(ctx, build(kept)))
