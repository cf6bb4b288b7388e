"""The BM25 retriever: a bm25s index and passage store loaded memory-mapped.

Scores come from bm25s: its CSC score matrix (loaded with ``mmap=True``), summed over
the query's terms, then top-k selection. Two backends (``retrieval.backend``):

- ``numba``: bm25s's numba retrieval kernel. bm25s compiles it in every process (~15-20
  s on these machines before the first query is answered); here the same kernel is
  compiled with numba's on-disk cache, so only the first process on a machine pays that
  and later ones load it in under a second. The kernel releases the GIL, so a batch can be
  split over ``n_threads`` threads (one when opened from settings). ~1 ms per query on 370k passages.
- ``numpy``: ``bm25s.BM25.retrieve`` with the numpy backend; no compile step, but
  ``np.add.at`` makes it ~20x slower per query (14 ms p50 on 370k passages, quiet machine).

``auto`` picks numba when it is installed. Queries are analysed with the analyzer
recorded in the index manifest. Passages whose score is 0 (no query term matched) are
not returned, so a search can return fewer than ``k`` passages.

:class:`BM25Index` takes its folder and options explicitly; ``BM25Index.from_settings``
opens ``settings.index_dir`` with ``retrieval.backend``. bm25s pulls in scipy and numba (seconds to import), so
it is imported when an index is opened, not when this module is.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import numpy as np

import typed_rag.retrieval.manifest as mf
from typed_rag.config import Settings
from typed_rag.config_sections import bm25_backend
from typed_rag.errors import UserError
from typed_rag.retrieval.analyzer import Analyzer
from typed_rag.retrieval.base import Passage
from typed_rag.retrieval.store import PassageStore
from typed_rag.retrieval.vocab import HashedVocab, has_hashed_vocab

log = logging.getLogger(__name__)

Backend = Literal["auto", "numpy", "numba"]

# The BM25 parameters of an index build (``index build --k1/--b/--method`` override them):
# Lucene's variant with Pyserini's k1 and b, the paper's retriever; R@5 0.321 on the 945
# Wiki-NFQA questions (docs/experiments.md).
BM25_PARAMS: dict[str, Any] = {"k1": 0.9, "b": 0.4, "method": "lucene"}


def numba_available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


_kernel: Callable[..., tuple[np.ndarray, np.ndarray]] | None = None
_kernel_lock = threading.Lock()


def numba_kernel() -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """bm25s's retrieval kernel, jitted with the on-disk cache (nogil, serial)."""
    global _kernel
    with _kernel_lock:
        if _kernel is None:
            from bm25s.numba import retrieve_utils
            from numba import njit

            try:
                _kernel = njit(cache=True, nogil=True)(retrieve_utils._retrieve_internal_jitted)
            except RuntimeError as exc:  # no writable cache location for bm25s's folder
                log.warning("numba cache unavailable (%s); compiling on every start", exc)
                _kernel = njit(nogil=True)(retrieve_utils._retrieve_internal_jitted)
        return _kernel


def checked_manifest(
    folder: Path, *, missing: str, rebuild: str, kind: str | None = None
) -> dict[str, Any]:
    """``folder``'s index manifest: present (and, given ``kind``, of that ``"kind"``), else
    ``UserError(missing)``; of this version's format, else an error naming ``rebuild``."""
    manifest = mf.read_manifest(folder)
    if manifest is None or (kind is not None and manifest.get("kind") != kind):
        raise UserError(missing)
    if manifest.get("format_version") != mf.FORMAT_VERSION:
        raise UserError(
            f"index at {folder} has format {manifest.get('format_version')}, this version "
            f"reads {mf.FORMAT_VERSION}; rebuild it with `{rebuild}`"
        )
    return manifest


class SearchBase:
    """What :class:`BM25Index` and the sharded index share: ``params`` from the manifest
    and ``search`` over ``search_docs``; a subclass turns hits into passages."""

    manifest: dict[str, Any]

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.manifest.get("params", {}))

    def search_docs(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _hits(self, docs: np.ndarray, scores: np.ndarray) -> list[list[Passage]]:
        raise NotImplementedError

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """Top-``k`` passages per query, best first (fewer if fewer passages match)."""
        if isinstance(queries, str):
            raise TypeError("search() takes a sequence of queries, not one string")
        docs, scores = self.search_docs(queries, k)
        return self._hits(docs, scores)


class BM25Index(SearchBase):
    """Batched BM25 search over an index folder written by ``indexes.build_index``."""

    def __init__(
        self,
        folder: str | Path,
        *,
        mmap: bool = True,
        backend: Backend = "auto",
        n_threads: int = 1,
    ) -> None:
        import bm25s
        from bm25s.utils import json_functions

        folder = Path(folder)
        manifest = checked_manifest(
            folder,
            missing=f"no index at {folder}; run `typed-rag index build`",
            rebuild="typed-rag index build",
        )
        missing = [n for n in mf.INDEX_FILES if not (folder / n).is_file()]
        if missing:
            raise UserError(
                f"index at {folder} is incomplete (missing {', '.join(missing)}); "
                f"rebuild it with `typed-rag index build`"
            )
        backend = bm25_backend(backend, numba_available)
        if backend == "numba" and not numba_available():
            raise UserError("retrieval.backend is 'numba' but numba is not installed")
        self.folder = folder
        self.manifest: dict[str, Any] = manifest
        self.backend = backend
        self.n_threads = max(1, int(n_threads))
        # The vocabulary is shared by the scorer and the query analyzer: memory-mapped
        # hashes when the build wrote them (see typed_rag.retrieval.vocab), else bm25s's JSON dict.
        # bm25s would also build a set of all term ids; ids are 0..V-1, so a range does.
        vocab: dict[str, int] | HashedVocab
        if has_hashed_vocab(folder):
            vocab = HashedVocab(folder, mmap=mmap)
        else:
            with (folder / "vocab.index.json").open("r", encoding="utf-8") as f:
                vocab = json_functions.loads(f.read())
        # bm25s is loaded with its numpy backend: the numba path calls the cached kernel.
        self.bm25 = bm25s.BM25.load(
            folder, mmap=mmap, load_vocab=False, backend="numpy", show_progress=False
        )
        self.bm25.vocab_dict = vocab
        self.bm25.unique_token_ids_set = range(len(vocab))
        self._empty_term = vocab[""]
        self.store = PassageStore(folder)
        if len(self.store) != self.num_docs:
            raise UserError(
                f"index at {folder} is inconsistent: {self.num_docs} scored documents but "
                f"{len(self.store)} stored passages; rebuild it"
            )
        self._analyzer = Analyzer(manifest.get("analyzer"), vocab, grow=False)
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings, folder: str | Path | None = None) -> BM25Index:
        """The BM25 index at ``settings.index_dir`` (or ``folder``), memory-mapped."""
        folder = Path(folder) if folder is not None else settings.index_dir
        index = cls(folder, backend=settings.retrieval.backend)
        built = index.params
        differs = {
            key: (built.get(key), value)
            for key, value in BM25_PARAMS.items()
            if built.get(key) != value
        }
        if differs:  # the index's parameters are the ones in effect (scores are precomputed)
            log.info(
                "index at %s was built with %s, not the default %s",
                folder,
                {k: v[0] for k, v in differs.items()},
                {k: v[1] for k, v in differs.items()},
            )
        return index

    @property
    def num_docs(self) -> int:
        return int(self.bm25.scores["num_docs"])

    def query_term_ids(self, queries: Sequence[str]) -> list[list[int]]:
        """Analyse queries like the passages were; unknown terms are dropped."""
        with self._lock:  # the analyzer's word cache is shared between threads
            return self._analyzer.ids(queries)

    def unknown_words(self, text: str) -> list[str]:
        """The words of ``text`` that no passage of this index uses, as the index analyses
        them (lower-cased where it lower-cases)."""
        with self._lock:
            return self._analyzer.unknown(text)

    def search_docs(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Document numbers and scores, shape ``(len(queries), min(k, num_docs))``."""
        k = min(int(k), self.num_docs)
        if not queries or k <= 0:
            return np.zeros((len(queries), 0), np.int32), np.zeros((len(queries), 0), np.float32)
        ids = [q if q else [self._empty_term] for q in self.query_term_ids(queries)]
        if self.backend == "numba":
            return self._search_numba(ids, k)
        docs, scores = self.bm25.retrieve(
            ids,
            k=k,
            show_progress=False,
            n_threads=self.n_threads if self.n_threads > 1 else 0,
            return_as="tuple",
        )
        return np.asarray(docs), np.asarray(scores)

    def warmup(self) -> None:
        """Compile (or load from cache) the numba kernel now rather than at the first query."""
        if self.backend == "numba" and self.num_docs:
            self.search_docs(["warmup"], 1)

    def _search_numba(self, ids: list[list[int]], k: int) -> tuple[np.ndarray, np.ndarray]:
        parts = min(self.n_threads, len(ids))
        if parts <= 1:
            scores, docs = self._run_kernel(ids, k)
            return docs, scores
        bounds = np.linspace(0, len(ids), parts + 1).astype(int)
        with ThreadPoolExecutor(parts) as pool:
            results = list(
                pool.map(
                    lambda ab: self._run_kernel(ids[ab[0] : ab[1]], k),
                    zip(bounds[:-1], bounds[1:], strict=True),
                )
            )
        return np.concatenate([r[1] for r in results]), np.concatenate([r[0] for r in results])

    def _run_kernel(self, ids: list[list[int]], k: int) -> tuple[np.ndarray, np.ndarray]:
        s = self.bm25.scores
        pointers = np.zeros(len(ids) + 1, dtype=np.int32)
        np.cumsum([len(q) for q in ids], out=pointers[1:])
        return numba_kernel()(
            query_tokens_ids_flat=np.concatenate(ids).astype(np.int32),
            query_pointers=pointers,
            k=k,
            sorted=True,
            dtype=np.dtype(np.float32),
            int_dtype=np.dtype(np.int32),
            data=s["data"],
            indptr=s["indptr"],
            indices=s["indices"],
            num_docs=s["num_docs"],
            nonoccurrence_array=self.bm25.nonoccurrence_array,
            weight_mask=None,
        )

    def _hits(self, docs: np.ndarray, scores: np.ndarray) -> list[list[Passage]]:
        return self.store.passages(docs, scores, positive_only=True)

    def close(self) -> None:
        self.store.close()
