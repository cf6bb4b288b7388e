"""One pipeline per question type; each returns the final generation for TypedRAG to run.

:func:`typed_rag.routing.choose` picks it: ``llm`` and ``rag`` are the
paper's baselines, ``typed-rag`` routes by type (DESIGN.md's table).

Adding a pipeline: one module that owns its plan model (see
:class:`~typed_rag.pipelines.base.Plan`), schema, parser, prompts and
``prepare``, exposed as a :class:`~typed_rag.pipelines.base.Pipeline`, plus its
line in :data:`TYPED`. Its plan is then printed by ``typed-rag ask`` and
replayed by the fake engine without further changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from typed_rag.pipelines import comparison, debate, decomposition, experience, plain
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


def plan_models() -> list[type[Plan]]:
    """Every route's plan model, once each, in the table's order."""
    models: list[type[Plan]] = []
    for route in TYPED.values():
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
    "MODES",
    "TYPED",
    "Context",
    "Final",
    "Pipeline",
    "Plan",
    "Prepare",
    "describe_plan",
    "example_plans",
    "plan_models",
]
