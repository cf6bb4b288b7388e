"""Search over a sharded BM25 index (built by :func:`indexes.sharded.build_sharded`).

The folder holds ``shard-00000/``, ``shard-00001/``, ... each a complete BM25 index folder
(:class:`~typed_rag.retrieval.bm25.BM25Index` opens it) whose score matrix was written with
the statistics of the whole collection (its passage count, mean passage length and each
term's document frequency over all shards). A passage's score in its shard is therefore
the score an unsharded index of the whole collection gives it, and the collection's top-k
is the best k of the shards' top-k: every shard is searched (in ``n_threads`` threads; the
numba kernel releases the GIL) and the hits merged by score, ties by document number.

Document numbers run over the shards in order (shard ``i``'s first passage is number
``offset_i``), so they are those of an unsharded index of the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

import typed_rag.retrieval.manifest as mf
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.retrieval.base import Passage
from typed_rag.retrieval.bm25 import Backend, BM25Index, SearchBase, checked_manifest

SHARDED_KIND = "sharded"
SHARD_PREFIX = "shard-"


def is_sharded(folder: str | Path) -> bool:
    """True when ``folder``'s manifest describes a sharded index."""
    manifest = mf.read_manifest(Path(folder))
    return manifest is not None and manifest.get("kind") == SHARDED_KIND


def open_bm25(settings: Settings, folder: str | Path | None = None) -> BM25Index | ShardedBM25Index:
    """The BM25 index at ``folder`` (default ``settings.index_dir``), sharded or not."""
    path = Path(folder) if folder is not None else settings.index_dir
    if is_sharded(path):
        return ShardedBM25Index(path, backend=settings.retrieval.backend)
    return BM25Index.from_settings(settings, path)


class ShardedBM25Index(SearchBase):
    """Batched BM25 search over every shard of a sharded index folder, merged exactly."""

    def __init__(
        self,
        folder: str | Path,
        *,
        mmap: bool = True,
        backend: Backend = "auto",
        n_threads: int = 1,
    ) -> None:
        folder = Path(folder)
        manifest = checked_manifest(
            folder,
            missing=f"no sharded index at {folder}",
            rebuild="typed-rag index build --shard-size",
            kind=SHARDED_KIND,
        )
        self.folder = folder
        self.manifest: dict[str, Any] = manifest
        self.shards: list[BM25Index] = []
        offsets = []
        try:
            for entry in manifest["shards"]:
                shard = BM25Index(folder / entry["folder"], mmap=mmap, backend=backend)
                if shard.num_docs != int(entry["passages"]):
                    raise UserError(
                        f"shard {entry['folder']} of {folder} holds {shard.num_docs} passages, "
                        f"the manifest says {entry['passages']}; rebuild the index"
                    )
                self.shards.append(shard)
                offsets.append(int(entry["offset"]))
        except BaseException:
            self.close()
            raise
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.backend = self.shards[0].backend if self.shards else backend
        self.n_threads = max(1, int(n_threads))
        self._pool: ThreadPoolExecutor | None = None

    @property
    def num_docs(self) -> int:
        return sum(s.num_docs for s in self.shards)

    def unknown_words(self, text: str) -> list[str]:
        """The words of ``text`` that no passage of any shard uses."""
        unknown: list[str] | None = None
        for shard in self.shards:
            words = shard.unknown_words(text)
            seen = set(words)
            unknown = words if unknown is None else [w for w in unknown if w in seen]
            if not unknown:
                return []
        return unknown or []

    def search_docs(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Collection document numbers and scores, shape ``(len(queries), min(k, num_docs))``."""
        k = min(int(k), self.num_docs)
        q = len(queries)
        if q == 0 or k <= 0:
            return np.zeros((q, 0), np.int64), np.zeros((q, 0), np.float32)
        queries = list(queries)

        def one(i: int) -> tuple[np.ndarray, np.ndarray]:
            docs, scores = self.shards[i].search_docs(queries, k)
            return docs.astype(np.int64) + self.offsets[i], scores

        if self.n_threads > 1 and len(self.shards) > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.n_threads)
            parts = list(self._pool.map(one, range(len(self.shards))))
        else:
            parts = [one(i) for i in range(len(self.shards))]
        docs = np.concatenate([p[0] for p in parts], axis=1)
        scores = np.concatenate([p[1] for p in parts], axis=1).astype(np.float32)
        order = np.lexsort((docs, -scores), axis=-1)[:, :k]
        return np.take_along_axis(docs, order, 1), np.take_along_axis(scores, order, 1)

    def warmup(self) -> None:
        for shard in self.shards:
            shard.warmup()

    def passages(self, docs: np.ndarray, scores: np.ndarray) -> list[list[Passage]]:
        """Ranked hits as Passages (scores <= 0, which match no query term, dropped)."""
        out: list[list[Passage]] = []
        for row_docs, row_scores in zip(docs.tolist(), scores.tolist(), strict=True):
            hits = []
            for doc, score in zip(row_docs, row_scores, strict=True):
                if score <= 0.0:
                    continue
                i = int(np.searchsorted(self.offsets, doc, side="right")) - 1
                pid, title, text = self.shards[i].store.get(doc - int(self.offsets[i]))
                hits.append(Passage(id=pid, title=title, text=text, score=float(score)))
            out.append(hits)
        return out

    _hits = passages

    def get(self, doc: int) -> tuple[str, str, str]:
        """``(id, title, text)`` of collection document number ``doc``."""
        if not 0 <= doc < self.num_docs:
            raise IndexError(f"document {doc} out of range 0..{self.num_docs - 1}")
        i = int(np.searchsorted(self.offsets, doc, side="right")) - 1
        return self.shards[i].store.get(doc - int(self.offsets[i]))

    def close(self) -> None:
        if getattr(self, "_pool", None) is not None:
            self._pool.shutdown()
            self._pool = None
        for shard in self.shards:
            shard.close()
