"""Question-type classification (nf-cats taxonomy).

``build_classifier(settings)`` gives the classifier the settings name:
``embedding-head`` (default: a sentence embedding plus a head trained by
``typed-rag classifier train``) or ``nfcats`` (the original RoBERTa checkpoint).
"""

from __future__ import annotations

from typed_rag.classifier.base import TypeClassifier, TypePrediction
from typed_rag.config import Settings


def build_classifier(settings: Settings) -> TypeClassifier:
    """The classifier chosen by ``settings.classifier.kind``, loaded and ready."""
    kind = settings.classifier.kind
    if kind == "embedding-head":
        from typed_rag.classifier.embedding_head import EmbeddingHeadClassifier

        return EmbeddingHeadClassifier.load(settings)
    if kind == "nfcats":
        from typed_rag.classifier.nfcats import NFCatsClassifier

        return NFCatsClassifier.load(settings)
    raise ValueError(f"unknown classifier kind {kind!r}")  # settings validation prevents this


__all__ = ["TypeClassifier", "TypePrediction", "build_classifier"]
