"""EXPERIENCE: keywords -> a wide pool -> reranked against the keywords -> top-K.

The keywords say which experiences the asker wants; reranking a wider pool by
them keeps passages that match that intent, then the plain RAG prompt answers.
The pool is retrieved with the question (default), the keywords (the paper's
Section 3.3) or both, merged round-robin (``method.experience_retrieval``), and
reranked against the keywords (the paper), the question or both
(``method.experience_rerank``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from typed_rag.json_reply import read_string_list, string_list_schema
from typed_rag.messages import ANALYST_SYSTEM, Messages, chat
from typed_rag.pipelines.base import Context, Final, Pipeline, plan_or_fallback
from typed_rag.pipelines.grounding import guide, options
from typed_rag.pipelines.plain import prepare_rag, union_by_id
from typed_rag.pipelines.prompting import rag_messages

MAX_KEYWORDS = 5
# The wider pool reranked against the keywords: the paper's 4K with its K = 5.
EXPERIENCE_POOL = 20


@dataclass
class KeywordPlan:
    keywords: list[str]

    title: ClassVar[str] = "keyword_plan"
    example: ClassVar[str] = json.dumps({"keywords": ["backpacking", "Europe"]})

    def to_trace(self) -> dict[str, Any]:
        return {"keywords": self.keywords}

    @classmethod
    def describe(cls, trace: Mapping[str, Any]) -> list[str]:
        if "is_compare" in trace or not trace.get("keywords"):  # a comparison's keywords
            return []
        return [f"plan: keywords: {'; '.join(trace['keywords'])}"]


KEYWORD_SCHEMA: dict[str, Any] = string_list_schema(KeywordPlan.title, "keywords", 1, MAX_KEYWORDS)


def parse_keywords(text: str) -> KeywordPlan:
    names = ("keywords", "keyword", "keywords_list")
    return KeywordPlan(read_string_list(text, names, 1, MAX_KEYWORDS))


def experience_plan_messages(question: str) -> Messages:
    """Pull out the keywords that say what experience or advice the asker wants."""
    user = (
        "Act as a query analyst. The question below asks for experience, advice or "
        "recommendations. Work out what topic the asker wants to hear experiences about, "
        "then list the key entities and phrases of the question that a search for such "
        "experiences should match.\n\n"
        "### Output format\n"
        '{"keywords": ["keyword", ...]}\n\n'
        "### Example\n"
        'Question: "Which hiking trails in Scotland are worth doing in winter?"\n'
        'Output: {"keywords": ["hiking trails in Scotland", "winter hiking", "worth doing"]}\n\n'
        f"### Question\n{question}\n\n"
        "### Output\n"
    )
    return chat(ANALYST_SYSTEM, user)


async def prepare(ctx: Context) -> Final:
    plan = await plan_or_fallback(
        ctx, "experience", experience_plan_messages(ctx.question), KEYWORD_SCHEMA, parse_keywords
    )
    if plan is None:
        return await prepare_rag(ctx)
    plan.keywords = ctx.enforce("keywords", plan.keywords, add_missing=False)
    if ctx.constraints:  # the wanted subtopics steer the reranking too
        plan.keywords += [t for t in ctx.constraints.include if t not in plan.keywords]
    ctx.trace.set_plan(plan.to_trace())

    keywords = " ".join(plan.keywords)
    opts = options(ctx)
    by = opts.experience_retrieval
    queries = [ctx.question, keywords] if by == "both" else [ctx.question]
    pool_size = max(EXPERIENCE_POOL, ctx.top_k)
    pool, sources = union_by_id(await ctx.retrieve(queries, pool_size), queries)
    if not pool:
        ctx.trace.fallback(
            f"retrieval: no passages for the {by.replace('both', 'question or keywords')} "
            "-> answered without passages"
        )
    source_of = {p.id: q for p, q in zip(pool, sources, strict=True)}
    ranked = await ctx.search.rerank(keywords, pool, ctx.top_k)  # the paper's 3.3
    cited = ctx.citations.cite(ranked, [source_of[p.id] for p in ranked])
    return Final("answer", await guide(ctx, rag_messages(ctx.question, cited)))


PIPELINE = Pipeline(prepare, KeywordPlan, lambda q, _o: experience_plan_messages(q))
