"""Bi-encoder reranker: cosine similarity of sentence embeddings (the CPU default).

No cross-encoder weights can be installed here, and a bi-encoder scores a
pool of passages in one batched encode, cheap enough on a CPU. The query and
each ``"title. text"`` are embedded separately (with the model's query and document
prompts, e5's "query: " and "passage: ") and compared by cosine. A
passage's embedding does not depend on the query, so embeddings are kept in a
small LRU cache by passage id: the sub-queries of one question share many
candidates, and :meth:`score_many` encodes a whole round in one call.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np

from typed_rag.config import Settings
from typed_rag.encoder import Role, encode, load_sentence_model
from typed_rag.retrieval.base import Passage, Reranker, rerank_batch_size
from typed_rag.retrieval.text import passage_text

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer


# Passage embeddings kept by passage id: a question's sub-queries share most candidates,
# and 4096 (~6 MiB of 384-d vectors) holds the pools of many questions.
CACHE_SIZE = 4096


class BiEncoderReranker(Reranker):
    """Cosine similarity between the query and each passage, in [-1, 1]."""

    name = "biencoder"

    def __init__(
        self, model: SentenceTransformer, batch_size: int = 32, cache_size: int = CACHE_SIZE
    ) -> None:
        self.model = model
        self.batch_size = batch_size
        self.cache_size = max(0, cache_size)
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    @classmethod
    def from_settings(cls, settings: Settings) -> BiEncoderReranker:
        r = settings.reranker
        model = load_sentence_model(settings, r.biencoder_model, r.device or "cpu")
        return cls(model, batch_size=rerank_batch_size(r.device))

    def clear_cache(self) -> None:
        self._cache.clear()

    @contextmanager
    def cold(self) -> Iterator[None]:
        """Score with an empty cache (what a new question costs), then restore the cache."""
        kept, self._cache = self._cache, OrderedDict()
        try:
            yield
        finally:
            self._cache = kept

    def _encode(self, texts: Sequence[str], role: Role) -> np.ndarray:
        return encode(self.model, texts, self.batch_size, role=role)

    def score(self, query: str, passages: Sequence[Passage]) -> list[float]:
        return self.score_many([query], [passages])[0]

    def score_many(
        self, queries: Sequence[str], pools: Sequence[Sequence[Passage]]
    ) -> list[list[float]]:
        """One encode of the round's queries and one of its uncached passages."""
        uniq_q = list(dict.fromkeys(queries))
        todo: dict[str, str] = {}
        for pool in pools:
            for p in pool:
                key = self._key(p)
                if key not in self._cache and key not in todo:
                    todo[key] = passage_text(p)
        q_vec = dict(zip(uniq_q, self._encode(uniq_q, "query"), strict=True))
        fresh = dict(zip(todo, self._encode(list(todo.values()), "document"), strict=True))
        out: list[list[float]] = []
        for query, pool in zip(queries, pools, strict=True):
            if not pool:
                out.append([])
                continue
            mat = np.stack([fresh.get(self._key(p), self._cache.get(self._key(p))) for p in pool])
            out.append((mat @ q_vec[query]).astype(float).tolist())
        self._remember(fresh)
        return out

    @staticmethod
    def _key(p: Passage) -> str:
        # The id names the passage in an index; passages made up without one
        # (tests, the API's own passages) are keyed by their text.
        return p.id or f"\0{p.title}\0{p.text}"

    def _remember(self, fresh: dict[str, np.ndarray]) -> None:
        if not self.cache_size:
            return
        for key, vec in fresh.items():
            self._cache[key] = vec
            self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
