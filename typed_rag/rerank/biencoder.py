"""Bi-encoder reranker: cosine similarity of sentence embeddings (the CPU default).

No cross-encoder weights can be installed here, and a bi-encoder scores a
pool of passages in one batched encode, cheap enough on a CPU. The query and
each ``"title. text"`` are embedded separately and compared by cosine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from typed_rag.config import Settings
from typed_rag.rerank.base import Reranker
from typed_rag.rerank.text import passage_text
from typed_rag.retrieval import Passage

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer


class BiEncoderReranker(Reranker):
    """Cosine similarity between the query and each passage, in [-1, 1]."""

    name = "biencoder"

    def __init__(self, model: SentenceTransformer, batch_size: int = 32) -> None:
        self.model = model
        self.batch_size = batch_size

    @classmethod
    def from_settings(cls, settings: Settings) -> BiEncoderReranker:
        from typed_rag.classifier.embedder import load_sentence_model

        r = settings.reranker
        model = load_sentence_model(settings, r.biencoder_model, r.device or "cpu")
        return cls(model, batch_size=r.batch_size)

    def score(self, query: str, passages: Sequence[Passage]) -> list[float]:
        if not passages:
            return []
        texts = [query, *(passage_text(p) for p in passages)]
        emb = self.model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        emb = np.asarray(emb, dtype=np.float32)
        return (emb[1:] @ emb[0]).astype(float).tolist()
