"""Question-type classification (nf-cats taxonomy).

``build_classifier(settings)`` gives the classifier the settings name:
``embedding-head`` (a sentence embedding plus a head trained by ``typed-rag
classifier train``), ``finetuned`` (all-MiniLM-L6-v2 fine-tuned end to end by
``typed-rag classifier train --kind finetuned``) or ``nfcats`` (the original
RoBERTa checkpoint). ``TypeClassifier.predict(..., allowed=...)`` restricts
the choice to some types.
"""

from __future__ import annotations

from typed_rag.classifier.base import TypeClassifier, TypePrediction, restrict
from typed_rag.config import Settings


def build_classifier(settings: Settings) -> TypeClassifier:
    """The classifier chosen by ``settings.classifier.kind``, loaded and ready."""
    kind = settings.classifier.kind
    if kind == "embedding-head":
        from typed_rag.classifier.embedding_head import EmbeddingHeadClassifier  # heavy: torch

        return EmbeddingHeadClassifier.load(settings)
    if kind == "finetuned":
        from typed_rag.classifier.finetune import FineTunedClassifier  # heavy: torch

        return FineTunedClassifier.load(settings)
    if kind == "nfcats":
        from typed_rag.classifier.nfcats import NFCatsClassifier  # heavy: torch

        return NFCatsClassifier.load(settings)
    raise ValueError(f"unknown classifier kind {kind!r}")  # settings validation prevents this


__all__ = ["TypeClassifier", "TypePrediction", "build_classifier", "restrict"]
