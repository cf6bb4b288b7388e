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
    """The reranker the settings ask for, loaded; ``None`` for kind ``none``."""
    kind = settings.reranker.kind
    if kind == "none":
        return None
    if kind == "bge":
        return BGEReranker.from_settings(settings)
    if kind == "auto" and settings.reranker.bge_model:
        try:
            return BGEReranker.from_settings(settings)
        except UserError as exc:
            log.warning("BGE reranker unavailable, using the bi-encoder instead: %s", exc)
    return BiEncoderReranker.from_settings(settings)


__all__ = ["BGEReranker", "BiEncoderReranker", "Reranker", "build_reranker"]
