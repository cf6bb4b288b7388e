"""One pipeline per question type; each returns the final generation for TypedRAG to run.

``pipeline_for(mode, question_type)`` picks it: ``llm`` and ``rag`` are the
paper's baselines, ``typed-rag`` routes by type (DESIGN.md's table).

Adding a pipeline: one module that owns its plan model (see
:class:`~typed_rag.pipelines.base.Plan`), schema, parser, prompts and
``prepare``, exposed as a :class:`~typed_rag.pipelines.base.Pipeline`, plus its
line in :data:`TYPED`. Its plan is then printed by ``typed-rag ask`` and
replayed by the fake engine without further changes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from typed_rag.errors import UserError
from typed_rag.pipelines import augmented, comparison, debate, decomposition, experience, plain
from typed_rag.pipelines.base import Context, Final, Pipeline, Plan, Prepare
from typed_rag.types import MODES, QuestionType

TYPED: dict[QuestionType, Pipeline] = {
    QuestionType.NOT_A_QUESTION: plain.RAG,
    QuestionType.FACTOID: plain.FACTOID,
    QuestionType.EVIDENCE_BASED: plain.RAG,
    QuestionType.COMPARISON: comparison.PIPELINE,
    QuestionType.EXPERIENCE: experience.PIPELINE,
    QuestionType.REASON: decomposition.REASON,
    QuestionType.INSTRUCTION: decomposition.INSTRUCTION,
    QuestionType.DEBATE: debate.PIPELINE,
}

# Types listed in ``augment.types`` get this route instead of their own.
AUGMENTED: Pipeline = augmented.PIPELINE


def pipeline_for(
    mode: str, question_type: QuestionType, augmented_types: Collection[str] = ()
) -> Prepare:
    """The pipeline for a mode and type; types in ``augmented_types`` (``augment.types``)
    get core sub-question augmentation instead of their own pipeline."""
    if mode == "llm":
        return plain.LLM.prepare
    if mode == "rag":
        return plain.RAG.prepare
    if mode == "typed-rag":
        if question_type.value in augmented_types:
            return AUGMENTED.prepare
        return TYPED[question_type].prepare
    raise UserError(f"unknown mode {mode!r}; expected one of: {', '.join(MODES)}")


def plan_models() -> list[type[Plan]]:
    """Every route's plan model, once each: the augmented route's first, then the table's."""
    models: list[type[Plan]] = []
    for route in (AUGMENTED, *TYPED.values()):
        if route.plan is not None and route.plan not in models:
            models.append(route.plan)
    return models


def example_plans() -> dict[str, str]:
    """A valid plan reply per plan schema title (what the fake engine replays)."""
    return {model.title: model.example for model in plan_models()}


def describe_plan(trace: Mapping[str, Any]) -> list[str]:
    """``Result.plan`` as lines for people, each plan model describing its own part."""
    return [line for model in plan_models() for line in model.describe(trace)]


__all__ = [
    "AUGMENTED",
    "MODES",
    "TYPED",
    "Context",
    "Final",
    "Pipeline",
    "Plan",
    "Prepare",
    "describe_plan",
    "example_plans",
    "pipeline_for",
    "plan_models",
]
