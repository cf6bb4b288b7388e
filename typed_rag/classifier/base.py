"""The classifier interface: a batch of questions in, a type with probabilities out."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass

from typed_rag.types import LABELS, QuestionType


@dataclass
class TypePrediction:
    """The predicted type, all 8 probabilities, and whether the top-1 cleared the threshold."""

    type: QuestionType
    probabilities: dict[str, float]
    confident: bool = True

    @property
    def top_probability(self) -> float:
        return self.probabilities[self.type.value]


class TypeClassifier(abc.ABC):
    name: str = "classifier"

    @abc.abstractmethod
    def predict_proba(self, questions: Sequence[str]) -> list[list[float]]:
        """Probabilities over :data:`LABELS` (nf-cats order) for each question."""

    def predict(
        self, questions: Sequence[str], min_confidence: float = 0.0
    ) -> list[TypePrediction]:
        """Top type per question; below ``min_confidence`` the prediction is marked unsure."""
        out: list[TypePrediction] = []
        for probs in self.predict_proba(questions):
            best = max(range(len(LABELS)), key=lambda i: probs[i])
            out.append(
                TypePrediction(
                    type=LABELS[best],
                    probabilities={t.value: float(p) for t, p in zip(LABELS, probs, strict=True)},
                    confident=probs[best] >= min_confidence,
                )
            )
        return out
