"""BGE cross-encoder reranker through FlagEmbedding (the GPU default).

A cross-encoder reads query and passage together and outputs one relevance
logit, which is what the paper's BGE reranker is. FlagEmbedding starts a
process pool over every visible GPU unless given devices, so the device is
always pinned to one (``reranker.device``, else the CPU), and fp16 is used
only on CUDA, where it is safe and fast.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.retrieval.base import Passage, Reranker, rerank_batch_size
from typed_rag.retrieval.text import passage_text

log = logging.getLogger(__name__)

FP16 = True  # half precision on CUDA (never on the CPU): same ranking, about twice as fast
MAX_LENGTH = 512  # tokens of query + passage: BGE's training length; a passage is ~130 tokens
NORMALIZE = False  # raw logits: a sigmoid would not change the order, only the floor's scale


class BGEReranker(Reranker):
    """Cross-encoder logits (or their sigmoid with ``normalize``) for (query, passage) pairs."""

    name = "bge"

    def __init__(
        self,
        model_path: str | Path,
        device: str | None = None,
        fp16: bool = FP16,
        batch_size: int = 32,
        max_length: int = MAX_LENGTH,
        normalize: bool = NORMALIZE,
        cache_dir: Path | None = None,
    ) -> None:
        try:
            from FlagEmbedding import FlagReranker
        except ImportError as exc:
            raise UserError(
                "the BGE reranker needs FlagEmbedding: pip install 'typed-rag[gpu]' "
                "(or set reranker.kind=biencoder)"
            ) from exc
        self.device = device or "cpu"
        self.use_fp16 = bool(fp16) and self.device.startswith("cuda")
        self.batch_size = batch_size
        self.max_length = max_length
        self.normalize = normalize
        try:
            self.model: Any = FlagReranker(
                str(model_path),
                use_fp16=self.use_fp16,
                devices=[self.device],
                batch_size=batch_size,
                max_length=max_length,
                normalize=normalize,
                cache_dir=str(cache_dir) if cache_dir else None,
            )
        except (OSError, ValueError) as exc:
            raise UserError(f"{model_path}: cannot load a BGE cross-encoder: {exc}") from exc
        log.info("BGE reranker %s on %s (fp16=%s)", model_path, self.device, self.use_fp16)

    @classmethod
    def from_settings(cls, settings: Settings) -> BGEReranker:
        r = settings.reranker
        if not r.bge_model:
            raise UserError("reranker.kind=bge needs reranker.bge_model (a folder or Hub id)")
        return cls(
            r.bge_model,
            device=r.device,
            batch_size=rerank_batch_size(r.device),
            cache_dir=settings.models_dir / "hub",
        )

    def score(self, query: str, passages: Sequence[Passage]) -> list[float]:
        if not passages:
            return []
        pairs = [(query, passage_text(p)) for p in passages]
        scores = self.model.compute_score(
            pairs,
            batch_size=self.batch_size,
            max_length=self.max_length,
            normalize=self.normalize,
        )
        # FlagEmbedding returns a bare float for a single pair.
        if isinstance(scores, int | float):
            return [float(scores)]
        return [float(s) for s in scores]
