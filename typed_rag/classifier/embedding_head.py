"""The default type classifier: a sentence embedding and a small trained head, and beside
them (as ``classifier train`` builds it) a logistic regression on TF-IDF features of the question's
words; the two calibrated probabilities are combined by a geometric mean.

The artefact is one small safetensors file in ``settings.classifier_dir``:
the head weights, and in its metadata the label order, the embedder it was
trained on, the calibration temperature and the valid-set metrics.
``typed-rag classifier train`` writes it; loading a missing one is a
:class:`UserError` that says so.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from typed_rag.classifier.artefact import read_artefact, write_artefact
from typed_rag.classifier.base import BATCH_SIZE, TypeClassifier
from typed_rag.classifier.head import MLPHead, logits_of, softmax
from typed_rag.classifier.lexical import TENSOR_PREFIX as LEXICAL
from typed_rag.classifier.lexical import LexicalPart, add_to_artefact
from typed_rag.config import Settings
from typed_rag.encoder import embed_questions, embedding_dim, load_sentence_model
from typed_rag.errors import UserError
from typed_rag.types import LABELS

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer  # heavy: sentence_transformers

log = logging.getLogger(__name__)

ARTEFACT_NAME = "type_head.safetensors"
METRICS_NAME = "metrics.json"
FORMAT = "typed-rag/type-head/1"


@dataclass
class HeadMeta:
    """What the artefact records beside the weights."""

    embedder: str
    dim: int
    hidden: int
    labels: list[str] = field(default_factory=lambda: [t.value for t in LABELS])
    temperature: float = 1.0
    lowercase: bool = True
    seed: int = 0
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    # The lexical model beside the head (``LexicalPart.meta()``), or None; its weights
    # are the artefact's ``lexical.*`` tensors.
    lexical: dict[str, Any] | None = None


def artefact_path(settings: Settings) -> Path:
    return settings.classifier_dir / ARTEFACT_NAME


def save_artefact(
    path: Path, head: MLPHead, meta: HeadMeta, lexical: LexicalPart | None = None
) -> None:
    """Write weights and metadata atomically (temp name, then rename); the lexical part's
    metadata replaces ``meta.lexical``."""
    tensors = dict(head.state_dict())
    fields = asdict(meta)
    add_to_artefact(lexical, tensors, fields)
    write_artefact(path, tensors, FORMAT, fields)


def load_artefact(path: Path) -> tuple[MLPHead, HeadMeta]:
    """Read a head written by :func:`save_artefact`; a missing or foreign file is a UserError."""
    head, meta, _ = load_artefact_with_lexical(path)
    return head, meta


def load_artefact_with_lexical(path: Path) -> tuple[MLPHead, HeadMeta, LexicalPart | None]:
    """The head, the metadata and the lexical part (None if the head was trained alone)."""
    if not path.is_file():
        raise UserError(
            f"no trained question-type classifier at {path}; run `typed-rag classifier train` "
            "(the set-up step does), or set classifier.path to the folder that holds "
            f"{ARTEFACT_NAME}"
        )
    fields, tensors = read_artefact(path, FORMAT, "typed-rag classifier artefact", tensors=True)
    meta = HeadMeta(**fields)
    head = MLPHead(meta.dim, meta.hidden, n_labels=len(meta.labels))
    lexical = None
    try:
        head.load_state_dict({k: v for k, v in tensors.items() if not k.startswith(LEXICAL)})
        if meta.lexical is not None:
            lexical = LexicalPart.from_artefact(meta.lexical, tensors, LEXICAL, len(meta.labels))
    except RuntimeError as exc:
        raise UserError(f"{path}: weights do not match the recorded shape: {exc}") from exc
    head.eval()
    return head, meta, lexical


class EmbeddingHeadClassifier(TypeClassifier):
    """Sentence embedding of the lower-cased question, MLP head, temperature-scaled softmax;
    with a lexical model, the calibrated geometric mean of both, calibrated again."""

    name = "embedding-head"

    def __init__(
        self,
        encoder: SentenceTransformer,
        head: MLPHead,
        meta: HeadMeta,
        batch_size: int = 64,
        lexical: LexicalPart | None = None,
    ) -> None:
        dim = embedding_dim(encoder)
        if dim != meta.dim:
            raise UserError(
                f"embedder {meta.embedder!r} gives {dim}-d vectors but the head expects "
                f"{meta.dim}-d; retrain with `typed-rag classifier train`"
            )
        self.encoder = encoder
        self.head = head
        self.meta = meta
        self.batch_size = batch_size
        self.lexical = lexical

    @classmethod
    def load(cls, settings: Settings) -> EmbeddingHeadClassifier:
        """The artefact in ``settings.classifier_dir`` with the embedder it was trained on."""
        head, meta, lexical = load_artefact_with_lexical(artefact_path(settings))
        encoder = load_sentence_model(settings, meta.embedder, settings.classifier.device)
        return cls(encoder, head, meta, batch_size=BATCH_SIZE, lexical=lexical)

    def proba_from_embeddings(self, x: np.ndarray) -> np.ndarray:
        """The head's calibrated probabilities, shape ``(n, 8)``, nf-cats label order."""
        if len(x) == 0:
            return np.zeros((0, len(LABELS)))
        with torch.inference_mode():
            logits = logits_of(self.head, x)
        return softmax(logits, self.meta.temperature)

    def predict_proba(self, questions: Sequence[str]) -> list[list[float]]:
        if not questions:
            return []
        x = embed_questions(self.encoder, list(questions), batch_size=self.batch_size)
        p = self.proba_from_embeddings(x)
        if self.lexical is not None:
            p = self.lexical.join(p, questions)
        return p.tolist()
