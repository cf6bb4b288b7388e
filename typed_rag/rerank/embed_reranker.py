"""Reranker over a retrieval-tuned embedder with query/document prefixes (``gguf``, ``e5``).

The bi-encoder reranker embeds queries and passages alike, which suits a
sentence-similarity model (MiniLM) but not a retrieval-tuned one (nomic-embed,
e5), whose queries and passages carry different task prefixes. This reranker asks
the encoder for query and document vectors separately and scores by cosine.

Passage vectors are query-independent, so they are kept: an in-memory LRU by
passage id, and optionally a :class:`VectorStore` on disk (``reranker.embedding_cache_dir``)
so a passage is embedded once per model across runs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import numpy as np

from typed_rag.config import Settings
from typed_rag.rerank.vector_store import VectorStore
from typed_rag.retrieval import Passage
from typed_rag.retrieval.base import Reranker
from typed_rag.retrieval.text import passage_text


class PrefixEncoder(Protocol):
    """An encoder that embeds queries and documents differently (unit-length rows)."""

    dim: int
    fingerprint: str

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray: ...


class EmbeddingReranker(Reranker):
    """Cosine of the query vector and each passage vector, in [-1, 1]."""

    name = "gguf"

    def __init__(
        self,
        encoder: PrefixEncoder,
        *,
        cache_size: int = 4096,
        store: VectorStore | None = None,
        batch_size: int = 16,
    ) -> None:
        self.encoder = encoder
        self.cache_size = max(0, cache_size)
        self.store = store
        self.batch_size = max(1, batch_size)
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    @classmethod
    def from_settings(
        cls, settings: Settings, *, cache_size: int | None = None
    ) -> EmbeddingReranker:
        """The ``reranker.kind`` embedder (``gguf`` or ``e5``), with the disk store if configured."""
        r = settings.reranker
        encoder: PrefixEncoder
        if r.kind == "e5":
            from typed_rag.rerank.e5_engine import E5Encoder

            encoder = E5Encoder.from_settings(settings)
        else:
            from typed_rag.rerank.gguf_embedder import GGUFEmbedder

            encoder = GGUFEmbedder.from_settings(settings)
        return cls(
            encoder,
            cache_size=r.cache_size if cache_size is None else cache_size,
            store=open_store(r.embedding_cache_dir, encoder),
            batch_size=r.batch_size,
        )

    def clear_cache(self) -> None:
        self._cache.clear()

    @contextmanager
    def cold(self) -> Iterator[None]:
        """Score with no cached passage vector (memory or disk): what a new question costs."""
        kept, store = self._cache, self.store
        self._cache, self.store = OrderedDict(), None
        try:
            yield
        finally:
            self._cache, self.store = kept, store

    def score(self, query: str, passages: Sequence[Passage]) -> list[float]:
        return self.score_many([query], [passages])[0]

    def score_many(
        self, queries: Sequence[str], pools: Sequence[Sequence[Passage]]
    ) -> list[list[float]]:
        """One query encode for the round's distinct queries; passages embedded once each."""
        uniq_q = list(dict.fromkeys(queries))
        q_mat = self.encoder.encode_queries(uniq_q) if any(pools) else None
        vectors = self._passage_vectors([p for pool in pools for p in pool])
        out: list[list[float]] = []
        for query, pool in zip(queries, pools, strict=True):
            if not pool or q_mat is None:
                out.append([])
                continue
            mat = np.stack([vectors[_key(p)] for p in pool])
            out.append((mat @ q_mat[uniq_q.index(query)]).astype(float).tolist())
        return out

    def _passage_vectors(self, passages: Sequence[Passage]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        todo: dict[str, str] = {}
        for p in passages:
            key = _key(p)
            if key in found or key in todo:
                continue
            vec = self._cache.get(key)
            if vec is None and self.store is not None:
                vec = self.store.get(key)
            if vec is None:
                todo[key] = passage_text(p)
            else:
                found[key] = vec
        keys = list(todo)
        for start in range(0, len(keys), self.batch_size):
            chunk = keys[start : start + self.batch_size]
            mat = self.encoder.encode_documents([todo[k] for k in chunk])
            fresh = dict(zip(chunk, mat, strict=True))
            if self.store is not None:  # per chunk, so an interrupted run keeps its work
                self.store.add(fresh)
            found.update(fresh)
        self._remember(found)
        return found

    def _remember(self, vectors: dict[str, np.ndarray]) -> None:
        if not self.cache_size:
            return
        for key, vec in vectors.items():
            self._cache[key] = vec
            self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)


def _key(p: Passage) -> str:
    # The id names the passage in an index; passages made up without one (tests,
    # the API's own passages) are keyed by their text and never stored on disk.
    return p.id or f"\0{p.title}\0{p.text}"


def open_store(root: Path | None, encoder: PrefixEncoder) -> VectorStore | None:
    """The disk store of ``encoder``'s passage vectors under ``root`` (None: no store)."""
    if root is None:
        return None
    return VectorStore(Path(root).expanduser(), encoder.fingerprint, encoder.dim)
