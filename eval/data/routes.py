"""Which pipeline answers a labelled question in an evaluation (``eval.route``).

Wiki-NFQA's questions carry a recorded label (the typed subset is defined by it). The
server routes by its classifier instead; the label-based routes may let the classifier
overrule the label where it is confident:

- ``labels``: the label;
- ``labels-factoid``: FACTOID where the classifier is confident of it (Wiki-NFQA's
  questions come from factoid datasets), the label otherwise;
- ``labels-classifier``: the classifier's route wherever it is confident of FACTOID or of
  one of the typed types (as the server would answer it), the label otherwise, so an
  EVIDENCE-BASED, NOT-A-QUESTION or unsure prediction keeps the label's pipeline.
"""

from __future__ import annotations

from typed_rag.classifier.base import TypePrediction
from typed_rag.types import TYPED_TYPES, QuestionType

# The routes that read the classifier's prediction on top of the label.
CLASSIFIED = ("labels-factoid", "labels-classifier")


def label_route(label: str, prediction: TypePrediction | None, route: str) -> str:
    """The pipeline a question labelled ``label`` takes under a label-based ``route``."""
    if route not in CLASSIFIED or prediction is None or not prediction.confident:
        return label
    predicted = prediction.type
    if predicted is QuestionType.FACTOID:
        return predicted.value
    if route == "labels-classifier" and predicted.value in TYPED_TYPES:
        return predicted.value
    return label
