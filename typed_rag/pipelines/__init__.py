"""One pipeline per question type; each returns the final generation for TypedRAG to run.

``pipeline_for(mode, question_type)`` picks it: ``llm`` and ``rag`` are the
paper's baselines, ``typed-rag`` routes by type (DESIGN.md's table).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection

from typed_rag.errors import UserError
from typed_rag.pipelines import augmented, comparison, debate, decomposition, experience
from typed_rag.pipelines.base import Context, Final
from typed_rag.pipelines.plain import prepare_llm, prepare_rag
from typed_rag.types import QuestionType

Prepare = Callable[[Context], Awaitable[Final]]

MODES = ("typed-rag", "rag", "llm")

TYPED: dict[QuestionType, Prepare] = {
    QuestionType.NOT_A_QUESTION: prepare_rag,
    QuestionType.FACTOID: prepare_rag,
    QuestionType.EVIDENCE_BASED: prepare_rag,
    QuestionType.COMPARISON: comparison.prepare,
    QuestionType.EXPERIENCE: experience.prepare,
    QuestionType.REASON: decomposition.prepare_reason,
    QuestionType.INSTRUCTION: decomposition.prepare_instruction,
    QuestionType.DEBATE: debate.prepare,
}


def pipeline_for(
    mode: str, question_type: QuestionType, augmented_types: Collection[str] = ()
) -> Prepare:
    """The pipeline for a mode and type; types in ``augmented_types`` (``augment.types``)
    get core sub-question augmentation instead of their own pipeline."""
    if mode == "llm":
        return prepare_llm
    if mode == "rag":
        return prepare_rag
    if mode == "typed-rag":
        if question_type.value in augmented_types:
            return augmented.prepare
        return TYPED[question_type]
    raise UserError(f"unknown mode {mode!r}; expected one of: {', '.join(MODES)}")


__all__ = ["MODES", "TYPED", "Context", "Final", "Prepare", "pipeline_for"]
