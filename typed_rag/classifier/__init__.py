"""Question-type classification (nf-cats taxonomy).

``build_classifier(settings)`` gives the classifier the settings name:
``embedding-head`` (a sentence embedding plus a head trained by ``typed-rag
classifier train``), ``finetuned`` (all-MiniLM-L6-v2 fine-tuned end to end by
``typed-rag classifier train --kind finetuned``) or ``nfcats`` (the original
RoBERTa checkpoint). ``TypeClassifier.predict(..., allowed=...)`` restricts
the choice to some types.

``build_classifier(settings, interim=True)`` (the server and ``ask``) also covers a fresh
set-up, where the fine-tuned classifier is still training in the background: while only the
embedding head is trained, the head types questions and is replaced by the fine-tuned
classifier once its artefact appears (:mod:`typed_rag.classifier.interim`).
"""

from __future__ import annotations

from typed_rag.classifier.base import TypeClassifier, TypePrediction, restrict
from typed_rag.config import Settings
from typed_rag.errors import UserError


def build_classifier(settings: Settings, *, interim: bool = False) -> TypeClassifier:
    """The classifier chosen by ``settings.classifier.kind``, loaded and ready.

    ``interim``: for ``finetuned``, when its artefact is missing but the embedding head's is
    there, the head standing in until the fine-tuned artefact appears. Without it (evaluation,
    ``classifier eval``), or when neither artefact is there, a missing artefact is a UserError;
    so is a missing library (torch, sentence-transformers: the ``cpu`` extra), since a server
    installed without them still answers, with plain RAG for questions of no forced type.
    """
    try:
        return _build(settings, interim)
    except ModuleNotFoundError as exc:
        raise UserError(
            f"the {settings.classifier.kind} classifier needs {exc.name}, which is not "
            "installed (pip install 'typed-rag[cpu]')"
        ) from None


def _build(settings: Settings, interim: bool) -> TypeClassifier:
    kind = settings.classifier.kind
    if kind == "embedding-head":
        from typed_rag.classifier.embedding_head import EmbeddingHeadClassifier  # heavy: torch

        return EmbeddingHeadClassifier.load(settings)
    if kind == "finetuned":
        from typed_rag.classifier.finetune import FineTunedClassifier  # heavy: torch

        if interim:
            from typed_rag.classifier.interim import head_until_finetuned

            stand_in = head_until_finetuned(settings)
            if stand_in is not None:
                return stand_in
        return FineTunedClassifier.load(settings)
    if kind == "nfcats":
        from typed_rag.classifier.nfcats import NFCatsClassifier  # heavy: torch

        return NFCatsClassifier.load(settings)
    raise ValueError(f"unknown classifier kind {kind!r}")  # settings validation prevents this


__all__ = ["TypeClassifier", "TypePrediction", "build_classifier", "restrict"]
