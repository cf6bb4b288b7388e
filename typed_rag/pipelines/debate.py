"""DEBATE: topic + 2-5 perspectives, one biased sub-query each, one answer each, then a mediator.

Three engine rounds: the plan, every perspective's answer in one batch, the mediator.
``method.max_sub_queries`` caps the perspectives; ``method.*`` grounding options
shape the mediation (see ``grounding``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from typed_rag.json_reply import (
    PlanError,
    clean_strings,
    extract_json,
    is_placeholder,
    lookup,
    norm_key,
)
from typed_rag.messages import ANALYST_SYSTEM, Messages, chat
from typed_rag.method_settings import MethodOptions
from typed_rag.pipelines.base import Context, Final, Pipeline, plan_or_fallback
from typed_rag.pipelines.grounding import anchor_queries, combine, options
from typed_rag.pipelines.plain import answer_sub_queries, prepare_rag

MIN_PERSPECTIVES = 2
MAX_PERSPECTIVES = 5

# The perspective name of the question itself (``method.question_sub_query``).

MEDIATOR_SYSTEM = "You are the mediator of a debate between participants with different views."


@dataclass
class Perspective:
    perspective: str
    query: str


@dataclass
class DebatePlan:
    topic: str
    perspectives: list[Perspective] = field(default_factory=list)

    title: ClassVar[str] = "debate_plan"
    example: ClassVar[str] = json.dumps(
        {
            "debate_topic": "nuclear power",
            "dist_opinion": ["supporters", "opponents"],
            "sub_queries": {
                "supporters": "benefits of nuclear power",
                "opponents": "risks of nuclear power",
            },
        }
    )

    def to_trace(self) -> dict[str, Any]:
        return {
            "debate_topic": self.topic,
            "perspectives": [
                {"perspective": p.perspective, "query": p.query} for p in self.perspectives
            ],
        }

    @classmethod
    def describe(cls, trace: Mapping[str, Any]) -> list[str]:
        if not trace.get("perspectives"):
            return []
        return [f"plan: debate topic: {trace.get('debate_topic', '')}"] + [
            f"  - {p['perspective']}: {p['query']}" for p in trace["perspectives"]
        ]


def debate_schema(limit: int = MAX_PERSPECTIVES) -> dict[str, Any]:
    """The debate plan: a topic and 2 to ``limit`` perspectives, one sub-query each."""
    return {
        "title": DebatePlan.title,
        "type": "object",
        "properties": {
            "debate_topic": {"type": "string", "minLength": 1},
            "dist_opinion": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "minItems": MIN_PERSPECTIVES,
                "maxItems": limit,
            },
            "sub_queries": {
                "type": "object",
                # Free keys (one per perspective); the 2-5 bound is checked by the parser,
                # since not every grammar backend supports min/maxProperties.
                "additionalProperties": {"type": "string", "minLength": 1},
            },
        },
        "required": ["debate_topic", "dist_opinion", "sub_queries"],
        "additionalProperties": False,
    }


DEBATE_SCHEMA: dict[str, Any] = debate_schema()


def parse_debate(text: str, limit: int = MAX_PERSPECTIVES) -> DebatePlan:
    """Topic and 2 to ``limit`` perspectives with their sub-queries."""
    data = extract_json(text)
    if not isinstance(data, dict):
        raise PlanError("debate plan is not an object")
    topic = lookup(data, "debate_topic", "topic")
    topic = " ".join(topic.split()) if isinstance(topic, str) else ""
    opinions_raw = lookup(data, "dist_opinion", "opinions", "perspectives")
    opinions = (
        clean_strings(opinions_raw, MAX_PERSPECTIVES * 2) if isinstance(opinions_raw, list) else []
    )
    queries = lookup(data, "sub_queries", "subqueries", "queries")

    pairs: list[tuple[str, str]] = []
    if isinstance(queries, dict):
        by_key = {norm_key(str(k)): v for k, v in queries.items()}
        items = list(queries.items())
        if opinions:
            for i, op in enumerate(opinions):
                q = queries.get(op, by_key.get(norm_key(op)))
                if q is None and len(items) == len(opinions):
                    q = items[i][1]  # keys renamed by the model; match by position
                pairs.append((op, q if isinstance(q, str) else ""))
        else:
            pairs = [(str(k), v if isinstance(v, str) else "") for k, v in items]
    elif isinstance(queries, list):
        for i, item in enumerate(queries):
            if isinstance(item, dict):
                op = lookup(item, "opinion", "perspective", "view")
                q = lookup(item, "query", "sub_query")
                if not isinstance(op, str):
                    op = opinions[i] if i < len(opinions) else ""
                pairs.append((op, q if isinstance(q, str) else ""))
            elif isinstance(item, str) and i < len(opinions):
                pairs.append((opinions[i], item))
    else:
        raise PlanError("debate plan has no sub_queries")

    perspectives: list[Perspective] = []
    seen: set[str] = set()
    for op, q in pairs:
        op, q = " ".join(op.split()), " ".join(q.split())
        if not op or not q or q.lower() in seen or is_placeholder(q):
            continue
        seen.add(q.lower())
        perspectives.append(Perspective(op, q))
    perspectives = perspectives[:limit]
    if len(perspectives) < MIN_PERSPECTIVES:
        raise PlanError(
            f"debate plan has {len(perspectives)} usable perspectives with sub-queries, "
            f"need at least {MIN_PERSPECTIVES}"
        )
    return DebatePlan(topic, perspectives)


def debate_plan_messages(question: str, limit: int = 5) -> Messages:
    """Topic, 2-``limit`` perspectives, and one sub-query biased toward each perspective."""
    user = (
        "Act as a query analyst. The question below is a debate question: people answer it "
        "from different standpoints.\n"
        "1. State the topic of the debate.\n"
        f"2. Name 2 to {limit} distinct perspectives on it.\n"
        "3. For each perspective write one search query leaning toward that perspective, so "
        "that it finds passages supporting that view.\n\n"
        "### Output format\n"
        '{"debate_topic": "topic", "dist_opinion": ["perspective", ...], '
        '"sub_queries": {"perspective": "query leaning toward it", ...}}\n\n'
        "### Example\n"
        'Question: "Should homework be banned in primary schools?"\n'
        'Output: {"debate_topic": "homework in primary schools", "dist_opinion": ["against '
        'homework", "for homework"], "sub_queries": {"against homework": "harms of homework '
        'for young children", "for homework": "benefits of homework for primary pupils"}}\n\n'
        f"### Question\n{question}\n\n"
        "### Output\n"
    )
    return chat(ANALYST_SYSTEM, user)


def mediator_messages(
    question: str,
    topic: str,
    responses: Sequence[tuple[str, str]],
) -> Messages:
    """Summarise the perspectives' answers into a fair, balanced direct answer."""
    heading = "Responses"
    lines = "\n".join(
        f'- Response {i} (perspective: {view}): "{answer.strip()}"'
        for i, (view, answer) in enumerate(responses, 1)
    )
    grounding = "Keep the citation numbers such as [2] that the responses use. "
    refs = ""
    user = (
        "Below are a debate topic and the responses of participants who each hold a "
        "different perspective. Weigh the topic and every viewpoint and write a fair, "
        "balanced answer: cover the main points, say where the views disagree, and keep it "
        "short. Answer the question directly; do not mention a debate or participants. "
        f"{grounding}\n\n"
        f"### Question\n{question}\n\n"
        f"### Debate topic\n{topic}\n\n"
        f"{refs}"
        f"### {heading}\n{lines}\n\n"
        "### Answer\n"
    )
    return chat(MEDIATOR_SYSTEM, user)


def plan_prompt(question: str, opts: MethodOptions) -> Messages:
    return debate_plan_messages(question, opts.max_sub_queries)


async def prepare(ctx: Context) -> Final:
    opts = options(ctx)
    limit = opts.max_sub_queries
    plan = await plan_or_fallback(
        ctx,
        "debate",
        plan_prompt(ctx.question, opts),
        debate_schema(limit),
        lambda text: parse_debate(text, limit),
    )
    if plan is None:
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
    ctx.trace.set_plan(plan.to_trace())
    views = [p.perspective for p in plan.perspectives]
    queries = anchor_queries(ctx, [p.query for p in plan.perspectives])
    subs = await answer_sub_queries(ctx, queries, perspectives=views, step="perspective")
    return await combine(
        ctx,
        subs,
        "mediate",
        lambda kept: mediator_messages(
            ctx.question, topic, [(s.perspective or "", s.answer) for s in kept]
        ),
        what="perspective answer",
    )


PIPELINE = Pipeline(prepare, DebatePlan, plan_prompt)
