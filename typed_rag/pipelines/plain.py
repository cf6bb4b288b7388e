"""The baselines and the plain-RAG route: ``llm`` (no retrieval) and ``rag`` (top-K, RAG prompt).

Typed-RAG answers EVIDENCE-BASED and NOT-A-QUESTION this way, FACTOID the same way
plus the closed-book draft when ``method.own_knowledge_types`` lists it
(:func:`prepare_factoid`), every question over a user's documents with the final-answer
guidance (:func:`prepare_guided`), and every typed pipeline falls back to
:func:`prepare_rag` when its plan fails.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from typed_rag.constraints import Constraints, with_instructions
from typed_rag.finishing.subanswers import extract_evidence
from typed_rag.messages import cited_numbers
from typed_rag.pipelines.base import Context, Final, Pipeline
from typed_rag.pipelines.grounding import guide, options, with_own_knowledge
from typed_rag.pipelines.prompting import (
    llm_messages,
    not_in_documents,
    rag_messages,
    with_guidance,
)
from typed_rag.result import CitedPassage, SubAnswer
from typed_rag.retrieval import Passage
from typed_rag.retrieval.base import unknown_words


async def prepare_llm(ctx: Context) -> Final:
    """Figure 8: the question alone; no retrieval."""
    return Final("answer", llm_messages(ctx.question))


async def prepare_rag(ctx: Context, query: str | None = None) -> Final:
    """Figure 9: top-K passages for the question (or ``query``), then the RAG prompt.

    With coverage constraints, each included subtopic the question does not
    name gets its own query, and the lists are merged round-robin.
    """
    queries = ctx.enforce("queries", [query or ctx.question])
    hit_lists = await ctx.retrieve(queries, ctx.top_k)
    hits, sources = union_by_id(hit_lists, queries)
    if not hits:
        ctx.trace.fallback("retrieval: no passages for the question -> answered without passages")
    cited = ctx.citations.cite(hits[: ctx.top_k], sources[: ctx.top_k])
    return Final("answer", rag_messages(ctx.question, cited))


async def prepare_factoid(ctx: Context) -> Final:
    """Typed-RAG's factoid route: plain RAG, with ``method.own_knowledge`` applied when it
    lists FACTOID (a closed-book draft the answer keeps and corrects from the passages: the
    1.5B model answers factual questions better from memory than from BM25's passages).

    With ``method.factoid_guidance`` the answer gets the typed pipelines' final-answer
    guidance."""
    if options(ctx).factoid_guidance:
        return await prepare_guided(ctx)
    final = await prepare_rag(ctx)
    messages, lines = await with_own_knowledge(ctx, final.messages)
    return Final(final.step, with_guidance(messages, lines))


async def prepare_guided(ctx: Context) -> Final:
    """Plain RAG with the typed pipelines' final-answer guidance (the type's answer shape,
    the citation rule; over documents, the documents-only rule): one retrieval, one answer
    from the passages, no intermediate text between them and the answer."""
    final = await prepare_rag(ctx)
    if ctx.corpus == "documents":
        unknown = unknown_names(ctx) if ctx.result.passages else []
        if not ctx.result.passages or unknown:
            why = f"the collection never uses {unknown}" if unknown else "no passage matches"
            ctx.trace.fallback(f"documents: {why} -> the documents do not say (no generation)")
            return Final(final.step, final.messages, text=not_in_documents(unknown))
    return Final(final.step, await guide(ctx, final.messages))


# A name in a question: a word with a digit or a capital after its first letter, one
# capitalised mid-sentence, or one in quotes or backticks ("Why3", "WhyML", `styletable`).
_NAME = re.compile(r"[`'\"]([\w.-]+)[`'\"]|\b(\w*\d\w*|\w+[A-Z]\w*)\b|(?<=\w )([A-Z]\w+)")


def unknown_names(ctx: Context) -> list[str]:
    """The question's names when no page of the collection uses any of them: a question
    about a product, command or option the collection never mentions ([] when one of its
    names is used: "SQLite or PostgreSQL" is half answerable). Only names count: a plain
    word the pages never use may be a typo or a paraphrase of one they do."""
    found = (n for m in _NAME.finditer(ctx.question) for n in m.groups() if n)
    names = {w for n in found for w in re.findall(r"\w\w+", n.lower()) if not w.isdigit()}
    unknown = [w for w in unknown_words(ctx.search.retriever, ctx.question) if w in names]
    return unknown if names and set(unknown) == names else []


def union_by_id(
    hit_lists: Sequence[Sequence[Passage]], queries: Sequence[str]
) -> tuple[list[Passage], list[str]]:
    """Merge ranked lists round-robin (rank 1 of each list first), one entry per passage id.

    Round-robin keeps every query represented when no reranker reorders the
    pool; BM25 scores of different queries are not comparable. Also returns
    the query that found each passage first.
    """
    pool: list[Passage] = []
    sources: list[str] = []
    seen: set[str] = set()
    depth = max((len(h) for h in hit_lists), default=0)
    for rank in range(depth):
        for hits, query in zip(hit_lists, queries, strict=True):
            if rank < len(hits) and hits[rank].id not in seen:
                seen.add(hits[rank].id)
                pool.append(hits[rank])
                sources.append(query)
    return pool, sources


async def answer_sub_queries(
    ctx: Context,
    queries: Sequence[str],
    perspectives: Sequence[str] | None = None,
    step: str = "sub-answer",
) -> list[SubAnswer]:
    """Top-K per sub-query, then one RAG answer per sub-query, all in ONE engine round.

    With ``method.sub_answers = "extract"`` each sub-answer is instead the
    sentences of its passages that best match it (no engine call).
    """
    hit_lists = await ctx.retrieve(queries, ctx.top_k)
    # A sub-answer looks at one aspect: it is told only what to leave out.
    c = ctx.constraints
    leave_out = Constraints(c.question, [], c.exclude) if c else None
    shown: list[list[CitedPassage]] = []
    for query, hits in zip(queries, hit_lists, strict=True):
        if not hits:
            ctx.trace.fallback(
                f"retrieval: no passages for sub-query {query!r} -> answered without passages"
            )
        shown.append(ctx.citations.cite(hits, query))
    numbers = {p.citation for p in ctx.result.passages}

    def sub_answer(i: int, text: str) -> SubAnswer:
        return SubAnswer(
            query=queries[i],
            answer=text.strip(),
            perspective=perspectives[i] if perspectives else None,
            citations=[n for n in cited_numbers(text) if n in numbers],
            passages=[p.citation for p in shown[i]],
        )

    def announce(i: int, text: str) -> None:
        sub = sub_answer(i, text)
        ctx.trace.emit("sub_answer", index=i, total=len(queries), step=step, **sub.model_dump())

    if ctx.settings.method.options().sub_answers == "extract":
        with ctx.trace.timed("sub_answers"):
            texts = extract_evidence(
                [
                    (q, [(p.citation, p.text) for p in cited])
                    for q, cited in zip(queries, shown, strict=True)
                ]
            )
        for i, text in enumerate(texts):
            announce(i, text)
    else:
        requests = [
            ctx.rounds.request(with_instructions(rag_messages(q, cited), leave_out), step=step)
            for q, cited in zip(queries, shown, strict=True)
        ]
        on_result = (lambda i, res: announce(i, res.text)) if ctx.trace.listening else None
        results = await ctx.rounds.generate(
            step, requests, stage="sub_answers", on_result=on_result
        )
        texts = [res.text for res in results]
    subs = [sub_answer(i, text) for i, text in enumerate(texts)]
    ctx.result.sub_answers = subs
    return subs


LLM = Pipeline(prepare_llm)
RAG = Pipeline(prepare_rag)
FACTOID = Pipeline(prepare_factoid)
GUIDED = Pipeline(prepare_guided)
