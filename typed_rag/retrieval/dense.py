"""Dense retrieval: passage embeddings of an index folder, searched exactly.

``<index_dir>/dense/embeddings.npy`` (written by :func:`indexes.dense.build_dense`) holds
one float16, L2-normalised row per passage of the folder's passage store, in store
document order; ``dense/manifest.json`` records the model (name and a fingerprint of its
files), dim, n, dtypes, max length, how many passages are done and the identity of the
store it describes.

``DenseIndex`` memory-maps the embeddings and the passage store and answers
``search(queries, k)`` by inner product (cosine, since both sides are normalised) over
every row: the queries are encoded in one batch, the matrix is scanned in row blocks and
a running top-k per query is kept with ``argpartition`` (see :func:`top_k_inner_product`
for the float16 candidate pass that keeps a single query at ~25 ms on 370k x 384, one
CPU thread). That is fast enough for the default corpus; for millions of passages
(about 1.5 s per query by exact scan on the 21M DPR corpus) ``index build --dense --ann``
adds an ANN index beside the embeddings (:mod:`typed_rag.retrieval.ann`: FAISS HNSW or
IVF-PQ, candidates rescored exactly), which ``DenseIndex`` then searches instead of
scanning. Measured by ``benchmarks/hybrid_bench.py`` and ``retrieval_bench.py --ann``.

Each encoder has its own folder (:func:`dense_folder`: ``dense/`` for all-MiniLM-L6-v2,
``dense-<model name>/`` for any other), so building an index of one encoder never
overwrites another's, finished or half-built.

A rebuild of the BM25 index replaces the whole folder, the dense folders included, so the
embeddings can never describe an older passage store; the manifest also records the
store's size and build time and loading checks them. torch and sentence-transformers
are optional dependencies, imported inside the functions that need them.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

import typed_rag.retrieval.manifest as mf
from typed_rag.config import Settings
from typed_rag.encoder import encode, load_sentence_model, model_fingerprint, model_folder
from typed_rag.errors import UserError
from typed_rag.retrieval.ann import AnnIndex
from typed_rag.retrieval.base import Passage
from typed_rag.retrieval.dense_dtype import (
    BATCH_SIZE,
    MAX_LENGTH,
    compute_dtype,
    with_index_dtype,
)
from typed_rag.retrieval.store import TEXT_FILE, PassageStore

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

DENSE_DIR = "dense"
# The encoder whose index keeps the folder name every dense index had before encoders got
# folders of their own, so existing indexes of it are still found.
FIRST_MODEL = "all-MiniLM-L6-v2"
EMBEDDINGS_FILE = "embeddings.npy"
FORMAT_VERSION = 1
STORED_DTYPE = "float16"
SEARCH_BLOCK = 1 << 15  # rows scored at a time (384 dims, float32: 48 MiB)
FAST_QUERIES = 16  # up to this many queries: float16 candidate pass (see top_k_inner_product)
CANDIDATE_MARGIN = 64  # extra candidates per query rescored exactly after the float16 pass


def model_name(model: str) -> str:
    """A dense model's short name (a local folder's name), for folders and report rows."""
    return Path(model).name


def dense_folder(index_dir: str | Path, model: str = FIRST_MODEL) -> Path:
    """Where the dense index of ``model`` over a BM25 index folder lives."""
    name = model_name(model)
    return Path(index_dir) / (DENSE_DIR if name == FIRST_MODEL else f"{DENSE_DIR}-{name}")


def dense_indexes(index_dir: str | Path) -> list[dict[str, Any]]:
    """Every dense index in a BM25 index folder, finished or not: its encoder, passages
    done of all, and whether it is complete (what ``index list`` shows of a long build)."""
    root = Path(index_dir)
    found = []
    folders = sorted(root.glob(f"{DENSE_DIR}*")) if root.is_dir() else []
    for folder in folders:
        manifest = mf.read_manifest(folder) if folder.is_dir() else None
        if manifest is not None and "model" in manifest:
            found.append(
                {
                    "model": model_name(str(manifest["model"])),
                    "done": int(manifest.get("done", 0)),
                    "passages": int(manifest.get("n", 0)),
                    "complete": bool(manifest.get("complete")),
                }
            )
    return found


def build_command(index_dir: Path, model: str = FIRST_MODEL) -> str:
    chosen = "" if model_name(model) == FIRST_MODEL else f"--set retrieval.dense_model={model} "
    return f"typed-rag {chosen}index build --dense --out {index_dir}"


def store_identity(index_dir: Path, n: int) -> dict[str, Any]:
    """What the dense manifest records of the passage store its rows describe."""
    manifest = mf.read_manifest(index_dir) or {}
    return {
        "passages": n,
        "bytes": (index_dir / TEXT_FILE).stat().st_size,
        "built_at": manifest.get("build", {}).get("finished_at"),
    }


def load_dense_encoder(settings: Settings) -> tuple[SentenceTransformer, Path]:
    """The sentence-transformers model of ``retrieval.dense_model`` in the configured
    dtype and device, cut at :data:`MAX_LENGTH` tokens, and its local folder."""
    import torch

    r = settings.retrieval
    path = model_folder(settings, r.dense_model)
    model = load_sentence_model(settings, r.dense_model, r.dense_device)
    model.max_seq_length = MAX_LENGTH
    if compute_dtype(settings) == "bfloat16":
        model.to(torch.bfloat16)
    model.eval()
    return model, path


def top_k_inner_product(
    matrix: np.ndarray,
    queries: np.ndarray,
    k: int,
    block: int = SEARCH_BLOCK,
    *,
    fast: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` rows of ``matrix`` by inner product with each query, best first.

    ``matrix`` may be a float16 memory map, read in ``block``-row slices. Converting
    float16 to float32 costs ~3 ns per value here (0.45 s for 370k x 384), more than the
    product itself, so up to ``FAST_QUERIES`` queries against a float16 matrix take a
    candidate pass with torch's float16 product (memory-bound, ~25 ms per query at that
    size), keep the best ``k + CANDIDATE_MARGIN`` rows per query and score those again
    in float32; larger batches convert each block once and share it. Scores are float32
    inner products; equal scores come in row order. Returns ``(rows, scores)``, shape
    ``(len(queries), min(k, len(matrix)))``.
    """
    n, q = matrix.shape[0], queries.shape[0]
    k = min(int(k), n)
    if q == 0 or k <= 0:
        return np.zeros((q, 0), np.int64), np.zeros((q, 0), np.float32)
    qf = np.ascontiguousarray(queries, dtype=np.float32)
    if fast and matrix.dtype == np.float16 and q <= FAST_QUERIES and _torch_available():
        import torch

        with warnings.catch_warnings():  # a read-only memmap: torch only reads it
            warnings.simplefilter("ignore", UserWarning)
            tm = torch.from_numpy(matrix)
        qh = torch.from_numpy(qf).half().T

        def half_scores(start: int, stop: int) -> np.ndarray:
            return (tm[start:stop] @ qh).float().numpy().T

        cand, _ = _running_top_k(n, q, min(n, k + CANDIDATE_MARGIN), block, half_scores)
        rows = np.sort(cand, axis=1)
        exact = np.einsum(
            "qcd,qd->qc",
            np.asarray(matrix[rows.ravel()], np.float32).reshape(q, -1, qf.shape[1]),
            qf,
        )
        order = np.lexsort((rows, -exact), axis=-1)[:, :k]
        return np.take_along_axis(rows, order, 1), np.take_along_axis(exact, order, 1)

    qt = qf.T

    def exact_scores(start: int, stop: int) -> np.ndarray:
        return (np.asarray(matrix[start:stop], dtype=np.float32) @ qt).T

    best_i, best_s = _running_top_k(n, q, k, block, exact_scores)
    order = np.lexsort((best_i, -best_s), axis=-1)
    return np.take_along_axis(best_i, order, 1), np.take_along_axis(best_s, order, 1)


def _running_top_k(
    n: int, q: int, k: int, block: int, scores_of: Callable[[int, int], np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Unordered top-``k`` (rows, scores) per query over row blocks; ``scores_of(a, b)`` is
    the ``(q, b - a)`` score matrix of rows ``a..b``."""
    best_s = np.full((q, 0), -np.inf, np.float32)
    best_i = np.zeros((q, 0), np.int64)
    for start in range(0, n, block):
        scores = scores_of(start, min(n, start + block))
        kk = min(k, scores.shape[1])
        part = np.argpartition(-scores, kk - 1, axis=1)[:, :kk]
        cand_s = np.concatenate([best_s, np.take_along_axis(scores, part, 1)], axis=1)
        cand_i = np.concatenate([best_i, part + start], axis=1)
        if cand_s.shape[1] > k:
            keep = np.argpartition(-cand_s, k - 1, axis=1)[:, :k]
            cand_s = np.take_along_axis(cand_s, keep, 1)
            cand_i = np.take_along_axis(cand_i, keep, 1)
        best_s, best_i = cand_s, cand_i
    return best_i, best_s


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


class DenseIndex:
    """Exact dense search over the dense index of ``dense_model`` in ``index_dir``;
    ``Passage.score`` is the cosine."""

    def __init__(
        self,
        index_dir: str | Path,
        model: SentenceTransformer,
        *,
        batch_size: int = 64,
        expected_fingerprint: str | None = None,
        dense_model: str = FIRST_MODEL,
    ) -> None:
        index_dir = Path(index_dir)
        folder = dense_folder(index_dir, dense_model)
        build = build_command(index_dir, dense_model)
        manifest = mf.read_manifest(folder)
        if manifest is None or not (folder / EMBEDDINGS_FILE).is_file():
            raise UserError(f"no dense index in {folder}; build it with `{build}`")
        if manifest.get("format_version") != FORMAT_VERSION:
            raise UserError(
                f"dense index in {folder} has format {manifest.get('format_version')}, this "
                f"version reads {FORMAT_VERSION}; rebuild it with `{build}`"
            )
        if not manifest.get("complete"):
            raise UserError(
                f"dense index in {folder} is unfinished ({manifest.get('done', 0):,} of "
                f"{manifest.get('n', 0):,} passages); finish it with `{build}`"
            )
        if expected_fingerprint and manifest.get("model_fingerprint") != expected_fingerprint:
            raise UserError(
                f"dense index in {folder} was built with model {manifest.get('model')!r} "
                f"(other weights than retrieval.dense_model); rebuild it with "
                f"`{build}`"
            )
        self.store = PassageStore(index_dir)
        self.embeddings = np.load(folder / EMBEDDINGS_FILE, mmap_mode="r")
        n = len(self.store)
        if (
            self.embeddings.shape != (manifest["n"], manifest["dim"])
            or n != manifest["n"]
            or manifest.get("store") != store_identity(index_dir, n)
        ):
            self.store.close()
            raise UserError(
                f"dense index in {folder} does not match the passage store ({n:,} passages, "
                f"embeddings {self.embeddings.shape}); rebuild it with "
                f"`{build}`"
            )
        self.folder = index_dir
        self.manifest = manifest
        self.model = model
        self.batch_size = batch_size
        self.ann: AnnIndex | None = None
        try:
            self.ann = AnnIndex.open(folder, self.embeddings, manifest)
        except UserError as exc:  # the exact scan still answers, only slower
            log.warning("%s; searching by exact scan", exc)

    @classmethod
    def from_settings(cls, settings: Settings, index_dir: str | Path | None = None) -> DenseIndex:
        index_dir = Path(index_dir) if index_dir is not None else settings.index_dir
        model_id = settings.retrieval.dense_model
        folder = dense_folder(index_dir, model_id)
        manifest = mf.read_manifest(folder)
        if manifest is None:  # before loading a model
            raise UserError(
                f"no dense index in {folder}; build it with `{build_command(index_dir, model_id)}`"
            )
        model, path = load_dense_encoder(with_index_dtype(settings, manifest))
        return cls(
            index_dir,
            model,
            batch_size=BATCH_SIZE,
            expected_fingerprint=model_fingerprint(path),
            dense_model=model_id,
        )

    def __len__(self) -> int:
        return int(self.embeddings.shape[0])

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        return encode(self.model, queries, self.batch_size, "query")

    def search_vectors(
        self, vectors: np.ndarray, k: int, *, exact: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """Document numbers and cosines for already encoded queries: through the ANN index
        where the folder has one (unless ``exact``), else by the exact scan."""
        if self.ann is not None and not exact:
            return self.ann.search(vectors, k, exact=self._exact)
        return self._exact(vectors, k)

    def _exact(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return top_k_inner_product(self.embeddings, vectors, k)

    def search_docs(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.search_vectors(self.encode_queries(queries), k)

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """Top-``k`` passages per query by cosine similarity, best first."""
        if isinstance(queries, str):
            raise TypeError("search() takes a sequence of queries, not one string")
        docs, scores = self.search_docs(queries, k)
        return self.store.passages(docs, scores)

    def close(self) -> None:
        self.store.close()
