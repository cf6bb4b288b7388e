"""A GGUF embedding model run by llama.cpp in embedding mode (no torch needed).

Retrieval-tuned embedders are trained with task prefixes (nomic-embed-text:
``search_query: `` / ``search_document: ``; e5: ``query: `` / ``passage: ``) and
rank much worse without them, so the embedder applies them itself: callers say
whether a text is a query or a document. The prefixes of a registry model come
from its registry entry; settings can override them (a local ``.gguf`` has none).

Vectors are mean-pooled (or pooled as the GGUF declares) and L2-normalised, so a
dot product is the cosine. Texts longer than ``max_tokens`` are truncated.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from typed_rag.config import Settings
from typed_rag.errors import UserError

if TYPE_CHECKING:
    from llama_cpp import Llama


def registry_prefixes(name_or_path: str) -> tuple[str, str]:
    """(query prefix, document prefix) the registry pins for a model; ("", "") if none."""
    from typed_rag.models.registry import find_spec

    spec = find_spec(name_or_path)
    if spec is None:
        return "", ""
    return spec.extra.get("query_prefix", ""), spec.extra.get("document_prefix", "")


class GGUFEmbedder:
    """``encode_queries`` / ``encode_documents``: unit-length float32 vectors, one row per text."""

    def __init__(
        self,
        path: Path,
        *,
        query_prefix: str = "",
        document_prefix: str = "",
        n_threads: int = 1,
        max_tokens: int = 512,
        llm: Llama | None = None,
    ) -> None:
        if max_tokens < 8:
            raise ValueError(f"max_tokens must be at least 8, got {max_tokens}")
        self.path = Path(path)
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.max_tokens = max_tokens
        self.llm = llm if llm is not None else _load(self.path, n_threads, max_tokens)
        self.dim = int(self.llm.n_embd())

    @classmethod
    def from_settings(cls, settings: Settings) -> GGUFEmbedder:
        """The embedder ``reranker.gguf_model`` names, pulled and checked on first use."""
        from typed_rag.models import ensure_model

        r = settings.reranker
        path = ensure_model(settings, r.gguf_model, fmt="gguf")
        q_default, d_default = registry_prefixes(r.gguf_model)
        return cls(
            path,
            query_prefix=q_default if r.gguf_query_prefix is None else r.gguf_query_prefix,
            document_prefix=d_default if r.gguf_document_prefix is None else r.gguf_document_prefix,
            n_threads=r.gguf_threads,
            max_tokens=r.gguf_max_tokens,
        )

    @property
    def fingerprint(self) -> str:
        """What a stored passage vector depends on: the model file, prefix and truncation."""
        st = self.path.stat() if self.path.exists() else None
        size = st.st_size if st else 0
        return f"{self.path.name}:{size}:{self.document_prefix!r}:{self.max_tokens}"

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.query_prefix + t for t in texts])

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.document_prefix + t for t in texts])

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        raw: Any = self.llm.embed(list(texts), normalize=False, truncate=True)
        rows = [_pool(r) for r in raw]
        mat = np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        return mat / np.maximum(norms, 1e-12)


def _pool(row: Any) -> np.ndarray:
    """One vector per text: a model without pooling returns one vector per token (mean them)."""
    arr = np.asarray(row, dtype=np.float32)
    return arr.mean(axis=0) if arr.ndim == 2 else arr


def _load(path: Path, n_threads: int, max_tokens: int) -> Llama:
    try:
        import llama_cpp
    except ImportError as exc:
        raise UserError(
            "the gguf reranker needs llama-cpp-python: pip install 'typed-rag[cpu]'"
        ) from exc
    if not path.is_file():
        raise UserError(f"{path}: no such GGUF file")
    # n_batch = n_ubatch = max_tokens: a decode packs a few passages at most, so the
    # attention over the packed batch stays small, and a longer text is cut to fit.
    kwargs: dict[str, Any] = {
        "embedding": True,
        "n_ctx": max_tokens,
        "n_batch": max_tokens,
        "n_ubatch": max_tokens,
        "n_threads": n_threads,
        "n_threads_batch": n_threads,
        "verbose": False,
    }
    llm = llama_cpp.Llama(str(path), **kwargs)
    if llm.pooling_type() == llama_cpp.LLAMA_POOLING_TYPE_NONE:
        # A GGUF that declares no pooling (a decoder LM) would give one vector per token,
        # and llama-cpp-python misreads those when several texts share a batch: mean-pool
        # in llama.cpp instead.
        llm.close()
        llm = llama_cpp.Llama(str(path), pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN, **kwargs)
    return llm
