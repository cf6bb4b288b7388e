"""The default type classifier: a sentence embedding (plus, optionally, TF-IDF features of
the question's words) and a small trained head.

The artefact is one small safetensors file in ``settings.classifier_dir``:
the head weights, and in its metadata the label order, the embedder it was
trained on, the calibration temperature and the valid-set metrics.
``typed-rag classifier train`` writes it; loading a missing one is a
:class:`UserError` that says so.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from typed_rag.classifier.base import TypeClassifier
from typed_rag.classifier.embedder import embed_questions, embedding_dim, load_sentence_model
from typed_rag.classifier.head import MLPHead, logits_of, softmax
from typed_rag.classifier.lexical import Vocabulary
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.types import LABELS

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

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
    # TF-IDF features appended to the embedding ({"terms": [...], "idf": [...]}), or None.
    lexical: dict[str, list[Any]] | None = None


def artefact_path(settings: Settings) -> Path:
    return settings.classifier_dir / ARTEFACT_NAME


def save_artefact(path: Path, head: MLPHead, meta: HeadMeta) -> None:
    """Write weights and metadata atomically (temp name, then rename)."""
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tensors = {k: v.detach().contiguous() for k, v in head.state_dict().items()}
    save_file(tensors, str(tmp), metadata={"format": FORMAT, "meta": json.dumps(asdict(meta))})
    tmp.replace(path)


def load_artefact(path: Path) -> tuple[MLPHead, HeadMeta]:
    """Read a head written by :func:`save_artefact`; a missing or foreign file is a UserError."""
    from safetensors import SafetensorError, safe_open

    if not path.is_file():
        raise UserError(
            f"no trained question-type classifier at {path}; run `typed-rag classifier train` "
            "(the set-up step does), or set classifier.path to the folder that holds "
            f"{ARTEFACT_NAME}"
        )
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    except (SafetensorError, OSError) as exc:
        raise UserError(f"{path}: not a readable classifier artefact ({exc})") from exc
    if metadata.get("format") != FORMAT:
        raise UserError(
            f"{path}: not a typed-rag classifier artefact (format {metadata.get('format')!r})"
        )
    meta = HeadMeta(**json.loads(metadata["meta"]))
    if meta.labels != [t.value for t in LABELS]:
        raise UserError(f"{path}: label order {meta.labels} differs from nf-cats order; retrain")
    head = MLPHead(meta.dim, meta.hidden, n_labels=len(meta.labels))
    try:
        head.load_state_dict(tensors)
    except RuntimeError as exc:
        raise UserError(f"{path}: weights do not match the recorded shape: {exc}") from exc
    head.eval()
    return head, meta


class EmbeddingHeadClassifier(TypeClassifier):
    """Sentence embedding of the lower-cased question, MLP head, temperature-scaled softmax."""

    name = "embedding-head"

    def __init__(
        self,
        encoder: SentenceTransformer,
        head: MLPHead,
        meta: HeadMeta,
        batch_size: int = 64,
    ) -> None:
        self.vocabulary = Vocabulary(**meta.lexical) if meta.lexical else None
        extra = len(self.vocabulary.terms) if self.vocabulary else 0
        dim = embedding_dim(encoder)
        if dim + extra != meta.dim:
            raise UserError(
                f"embedder {meta.embedder!r} gives {dim}-d vectors (+{extra} lexical) but the "
                f"head expects {meta.dim}-d; retrain with `typed-rag classifier train`"
            )
        self.encoder = encoder
        self.head = head
        self.meta = meta
        self.batch_size = batch_size

    @classmethod
    def load(cls, settings: Settings) -> EmbeddingHeadClassifier:
        """The artefact in ``settings.classifier_dir`` with the embedder it was trained on."""
        head, meta = load_artefact(artefact_path(settings))
        if meta.embedder != settings.classifier.embedder:
            log.info(
                "classifier head was trained on %s; using it (settings name %s)",
                meta.embedder,
                settings.classifier.embedder,
            )
        encoder = load_sentence_model(settings, meta.embedder, settings.classifier.device)
        return cls(encoder, head, meta, batch_size=settings.classifier.batch_size)

    def proba_from_embeddings(self, x: np.ndarray) -> np.ndarray:
        """Calibrated probabilities, shape ``(n, 8)``, nf-cats label order."""
        if len(x) == 0:
            return np.zeros((0, len(LABELS)))
        with torch.inference_mode():
            logits = logits_of(self.head, x)
        return softmax(logits, self.meta.temperature)

    def features(self, questions: Sequence[str]) -> np.ndarray:
        """The head's input: the embedding, then the lexical features if it was trained with them."""
        x = embed_questions(self.encoder, list(questions), batch_size=self.batch_size)
        if self.vocabulary is not None:
            x = np.hstack([x, self.vocabulary.transform(questions)])
        return x

    def predict_proba(self, questions: Sequence[str]) -> list[list[float]]:
        return self.proba_from_embeddings(self.features(questions)).tolist()
