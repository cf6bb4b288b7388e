"""The label-based evaluation routes: when the classifier may overrule a question's label."""

from __future__ import annotations

import pytest

from eval.data.routes import label_route
from typed_rag.classifier.base import TypePrediction
from typed_rag.types import QuestionType as Q


def predicted(t: Q, confident: bool = True) -> TypePrediction:
    return TypePrediction(t, {t.value: 0.9 if confident else 0.3}, confident=confident)


@pytest.mark.parametrize(
    ("route", "prediction", "expected"),
    [
        # The labels route never reads the classifier.
        ("labels", predicted(Q.FACTOID), "DEBATE"),
        ("labels", predicted(Q.REASON), "DEBATE"),
        # labels-factoid: only a confident FACTOID overrules the label.
        ("labels-factoid", predicted(Q.FACTOID), "FACTOID"),
        ("labels-factoid", predicted(Q.REASON), "DEBATE"),
        ("labels-factoid", predicted(Q.FACTOID, confident=False), "DEBATE"),
        # labels-classifier: a confident FACTOID or typed type overrules it ...
        ("labels-classifier", predicted(Q.FACTOID), "FACTOID"),
        ("labels-classifier", predicted(Q.REASON), "REASON"),
        ("labels-classifier", predicted(Q.INSTRUCTION), "INSTRUCTION"),
        # ... a plain-RAG type, an unsure or a missing prediction does not.
        ("labels-classifier", predicted(Q.EVIDENCE_BASED), "DEBATE"),
        ("labels-classifier", predicted(Q.NOT_A_QUESTION), "DEBATE"),
        ("labels-classifier", predicted(Q.REASON, confident=False), "DEBATE"),
        ("labels-classifier", None, "DEBATE"),
    ],
)
def test_label_route(route: str, prediction: TypePrediction | None, expected: str) -> None:
    assert label_route("DEBATE", prediction, route) == expected
