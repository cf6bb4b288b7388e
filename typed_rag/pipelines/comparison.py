"""COMPARISON: keywords per compared item -> top-K each -> union by id -> rerank -> top-K.

The plan also says what kind of comparison is asked (differences, similarities
or superiority); the final prompt is told both the kind and the items.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from typed_rag.json_reply import PlanError, as_bool, extract_json, lookup, string_list
from typed_rag.messages import ANALYST_SYSTEM, Messages, Numbered, chat, format_passages
from typed_rag.pipelines.base import Context, Final, Pipeline, plan_or_fallback
from typed_rag.pipelines.grounding import guide
from typed_rag.pipelines.plain import prepare_rag, union_by_id
from typed_rag.pipelines.prompting import ANSWER_SYSTEM, CITE_RULE

MAX_KEYWORDS = 5
COMPARE_TYPES = ("differences", "similarities", "superiority")


@dataclass
class ComparisonPlan:
    is_compare: bool
    compare_type: str
    keywords: list[str]

    title: ClassVar[str] = "comparison_plan"
    example: ClassVar[str] = json.dumps(
        {"is_compare": True, "compare_type": "differences", "keywords_list": ["coffee", "tea"]}
    )

    def to_trace(self) -> dict[str, Any]:
        return {
            "is_compare": self.is_compare,
            "compare_type": self.compare_type,
            "keywords": self.keywords,
        }

    @classmethod
    def describe(cls, trace: Mapping[str, Any]) -> list[str]:
        if "is_compare" not in trace:
            return []
        lines = []
        if trace.get("keywords"):
            kind = f" [{trace['compare_type']}]" if trace.get("compare_type") else ""
            lines.append(f"plan: keywords{kind}: {'; '.join(trace['keywords'])}")
        if trace.get("is_compare") is False:
            lines.append("plan: not a comparison")
        return lines


# Keys in the order the measured runs decoded them (llama.cpp sorted them until the
# key-order fix). The paper's order (is_compare first) changes 9 of the 15 plans of the
# headline questions this pipeline answered (benchmarks/comparison_key_order.py); its
# effect on answers is not measured.
COMPARISON_SCHEMA: dict[str, Any] = {
    "title": ComparisonPlan.title,
    "type": "object",
    "properties": {
        "compare_type": {"type": "string", "enum": list(COMPARE_TYPES)},
        "is_compare": {"type": "boolean"},
        "keywords_list": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "minItems": 1,
            "maxItems": MAX_KEYWORDS,
        },
    },
    "required": ["is_compare", "compare_type", "keywords_list"],
    "additionalProperties": False,
}


def _compare_type(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    word = value.strip().lower()
    for name in COMPARE_TYPES:
        if word == name or word.startswith(name[:7]):  # "difference", "similarity", "superior"
            return name
    return None


def parse_comparison(text: str) -> ComparisonPlan:
    data = extract_json(text)
    if isinstance(data, list):  # bare keyword list: the model skipped the other fields
        return ComparisonPlan(
            True, "differences", string_list(data, "keywords_list", 1, MAX_KEYWORDS)
        )
    if not isinstance(data, dict):
        raise PlanError("comparison plan is not an object")
    is_compare = as_bool(lookup(data, "is_compare", "compare"))
    raw_type = lookup(data, "compare_type", "comparison_type", "type")
    keywords_raw = lookup(data, "keywords_list", "keywords", "items")
    if is_compare is None:
        if keywords_raw is None:
            raise PlanError("comparison plan has no is_compare and no keywords_list")
        is_compare = True
    if not is_compare:
        return ComparisonPlan(False, _compare_type(raw_type) or "", [])
    compare_type = _compare_type(raw_type)
    if compare_type is None:
        if raw_type not in (None, ""):
            raise PlanError(f"unknown compare_type {raw_type!r}")
        compare_type = "differences"
    return ComparisonPlan(
        True, compare_type, string_list(keywords_raw, "keywords_list", 1, MAX_KEYWORDS)
    )


def comparison_plan_messages(question: str) -> Messages:
    """Decide whether the question compares things; if so, how, and which things."""
    user = (
        "Act as a query analyst. First decide whether the question below asks to compare or "
        "contrast two or more things. If it does:\n"
        '1. Name the kind of comparison: "differences", "similarities" or "superiority".\n'
        "2. List the things being compared, each as a short phrase that carries its context "
        "(good search queries).\n\n"
        "### Output format\n"
        '{"is_compare": true or false, "compare_type": "differences" | "similarities" | '
        '"superiority", "keywords_list": ["phrase", ...]}\n\n'
        "### Example\n"
        'Question: "Is a bicycle or a car better for short trips in a city?"\n'
        'Output: {"is_compare": true, "compare_type": "superiority", "keywords_list": '
        '["bicycle for short city trips", "car for short city trips"]}\n\n'
        f"### Question\n{question}\n\n"
        "### Output\n"
    )
    return chat(ANALYST_SYSTEM, user)


def comparison_messages(
    question: str, compare_type: str, keywords: Sequence[str], passages: Sequence[Numbered]
) -> Messages:
    """The RAG prompt, told what kind of comparison to make and between which items."""
    refs = format_passages(passages) if passages else "(no passages were found)"
    user = (
        "Below are passages taken from a larger collection, followed by a question that asks "
        "for a comparison. Answer it as a comparison of the given kind, covering each of the "
        f"items listed. {CITE_RULE}\n\n"
        f"### Question\n{question}\n\n"
        f"### Comparison type\n{compare_type}\n\n"
        f"### Items to compare\n{'; '.join(keywords)}\n\n"
        f"### References\n{refs}\n\n"
        "### Answer\n"
    )
    return chat(ANSWER_SYSTEM, user)


async def prepare(ctx: Context) -> Final:
    plan = await plan_or_fallback(
        ctx,
        "comparison",
        comparison_plan_messages(ctx.question),
        COMPARISON_SCHEMA,
        parse_comparison,
    )
    if plan is None:
        return await prepare_rag(ctx)
    plan.keywords = ctx.enforce("keywords", plan.keywords, add_missing=False)
    ctx.trace.set_plan(plan.to_trace())
    if not plan.is_compare:
        ctx.trace.fallback("comparison: the plan says the question is not a comparison -> rag")
        return await prepare_rag(ctx)

    hit_lists = await ctx.retrieve(plan.keywords, ctx.top_k)
    pool, sources = union_by_id(hit_lists, plan.keywords)
    if not pool:
        ctx.trace.fallback(
            "retrieval: no passages for the comparison keywords -> answered without passages"
        )
    source_of = {p.id: q for p, q in zip(pool, sources, strict=True)}
    ranked = await ctx.search.rerank(ctx.question, pool, ctx.top_k)
    cited = ctx.citations.cite(ranked, [source_of[p.id] for p in ranked])
    messages = comparison_messages(ctx.question, plan.compare_type, plan.keywords, cited)
    return Final("answer", await guide(ctx, messages))


PIPELINE = Pipeline(prepare, ComparisonPlan, lambda q, _o: comparison_plan_messages(q))
