"""The core sub-questions of a question (Xie et al., "Do RAG Systems Cover What Matters?").

The points any complete answer must address. The augmented pipeline retrieves
for them, and the ``method.core_sub_questions = "listed"`` guidance names them
in the final prompt of any pipeline, so both share this plan, its prompt and
its parser.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from typed_rag.json_reply import extract_json, lookup, only_list, string_list
from typed_rag.messages import ANALYST_SYSTEM, Messages, chat
from typed_rag.pipelines.base import Context

MAX_SUB_QUESTIONS = 5


@dataclass
class CorePlan:
    sub_questions: list[str]

    title: ClassVar[str] = "core_sub_questions"
    example: ClassVar[str] = json.dumps(
        {"sub_questions": ["what happens to chlorophyll in autumn", "which pigments remain"]}
    )

    def to_trace(self) -> dict[str, Any]:
        return {"core_sub_questions": self.sub_questions}

    @classmethod
    def describe(cls, trace: Mapping[str, Any]) -> list[str]:
        if not trace.get("core_sub_questions"):
            return []
        use = "augmented retrieval" if trace.get("augmented") else "for the answer to cover"
        return [f"plan: core sub-questions ({use}):"] + [
            f"  {i}. {q}" for i, q in enumerate(trace["core_sub_questions"], 1)
        ]


def core_sub_question_schema(limit: int) -> dict[str, Any]:
    return {
        "title": CorePlan.title,
        "type": "object",
        "properties": {
            "sub_questions": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "minItems": 1,
                "maxItems": limit,
            }
        },
        "required": ["sub_questions"],
        "additionalProperties": False,
    }


def parse_core_sub_questions(text: str, limit: int = MAX_SUB_QUESTIONS) -> CorePlan:
    """1 to ``limit`` core sub-questions (any of the sub-query key spellings)."""
    data = extract_json(text)
    if isinstance(data, dict):
        value = lookup(data, "sub_questions", "subquestions", "core", "sub_queries", "questions")
        data = value if value is not None else only_list(data)
    return CorePlan(string_list(data, "sub_questions", 1, limit))


def core_sub_question_messages(question: str, limit: int) -> Messages:
    """The 1-``limit`` sub-questions any complete answer must address (Xie et al.'s "core")."""
    user = (
        "Act as a query analyst. List the core sub-questions of the question below: the "
        "points that any complete answer must address, each a self-contained question "
        "about the question's own subject. Leave out background and follow-up questions.\n\n"
        "### Output format\n"
        f'{{"sub_questions": [1 to {limit} strings]}}\n\n'
        "### Example\n"
        'Question: "What causes inflation in an economy?"\n'
        'Output: {"sub_questions": ["how does growth of the money supply raise prices", '
        '"how do rising demand and production costs push up prices"]}\n\n'
        f"### Question\n{question}\n\n"
        "### Output\n"
    )
    return chat(ANALYST_SYSTEM, user)


async def core_sub_questions(ctx: Context) -> list[str]:
    """The question's core sub-questions (Xie et al.'s M2): the augmented pipeline's when it
    made them, else one plan call. Empty, with a recorded fallback, when it never parses."""
    known = ctx.result.plan.get("core_sub_questions")
    if known:
        return list(known)
    limit = max(1, ctx.settings.augment.max_sub_questions)
    trace: dict[str, object] = {}
    plan = await ctx.plan(
        "core-plan",
        core_sub_question_messages(ctx.question, limit),
        core_sub_question_schema(limit),
        lambda text: parse_core_sub_questions(text, limit),
        trace=trace,
    )
    if plan is None:
        ctx.fallback(
            f"core sub-questions: unparseable after {trace.get('attempts')} attempts "
            "-> the answer is told their definition only"
        )
        return []
    subs = ctx.enforce("core_sub_questions", plan.sub_questions)
    ctx.result.plan["core_sub_questions"] = subs
    return subs
