"""What happens to a question before its pipeline runs: a follow-up is made standalone,
its coverage constraints are found, and the type it is answered as is chosen.

Each step changes the context's question for the steps after it, and records
what it did (or why it fell back) in the trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from typed_rag.classifier.base import TypePrediction
from typed_rag.constraints import CONSTRAINT_SCHEMA, detection_messages, has_cue, parse_constraints
from typed_rag.conversation import (
    REWRITE_SCHEMA,
    Turn,
    needs_rewrite,
    parse_rewrite,
    rewrite_messages,
)
from typed_rag.errors import UserError
from typed_rag.pipelines import Context
from typed_rag.types import QuestionType

TypeArg = QuestionType | str | None


@dataclass
class Routing:
    """Which type a question is answered as, and why."""

    type: QuestionType
    source: str  # "forced" | "classifier" | "low-confidence-default" | "none"
    prediction: TypePrediction | None = None
    routed_from: QuestionType | None = None  # the type chosen, when answered as another


def answered_as(routing: Routing, debate_route: str) -> Routing:
    """A DEBATE question goes to REASON's pipeline under ``method.debate_route=reason``."""
    if routing.type is QuestionType.DEBATE and debate_route == "reason":
        return replace(routing, type=QuestionType.REASON, routed_from=QuestionType.DEBATE)
    return routing


def route(prediction: TypePrediction | None, force_type: TypeArg = None) -> Routing:
    """Forced type wins; an unsure or missing prediction goes to EVIDENCE-BASED (plain RAG)."""
    if force_type is not None:
        return Routing(parse_type(force_type), "forced", prediction)
    if prediction is None:
        return Routing(QuestionType.EVIDENCE_BASED, "none")
    if not prediction.confident:
        return Routing(QuestionType.EVIDENCE_BASED, "low-confidence-default", prediction)
    return Routing(prediction.type, "classifier", prediction)


def parse_type(value: QuestionType | str) -> QuestionType:
    """A type or its label in any spelling; :class:`UserError` for an unknown one."""
    if isinstance(value, QuestionType):
        return value
    try:
        return QuestionType.parse(value)
    except ValueError as exc:
        raise UserError(str(exc)) from None


async def make_standalone(ctx: Context, history: Sequence[Turn]) -> bool:
    """Make a follow-up standalone from its conversation (``conversation.rewrite``).

    On success the context's question becomes the standalone question, which
    then drives classification, planning and retrieval; returns whether it
    changed. A reply that never parses is a recorded fallback.
    """
    conv = ctx.settings.conversation
    original = ctx.question
    if conv.rewrite == "off" or (conv.rewrite == "cue" and not needs_rewrite(original)):
        reason = "off" if conv.rewrite == "off" else "self-contained"
        ctx.result.rewrite = {"question": original, "rewritten": False, "skipped": reason}
        return False
    trace: dict[str, Any] = {}
    messages = rewrite_messages(
        history, original, max_turns=conv.max_turns, max_turn_chars=conv.max_turn_chars
    )
    standalone = await ctx.plan("rewrite", messages, REWRITE_SCHEMA, parse_rewrite, trace)
    if standalone is None:
        ctx.fallback("rewrite: reply unparseable -> the message used as the question")
        ctx.result.rewrite = {"question": original, "rewritten": False, **trace}
        return False
    changed = standalone != original
    ctx.result.rewrite = {"question": standalone, "rewritten": changed, **trace}
    ctx.question = standalone
    return changed


async def detect_constraints(ctx: Context) -> bool:
    """Find include/exclude subtopics in the question (``constraints.mode``).

    On success the context carries them and its question becomes the core
    question; returns whether the question changed. A detector reply that
    never parses is a recorded fallback, and the question goes on as is.
    """
    mode = ctx.settings.constraints.mode
    if mode == "off" or (mode == "cue" and not has_cue(ctx.question)):
        return False
    original = ctx.question
    trace: dict[str, Any] = {}
    found = await ctx.plan(
        "constraints",
        detection_messages(original),
        CONSTRAINT_SCHEMA,
        lambda text: parse_constraints(text, original),
        trace=trace,
    )
    if found is None:
        ctx.fallback("constraints: detector output unparseable -> question used as is")
        ctx.result.constraints = {"detected": False, **trace}
        return False
    ctx.result.constraints = {"detected": not found.empty, **found.to_trace(), **trace}
    if found.empty:
        return False
    ctx.constraints = found
    ctx.question = found.question
    return found.question != original
