"""The vocabulary the core shares with its clients: the nf-cats question types (in the label
order of the original model) and the answering modes."""

from __future__ import annotations

from enum import StrEnum

# How a question is answered: type-aware pipelines, or the paper's two baselines
# (plain RAG, the LLM alone). The server offers them as model names.
MODES: tuple[str, ...] = ("typed-rag", "rag", "llm")


class QuestionType(StrEnum):
    NOT_A_QUESTION = "NOT-A-QUESTION"
    FACTOID = "FACTOID"
    DEBATE = "DEBATE"
    EVIDENCE_BASED = "EVIDENCE-BASED"
    INSTRUCTION = "INSTRUCTION"
    REASON = "REASON"
    EXPERIENCE = "EXPERIENCE"
    COMPARISON = "COMPARISON"

    @classmethod
    def parse(cls, value: str) -> QuestionType:
        """Accept the label in any case, with '-', '_' or ' ' separators."""
        key = value.strip().upper().replace("_", "-").replace(" ", "-")
        try:
            return cls(key)
        except ValueError:
            names = ", ".join(t.value for t in cls)
            raise ValueError(f"unknown question type {value!r}; expected one of: {names}") from None


def parse_type_list(value: object) -> object:
    """A settings list of types: "A,B" (from --set) or a list, in any label spelling, as the
    canonical labels; a ValueError names a bad one. Anything else is left to validation."""
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if isinstance(value, list):
        return [QuestionType.parse(v).value if isinstance(v, str) else v for v in value]
    return value


# Index i is the nf-cats class id i.
LABELS: tuple[QuestionType, ...] = tuple(QuestionType)

# Types answered by plain RAG in Typed-RAG.
PLAIN_RAG_TYPES = frozenset(
    {QuestionType.NOT_A_QUESTION, QuestionType.FACTOID, QuestionType.EVIDENCE_BASED}
)

# The types answered by a typed pipeline of their own (the evaluation's "typed subset").
TYPED_TYPES: tuple[str, ...] = tuple(t.value for t in QuestionType if t not in PLAIN_RAG_TYPES)
