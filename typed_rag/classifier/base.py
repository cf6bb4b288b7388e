"""The classifier interface: a batch of questions in, a type with probabilities out."""

from __future__ import annotations

import abc
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from typed_rag.types import LABELS, QuestionType

# Questions per forward pass: a request has one, an evaluation batch up to 16, and a
# training epoch embeds NF-CATS in batches of this size.
BATCH_SIZE = 64


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
        self,
        questions: Sequence[str],
        min_confidence: float = 0.0,
        allowed: Collection[QuestionType | str] | None = None,
    ) -> list[TypePrediction]:
        """Top type per question; below ``min_confidence`` the prediction is marked unsure.

        ``allowed`` restricts the choice to those types: the others get
        probability 0 and the rest is renormalised (e.g. the six non-factoid
        types for a benchmark that has no factoid or non-questions), and the
        threshold applies to the renormalised top-1.
        """
        out: list[TypePrediction] = []
        probabilities = self.predict_proba(questions)
        if allowed is not None:
            probabilities = restrict(probabilities, allowed)
        for probs in probabilities:
            best = max(range(len(LABELS)), key=lambda i: probs[i])
            out.append(
                TypePrediction(
                    type=LABELS[best],
                    probabilities={t.value: float(p) for t, p in zip(LABELS, probs, strict=True)},
                    confident=probs[best] >= min_confidence,
                )
            )
        return out


def restrict(
    probabilities: Sequence[Sequence[float]], allowed: Collection[QuestionType | str]
) -> list[list[float]]:
    """Zero the types not in ``allowed`` and renormalise each row over the rest.

    A row with no mass on the allowed types (all exactly 0) becomes uniform over them.
    """
    keep = {QuestionType.parse(str(t)) for t in allowed}
    if not keep:
        raise ValueError("allowed must name at least one question type")
    mask = [t in keep for t in LABELS]
    out: list[list[float]] = []
    for row in probabilities:
        kept = [p if m else 0.0 for p, m in zip(row, mask, strict=True)]
        total = sum(kept)
        if total > 0:
            out.append([p / total for p in kept])
        else:
            out.append([1.0 / len(keep) if m else 0.0 for m in mask])
    return out
