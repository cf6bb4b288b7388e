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
from typed_rag.pipelines.core_questions import core_sub_questions
from typed_rag.pipelines.prompting import (
    ANSWER_SHAPES,
    CORE_DEFINITION,
    DIRECT_FIRST,
    DRAFT_CITE,
    DRAFT_USE,
    OWN_KNOWLEDGE,
    STRICT_CITE_RULE,
    core_list_guidance,
    length_guidance,
    llm_messages,
    rag_messages,
    with_guidance,
    with_section,
)
from typed_rag.result import CitedPassage, SubAnswer
from typed_rag.retrieval import Passage

# How much of a closed-book draft joins the question as a search query (method.draft_query):
# about its first three sentences, where a short answer states its facts.
DRAFT_QUERY_WORDS = 60

# The combining prompt (aggregator, mediator) over the kept sub-answers and the passages shown.
Combiner = Callable[[Sequence[SubAnswer], Sequence[CitedPassage]], Messages]


def options(ctx: Context) -> MethodOptions:
    return ctx.settings.method.options()


def applies(setting: str, ctx: Context) -> bool:
    """Whether an ``off`` / ``debate`` / ``all`` option is on for this question's type."""
    return setting == "all" or (setting == "debate" and ctx.result.type == "DEBATE")


async def guide(ctx: Context, messages: Messages, first: Sequence[str] = ()) -> Messages:
    """The final prompt with its answer shape, core sub-questions and citation rule, as set
    (after the pipeline's own ``first`` lines)."""
    opts = options(ctx)
    lines = list(first)
    if applies(opts.direct_first, ctx):
        lines.append(DIRECT_FIRST)
    shape = ANSWER_SHAPES.get(ctx.result.type or "")
    if opts.answer_shapes and shape:
        lines.append(shape)
    if opts.core_sub_questions == "definition":
        lines.append(CORE_DEFINITION)
    elif opts.core_sub_questions == "listed":
        core = await core_sub_questions(ctx)
        lines.append(core_list_guidance(core) if core else CORE_DEFINITION)
    if opts.require_citations and ctx.result.passages:
        lines.append(STRICT_CITE_RULE)
    if opts.length_hint:
        lines.append(length_guidance(ctx.settings.sampling.max_tokens))
    messages, own_lines = await with_own_knowledge(ctx, messages)
    return with_guidance(messages, lines + own_lines)


DRAFTED = ("draft", "draft-cite")  # the own_knowledge values that write a closed-book draft


def own_knowledge(ctx: Context) -> str:
    """``method.own_knowledge`` as it applies to this question's type."""
    opts = options(ctx)
    return opts.own_knowledge if ctx.result.type in opts.own_knowledge_types else "off"


async def draft_first(ctx: Context, wanted: bool) -> str:
    """The closed-book draft before retrieval, when ``wanted`` (``method.draft_query`` on the
    factoid route, ``method.draft_sub_query`` for decomposed types) and this question gets
    a draft; "" otherwise (the draft, if any, then comes later)."""
    if not wanted or own_knowledge(ctx) not in DRAFTED:
        return ""
    return await closed_book_draft(ctx)


def draft_query(question: str, draft: str) -> str:
    """The question followed by the first :data:`DRAFT_QUERY_WORDS` words of its draft (the
    plan trace's ``draft_query``)."""
    return f"{question} {' '.join(draft.split()[:DRAFT_QUERY_WORDS])}"


async def with_own_knowledge(ctx: Context, messages: Messages) -> tuple[Messages, list[str]]:
    """``method.own_knowledge`` for this question's type: the messages with the closed-book
    draft added (``draft``, ``draft-cite``) and the guidance lines that go with it."""
    own = own_knowledge(ctx)
    lines: list[str] = []
    if own in DRAFTED:
        draft = await closed_book_draft(ctx)
        if draft:
            messages = with_section(messages, "Draft answer from memory", draft)
            lines.append(DRAFT_USE if own == "draft" else DRAFT_CITE)
    if own != "off":
        lines.append(OWN_KNOWLEDGE)
    return messages, lines


async def closed_book_draft(ctx: Context, facts: Sequence[tuple[str, str]] = ()) -> str:
    """``method.own_knowledge = "draft"``: the LLM baseline's answer (same prompt and seed),
    one more engine round before the final one; the plan trace keeps it as ``draft``, and
    a second call returns it (a draft written before retrieval is not written again).

    ``facts`` (question, answer) pairs found beforehand (a multi-hop question's links)
    join its prompt, so the draft is about the things the question only describes."""
    if "draft" in ctx.result.plan:
        return str(ctx.result.plan["draft"])
    messages = llm_messages(ctx.question)
    if facts:
        messages = with_section(messages, "Facts found", "\n".join(f"{q} {a}" for q, a in facts))
    (res,) = await ctx.generate("draft", [ctx.request(messages, step="draft")], "generate")
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


def searches_question(ctx: Context, queries: Sequence[str]) -> bool:
    """Whether the question itself joins ``queries`` (``method.question_sub_query``);
    the plan trace's ``question_searched`` says so. Not when a query already is the question."""
    if not applies(options(ctx).question_sub_query, ctx):
        return False
    asked = " ".join(ctx.question.lower().split())
    if any(" ".join(q.lower().split()) == asked for q in queries):
        return False
    ctx.result.plan["question_searched"] = True
    return True


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
    if ctx.reranker is None or len(pool) <= 1:
        return pool[:n]
    plain = [Passage(p.id, p.title, p.text, p.score) for p in pool]
    by_id = {p.id: p for p in pool}
    return [by_id[p.id] for p in await ctx.rerank(ctx.question, plain, n)]


async def combine(
    ctx: Context, subs: list[SubAnswer], step: str, build: Combiner, what: str = "sub-answer"
) -> Final:
    """The final generation (``step``: ``aggregate``, ``mediate``) over the sub-answers.

    ``build`` is the pipeline's combining prompt. ``method.drop_uninformative``
    leaves out sub-answers that say nothing; when none is left, the question is
    answered like plain RAG over the passages the sub-queries found.
    ``method.grounded_aggregation`` shows the best passages to ``build``.
    """
    opts = options(ctx)
    kept = keep_informative(subs) if opts.drop_uninformative else subs
    if not kept:
        ctx.fallback(f"{step}: every {what} carried no information -> rag over the pooled passages")
        passages = await best_passages(ctx, subs, ctx.top_k)
        return Final("answer", await guide(ctx, rag_messages(ctx.question, passages)))
    passages = (
        await best_passages(ctx, kept, opts.aggregation_passages)
        if opts.grounded_aggregation
        else []
    )
    return Final(step, await guide(ctx, build(kept, passages)))
