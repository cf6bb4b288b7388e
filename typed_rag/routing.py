"""What happens to a question before its pipeline runs: a follow-up is made standalone,
its coverage constraints are found, and its type and pipeline are chosen (:func:`choose`).

Each step changes the context's question for the steps after it, and records
what it did (or why it fell back) in the trace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from typed_rag.classifier.base import TypePrediction
from typed_rag.config import Settings
from typed_rag.constraints import CONSTRAINT_SCHEMA, detection_messages, has_cue, parse_constraints
from typed_rag.conversation import (
    REWRITE_SCHEMA,
    Turn,
    needs_rewrite,
    parse_rewrite,
    rewrite_messages,
)
from typed_rag.pipelines import TYPED, Context, Pipeline, Prepare, plain
from typed_rag.qtree.answering import prepare_outline_guided
from typed_rag.types import QuestionType

TypeArg = QuestionType | str | None


@dataclass
class Routing:
    """Which type a question is answered as, why, and the pipeline that answers it."""

    type: QuestionType
    source: str  # "forced" | "classifier" | "low-confidence-default" | "none"
    prediction: TypePrediction | None = None
    pipeline: Prepare = plain.RAG.prepare


# typed-rag's pipeline by what is searched and the question's type (docs/method.md gives each
# line's paired evidence). Over Wikipedia: the type's own pipeline, except the types
# ``method.rag_types`` lists, which plain RAG answers (choose). Over a user's documents
# the typed pipelines' intermediate text (plans, sub-answers, perspectives) lost or overrode
# what the shown pages say (issue 77; results/grounding/): one answer from the passages,
# shaped for the type.
ROUTES: dict[str, Mapping[QuestionType, Pipeline]] = {
    "wikipedia": TYPED,
    "documents": dict.fromkeys(QuestionType, plain.GUIDED),
}


def choose(
    mode: str,
    prediction: TypePrediction | None,
    forced: QuestionType | None,
    settings: Settings,
    constrained: bool = False,
    corpus: str = "wikipedia",
) -> Routing:
    """The one place a question's pipeline is chosen.

    The type: a forced one wins; an unsure or missing prediction goes to EVIDENCE-BASED
    (plain RAG, which does no harm). The pipeline: ``llm`` and ``rag`` are the paper's
    baselines whatever the type; ``typed-rag`` takes the pipeline :data:`ROUTES` gives the
    corpus kind and type, plain RAG over Wikipedia for a type ``method.rag_types`` lists
    (its own pipeline lost to RAG), or the outline-guided route for a Wikipedia question
    with coverage constraints under ``constraints.outline``.
    """
    if forced is not None:
        routing = Routing(forced, "forced", prediction)
    elif prediction is None:
        routing = Routing(QuestionType.EVIDENCE_BASED, "none")
    elif not prediction.confident:
        routing = Routing(QuestionType.EVIDENCE_BASED, "low-confidence-default", prediction)
    else:
        routing = Routing(prediction.type, "classifier", prediction)
    if mode == "llm":
        routing.pipeline = plain.LLM.prepare
    elif mode == "rag":
        routing.pipeline = plain.RAG.prepare
    elif constrained and settings.constraints.outline and corpus == "wikipedia":
        routing.pipeline = prepare_outline_guided
    elif corpus == "wikipedia" and routing.type.value in settings.method.options().rag_types:
        routing.pipeline = plain.RAG.prepare
    else:
        routing.pipeline = ROUTES[corpus][routing.type].prepare
    return routing


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
    messages = rewrite_messages(history, original)
    standalone = await ctx.rounds.plan(
        "rewrite", messages, REWRITE_SCHEMA, parse_rewrite, trace, ctx.constraints
    )
    if standalone is None:
        ctx.trace.fallback("rewrite: reply unparseable -> the message used as the question")
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
    found = await ctx.rounds.plan(
        "constraints",
        detection_messages(original),
        CONSTRAINT_SCHEMA,
        lambda text: parse_constraints(text, original),
        trace=trace,
        constraints=ctx.constraints,
    )
    if found is None:
        ctx.trace.fallback("constraints: detector output unparseable -> question used as is")
        ctx.result.constraints = {"detected": False, **trace}
        return False
    ctx.result.constraints = {"detected": not found.empty, **found.to_trace(), **trace}
    if found.empty:
        return False
    ctx.constraints = found
    ctx.question = found.question
    return found.question != original
