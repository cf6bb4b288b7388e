"""EXPERIENCE: keywords -> a wide pool -> reranked against the keywords -> top-K.

The keywords say which experiences the asker wants; reranking a wider pool by
them keeps passages that match that intent, then the plain RAG prompt answers.
The pool is retrieved with the question (default), the keywords (the paper's
Section 3.3) or both, merged round-robin (``method.experience_retrieval``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from typed_rag.json_reply import as_bool, extract_json, lookup, only_list, string_list
from typed_rag.messages import ANALYST_SYSTEM, Messages, chat
from typed_rag.method_settings import MethodOptions
from typed_rag.pipelines.base import Context, Final, Pipeline, plan_or_fallback
from typed_rag.pipelines.grounding import guide, options
from typed_rag.pipelines.plain import prepare_rag, union_by_id
from typed_rag.pipelines.prompting import rag_messages

MAX_KEYWORDS = 5


@dataclass
class KeywordPlan:
    keywords: list[str]
    # ``method.type_check``: does the question ask for experience or advice? None: not asked.
    is_experience: bool | None = None

    title: ClassVar[str] = "keyword_plan"
    example: ClassVar[str] = json.dumps({"keywords": ["backpacking", "Europe"]})

    def to_trace(self) -> dict[str, Any]:
        trace: dict[str, Any] = {"keywords": self.keywords}
        if self.is_experience is not None:
            trace["is_experience"] = self.is_experience
        return trace

    @classmethod
    def describe(cls, trace: Mapping[str, Any]) -> list[str]:
        if trace.get("is_experience") is False:
            return ["plan: does not ask for experience or advice"]
        if "is_compare" in trace or not trace.get("keywords"):  # a comparison's keywords
            return []
        return [f"plan: keywords: {'; '.join(trace['keywords'])}"]


def keyword_schema(check: bool = False) -> dict[str, Any]:
    """The keywords; with ``check``, first whether the question asks for experience at all."""
    checked = {"is_experience": {"type": "boolean"}} if check else {}
    return {
        "title": KeywordPlan.title,
        "type": "object",
        "properties": {
            **checked,
            "keywords": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "minItems": 1,
                "maxItems": MAX_KEYWORDS,
            },
        },
        "required": [*checked, "keywords"],
        "additionalProperties": False,
    }


KEYWORD_SCHEMA: dict[str, Any] = keyword_schema()


def parse_keywords(text: str) -> KeywordPlan:
    data = extract_json(text)
    is_experience = None
    if isinstance(data, dict):
        is_experience = as_bool(lookup(data, "is_experience", "experience"))
        if is_experience is False:  # its keywords do not matter
            return KeywordPlan([], is_experience=False)
        value = lookup(data, "keywords", "keyword", "keywords_list")
        data = value if value is not None else only_list(data)
    return KeywordPlan(string_list(data, "keywords", 1, MAX_KEYWORDS), is_experience)


def experience_plan_messages(question: str, check: bool = False) -> Messages:
    """Pull out the keywords that say what experience or advice the asker wants.

    With ``check`` (``method.type_check``) the analyst first says whether the question asks
    for experience or advice at all; one that asks for a fact is answered as plain RAG.
    """
    if check:
        intro = (
            "Act as a query analyst. First decide whether the question below asks for "
            "experience, advice, opinions or recommendations (not for a fact). If it does, "
        )
        fmt = '{"is_experience": true or false, "keywords": ["keyword", ...]}'
        example = (
            'Output: {"is_experience": true, "keywords": ["hiking trails in Scotland", '
            '"winter hiking", "worth doing"]}\n\n'
            'Question: "In which year did the Berlin Wall fall?"\n'
            'Output: {"is_experience": false, "keywords": ["Berlin Wall"]}\n\n'
        )
    else:
        intro = (
            "Act as a query analyst. The question below asks for experience, advice or "
            "recommendations. "
        )
        fmt = '{"keywords": ["keyword", ...]}'
        example = (
            'Output: {"keywords": ["hiking trails in Scotland", "winter hiking", '
            '"worth doing"]}\n\n'
        )
    user = (
        f"{intro}"
        "Work out what topic the asker wants to hear experiences about, "
        "then list the key entities and phrases of the question that a search for such "
        "experiences should match.\n\n"
        "### Output format\n"
        f"{fmt}\n\n"
        "### Example\n"
        'Question: "Which hiking trails in Scotland are worth doing in winter?"\n'
        f"{example}"
        f"### Question\n{question}\n\n"
        "### Output\n"
    )
    return chat(ANALYST_SYSTEM, user)


def plan_prompt(question: str, opts: MethodOptions) -> Messages:
    return experience_plan_messages(question, opts.type_check)


async def prepare(ctx: Context) -> Final:
    check = options(ctx).type_check
    plan = await plan_or_fallback(
        ctx,
        "experience",
        experience_plan_messages(ctx.question, check),
        keyword_schema(check),
        parse_keywords,
    )
    if plan is None:
        return await prepare_rag(ctx)
    if plan.is_experience is False:
        ctx.set_plan(plan.to_trace())
        ctx.fallback("experience: the plan says the question asks for a fact -> rag")
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


PIPELINE = Pipeline(prepare, KeywordPlan, plan_prompt)
