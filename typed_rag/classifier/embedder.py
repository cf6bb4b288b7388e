"""Sentence embeddings for the classifier head and the bi-encoder reranker.

Models are named as in the model registry (``all-MiniLM-L6-v2``) or given as
a local sentence-transformers folder; :func:`ensure_model` fetches and checks
registry models, so nothing here touches the network on its own.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from typed_rag.config import Settings
from typed_rag.errors import UserError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)


def load_sentence_model(settings: Settings, name: str, device: str = "cpu") -> SentenceTransformer:
    """A sentence-transformers model from a registry name or a local folder."""
    from sentence_transformers import SentenceTransformer

    from typed_rag.models import ensure_model

    path = ensure_model(settings, name)
    if not path.is_dir():
        raise UserError(f"{path}: expected a sentence-transformers folder for embedder {name!r}")
    try:
        model = SentenceTransformer(str(path), device=device, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot load a sentence-transformers model: {exc}") from exc
    log.debug("loaded sentence model %s from %s on %s", name, path, device)
    return model


def embedding_dim(model: SentenceTransformer) -> int:
    """The model's output width (the method was renamed in sentence-transformers 6)."""
    getter = (
        getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    )
    return int(getter() or 0)


def embed_questions(
    model: SentenceTransformer,
    questions: Sequence[str],
    batch_size: int = 64,
    progress: bool = False,
) -> np.ndarray:
    """Float32 embeddings of lower-cased questions (the nf-cats data was used lower-cased).

    Returns an array of shape ``(len(questions), dim)``; the model's own
    modules decide normalisation, so training and inference agree.
    """
    if not questions:
        dim = embedding_dim(model)
        return np.zeros((0, dim), dtype=np.float32)
    texts = [q.lower() for q in questions]
    out = model.encode(
        texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=progress
    )
    return np.asarray(out, dtype=np.float32)
