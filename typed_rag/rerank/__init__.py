"""Rerankers: the BGE cross-encoder (GPU default) and a bi-encoder (CPU default).

``build_reranker(settings)`` picks one by ``settings.reranker.kind``:

- ``auto``: BGE when ``reranker.bge_model`` is set and can be loaded (a local
  folder, or a Hub id where the Hub is reachable), else the bi-encoder; a BGE
  model that is set but cannot be loaded is logged as a warning, never silent;
- ``bge`` / ``biencoder``: that one, or a clear error;
- ``none``: no reranking (``None``).
"""

from __future__ import annotations

import logging

from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.rerank.bge import BGEReranker
from typed_rag.rerank.biencoder import BiEncoderReranker
from typed_rag.retrieval.base import Reranker

log = logging.getLogger(__name__)


def build_reranker(settings: Settings) -> Reranker | None:
    """The reranker the settings ask for, loaded; ``None`` for kind ``none``. BGE that an
    ``auto`` asked for (as declared) falls back to the bi-encoder when it does not load."""
    kind = settings.reranker.kind_in_force()
    if kind == "none":
        return None
    if kind == "bge":
        if settings.declared().reranker.kind != "auto":
            return BGEReranker.from_settings(settings)
        try:
            return BGEReranker.from_settings(settings)
        except UserError as exc:
            log.warning("BGE reranker unavailable, using the bi-encoder instead: %s", exc)
    return BiEncoderReranker.from_settings(settings)


def reranker_kind(reranker: Reranker | None) -> str:
    """Which kind ``reranker`` is (``bge``, ``biencoder``, ``none``), as the settings name it."""
    if reranker is None:
        return "none"
    return "bge" if isinstance(reranker, BGEReranker) else "biencoder"


__all__ = ["BGEReranker", "BiEncoderReranker", "Reranker", "build_reranker", "reranker_kind"]
