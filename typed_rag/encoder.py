"""The sentence encoder shared by the classifier head, the bi-encoder reranker and the
dense index: loading a sentence-transformers model and embedding texts with it.

Models are named as in the model registry (``all-MiniLM-L6-v2``, or a model derived from
one, ``multilingual-e5-small``) or given as a local sentence-transformers folder;
:func:`model_folder` fetches, checks and converts them, so nothing here touches the
network on its own. A model may declare prompts by role (e5: ``"query: "`` and
``"passage: "``); :func:`encode` applies them. torch and
sentence-transformers are optional (the ``cpu``/``gpu`` extras), so they are imported
inside the functions that need them.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from typed_rag.config import Settings
from typed_rag.cpuinfo import cpu_flags
from typed_rag.errors import UserError
from typed_rag.models import ensure_model
from typed_rag.models.convert import derived_model

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

_SAMPLE = 1 << 20
SEPARATOR = "+"  # joins embedder names whose vectors are concatenated
Role = Literal["query", "document"]  # a prompt name of sentence-transformers' convention


def load_sentence_model(settings: Settings, name: str, device: str = "cpu") -> SentenceTransformer:
    """A sentence-transformers model from a registry name or a local folder.

    ``"a+b"`` names several models whose embeddings are concatenated (see
    :class:`ConcatEncoder`): the question-type classifier's head reads both.
    """
    if SEPARATOR in name:
        parts = [_load_one(settings, n, device) for n in name.split(SEPARATOR)]
        return ConcatEncoder(parts)  # type: ignore[return-value]
    return _load_one(settings, name, device)


def model_folder(settings: Settings, name: str) -> Path:
    """The local folder (or file) of an embedder: a path, a registry or a derived model."""
    if not Path(name).expanduser().exists():
        derived = derived_model(settings, name, ensure_model)
        if derived is not None:
            return derived
    return ensure_model(settings, name)


def _load_one(settings: Settings, name: str, device: str) -> SentenceTransformer:
    from sentence_transformers import SentenceTransformer

    path = model_folder(settings, name)
    if not path.is_dir():
        raise UserError(f"{path}: expected a sentence-transformers folder for embedder {name!r}")
    try:
        model = SentenceTransformer(str(path), device=device, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot load a sentence-transformers model: {exc}") from exc
    log.debug("loaded sentence model %s from %s on %s", name, path, device)
    return model


class ConcatEncoder:
    """Several sentence models side by side: ``encode`` concatenates their outputs.

    Why: a topical embedder (MiniLM) and a stronger general one (mpnet) make
    different mistakes on question form; one head over both beats either.
    Quacks like a ``SentenceTransformer`` as far as :func:`embed_questions` goes.
    """

    def __init__(self, models: Sequence[SentenceTransformer]) -> None:
        if not models:
            raise ValueError("ConcatEncoder needs at least one model")
        self.models = list(models)

    def get_sentence_embedding_dimension(self) -> int:
        return sum(embedding_dim(m) for m in self.models)

    def encode(self, texts: Sequence[str], **kwargs: object) -> np.ndarray:
        kwargs["convert_to_numpy"] = True
        parts = [np.asarray(m.encode(list(texts), **kwargs), np.float32) for m in self.models]
        return np.hstack(parts)


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


def encode(
    model: SentenceTransformer, texts: Sequence[str], batch_size: int, role: Role | None = None
) -> np.ndarray:
    """Float32, L2-normalised embeddings (normalised in float32, whatever the compute dtype).

    ``role`` says what the texts are. A model that declares a prompt for it gets the texts
    prefixed with it (e5: "query: " and "passage: "); others see them unchanged. This is
    the one place prompts are applied, so an index's queries and passages always match.
    """
    import torch

    if not texts:
        return np.zeros((0, embedding_dim(model)), np.float32)
    with torch.inference_mode():
        out = model.encode(
            list(texts),
            batch_size=batch_size,
            convert_to_tensor=True,
            show_progress_bar=False,
            prompt_name=role if prompt_of(model, role) else None,
        )
    emb = out.float().cpu().numpy()
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    np.maximum(norms, 1e-12, out=norms)
    return emb / norms


def prompt_of(model: SentenceTransformer, role: Role | None) -> str:
    """The prompt ``model`` declares for ``role``; "" when it declares none (MiniLM)."""
    prompts = getattr(model, "prompts", None) or {}
    return str(prompts.get(role, "")) if role else ""


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (else torch emulates it, slowly)."""
    return bool(cpu_flags() & {"avx512_bf16", "amx_bf16"})


def model_fingerprint(folder: Path) -> str:
    """Identify a model folder cheaply: each file's name, size and first and last MiB."""
    h = hashlib.blake2b(digest_size=16)
    files = [folder] if folder.is_file() else sorted(p for p in folder.rglob("*") if p.is_file())
    for path in files:
        if path.name.startswith(".") or path.suffix == ".md":
            continue
        size = path.stat().st_size
        h.update(f"{path.relative_to(folder) if path != folder else path.name}:{size}".encode())
        with path.open("rb") as f:
            h.update(f.read(_SAMPLE))
            if size > 2 * _SAMPLE:
                f.seek(size - _SAMPLE)
                h.update(f.read(_SAMPLE))
    return h.hexdigest()
