"""Dense retrieval: sentence embeddings of every passage, searched exactly.

``build_dense`` encodes the passages of a BM25 index folder's passage store, in store
document order, into ``<index_dir>/dense/embeddings.npy``: float16, L2-normalised, shape
``[n, dim]``, written through a memory map. The text encoded for a passage is
``"title. text"`` (just the text when it has no title), as the bi-encoder reranker sees
it. ``dense/manifest.json`` records the model (name and a fingerprint of its files),
dim, n, dtypes, max length and how many passages are done; it is rewritten after every
chunk, so an interrupted build resumes at the last finished chunk when run again.

``DenseIndex`` memory-maps the embeddings and the passage store and answers
``search(queries, k)`` by inner product (cosine, since both sides are normalised) over
every row: the queries are encoded in one batch, the matrix is scanned in row blocks and
a running top-k per query is kept with ``argpartition`` (see :func:`top_k_inner_product`
for the float16 candidate pass that keeps a single query at ~25 ms on 370k x 384, one
CPU thread). That is fast enough for the default corpus, so no ANN index is used; the
21M-passage DPR corpus would need one (about 1.5 s per query by exact scan). Measured by
``benchmarks/hybrid_bench.py``.

A rebuild of the BM25 index replaces the whole folder, ``dense/`` included, so the
embeddings can never describe an older passage store; the manifest also records the
store's size and build time and loading checks them.
"""

from __future__ import annotations

import hashlib
import logging
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

import indexes.manifest as mf
from indexes.store import PassageStore
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.rerank.text import passage_text
from typed_rag.retrieval import Passage

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

DENSE_DIR = "dense"
EMBEDDINGS_FILE = "embeddings.npy"
FORMAT_VERSION = 1
STORED_DTYPE = "float16"
SEARCH_BLOCK = 1 << 15  # rows scored at a time (384 dims, float32: 48 MiB)
FAST_QUERIES = 16  # up to this many queries: float16 candidate pass (see top_k_inner_product)
CANDIDATE_MARGIN = 64  # extra candidates per query rescored exactly after the float16 pass
_SAMPLE = 1 << 20


def dense_folder(index_dir: str | Path) -> Path:
    """Where the dense index of a BM25 index folder lives."""
    return Path(index_dir) / DENSE_DIR


def build_command(index_dir: Path) -> str:
    return f"typed-rag index build --dense --out {index_dir}"


# ---------------------------------------------------------------- encoder


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (else torch emulates it, slowly)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[-1].split())
            return bool(flags & {"avx512_bf16", "amx_bf16"})
    return False


def compute_dtype(settings: Settings) -> str:
    """``retrieval.dense_dtype`` with ``auto`` resolved for the configured device."""
    r = settings.retrieval
    if r.dense_dtype != "auto":
        return r.dense_dtype
    if r.dense_device.startswith("cuda"):
        import torch

        return "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    return "bfloat16" if r.dense_device == "cpu" and cpu_has_bf16() else "float32"


def load_encoder(settings: Settings) -> tuple[SentenceTransformer, Path]:
    """The sentence-transformers model of ``retrieval.dense_model`` in the configured
    dtype, device, thread count and max length, and its local folder."""
    import torch

    from typed_rag.classifier.embedder import load_sentence_model
    from typed_rag.models import ensure_model

    r = settings.retrieval
    if r.dense_max_length <= 0:
        raise UserError(f"retrieval.dense_max_length must be positive, got {r.dense_max_length}")
    if r.dense_batch_size <= 0:
        raise UserError(f"retrieval.dense_batch_size must be positive, got {r.dense_batch_size}")
    if r.dense_threads is not None:
        torch.set_num_threads(max(1, r.dense_threads))
    path = ensure_model(settings, r.dense_model)
    model = load_sentence_model(settings, r.dense_model, r.dense_device)
    model.max_seq_length = r.dense_max_length
    if compute_dtype(settings) == "bfloat16":
        model.to(torch.bfloat16)
    model.eval()
    return model, path


def encode(model: SentenceTransformer, texts: Sequence[str], batch_size: int) -> np.ndarray:
    """Float32, L2-normalised embeddings (normalised in float32, whatever the compute dtype)."""
    import torch

    if not texts:
        from typed_rag.classifier.embedder import embedding_dim

        return np.zeros((0, embedding_dim(model)), np.float32)
    with torch.inference_mode():
        out = model.encode(
            list(texts), batch_size=batch_size, convert_to_tensor=True, show_progress_bar=False
        )
    emb = out.float().cpu().numpy()
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    np.maximum(norms, 1e-12, out=norms)
    return emb / norms


def model_fingerprint(folder: Path) -> str:
    """Identify a model folder cheaply: each file's name, size and first and last MiB."""
    h = hashlib.blake2b(digest_size=16)
    files = [folder] if folder.is_file() else sorted(p for p in folder.rglob("*") if p.is_file())
    for path in files:
        if path.name.startswith(".") or path.suffix == ".md":
            continue
        size = path.stat().st_size
        h.update(f"{path.relative_to(folder) if path != folder else path.name}:{size}".encode())
        with path.open("rb") as f:
            h.update(f.read(_SAMPLE))
            if size > 2 * _SAMPLE:
                f.seek(size - _SAMPLE)
                h.update(f.read(_SAMPLE))
    return h.hexdigest()


# ---------------------------------------------------------------- build


@dataclass
class DenseBuildReport:
    """What ``build_dense`` did; ``skipped`` when a complete, matching index was kept."""

    out: Path
    skipped: bool = False
    reason: str = ""
    passages: int = 0
    encoded: int = 0  # passages encoded by this run
    resumed_from: int = 0
    dim: int = 0
    seconds: float = 0.0
    passages_per_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["out"] = str(self.out)
        return d


def _store_identity(index_dir: Path, n: int) -> dict[str, Any]:
    manifest = mf.read_manifest(index_dir) or {}
    return {
        "passages": n,
        "bytes": (index_dir / "passages.bin").stat().st_size,
        "built_at": manifest.get("build", {}).get("finished_at"),
    }


def _mismatch(old: dict[str, Any] | None, new: dict[str, Any], folder: Path) -> str | None:
    """Why an existing (partial) dense index cannot be continued; None when it can."""
    if old is None:
        return "no dense manifest"
    if not (folder / EMBEDDINGS_FILE).is_file():
        return f"{EMBEDDINGS_FILE} missing"
    for key in ("format_version", "model_fingerprint", "dim", "n", "dtype", "compute_dtype"):
        if old.get(key) != new.get(key):
            return f"{key} changed ({old.get(key)} -> {new.get(key)})"
    for key in ("max_length", "store"):
        if old.get(key) != new.get(key):
            return f"{key} changed"
    return None


def build_dense(
    settings: Settings,
    index_dir: str | Path | None = None,
    *,
    if_missing: bool = False,
    show_progress: bool = True,
    chunk_size: int = 4096,
    on_chunk: Callable[[int], None] | None = None,
) -> DenseBuildReport:
    """Encode the passages of the BM25 index in ``index_dir`` (default ``settings.index_dir``).

    An unfinished build with the same model and parameters is continued from its last
    finished chunk; a finished one is kept with ``if_missing`` and rebuilt otherwise.
    ``on_chunk(done)`` is called after each chunk is flushed (progress hooks, tests).
    """
    index_dir = Path(index_dir).expanduser() if index_dir is not None else settings.index_dir
    if mf.read_manifest(index_dir) is None:
        raise UserError(
            f"no BM25 index at {index_dir}: the dense index encodes its passage store; "
            f"run `typed-rag index build --dense --out {index_dir}`"
        )
    if chunk_size <= 0:
        raise ValueError("chunk_size must be positive")
    store = PassageStore(index_dir)
    folder = dense_folder(index_dir)
    t0 = time.perf_counter()
    try:
        model, model_dir = load_encoder(settings)
        from typed_rag.classifier.embedder import embedding_dim

        r = settings.retrieval
        n = len(store)
        dim = embedding_dim(model)
        wanted: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "model": r.dense_model,
            "model_fingerprint": model_fingerprint(model_dir),
            "dim": dim,
            "n": n,
            "dtype": STORED_DTYPE,
            "compute_dtype": compute_dtype(settings),
            "max_length": r.dense_max_length,
            "text": "title. text",
            "normalized": True,
            "store": _store_identity(index_dir, n),
        }
        old = mf.read_manifest(folder)
        reason = _mismatch(old, wanted, folder)
        done = 0
        if reason is None and old is not None:
            done = int(old.get("done", 0))
            if done >= n:
                if if_missing:
                    return DenseBuildReport(
                        out=folder,
                        skipped=True,
                        reason="dense index is up to date",
                        passages=n,
                        dim=dim,
                    )
                done = 0
                reason = "rebuilding a complete index"
        if done == 0:
            log.info("dense build from scratch (%s)", reason)
            emb = _start_over(folder, n, dim)
        else:
            log.info("resuming dense build at passage %d of %d", done, n)
            emb = np.load(folder / EMBEDDINGS_FILE, mmap_mode="r+")
            if emb.shape != (n, dim) or emb.dtype != np.dtype(STORED_DTYPE):
                log.info("%s has shape %s; starting over", EMBEDDINGS_FILE, emb.shape)
                del emb
                done, reason = 0, "embeddings file damaged"
                emb = _start_over(folder, n, dim)
        resumed_from = done
        with tqdm(
            total=n,
            initial=done,
            unit="psg",
            unit_scale=True,
            desc="dense: encode",
            disable=not show_progress,
            smoothing=0.05,
        ) as bar:
            while done < n:
                stop = min(n, done + chunk_size)
                texts = [encoder_text(store.get(i)) for i in range(done, stop)]
                emb[done:stop] = encode(model, texts, r.dense_batch_size).astype(STORED_DTYPE)
                emb.flush()
                done = stop
                mf.write_manifest(
                    folder,
                    {
                        **wanted,
                        "done": done,
                        "complete": done >= n,
                        "updated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    },
                )
                bar.update(stop - bar.n)
                if on_chunk is not None:
                    on_chunk(done)
        del emb
    finally:
        store.close()
    seconds = time.perf_counter() - t0
    encoded = n - resumed_from
    return DenseBuildReport(
        out=folder,
        reason=reason or "",
        passages=n,
        encoded=encoded,
        resumed_from=resumed_from,
        dim=dim,
        seconds=seconds,
        passages_per_s=encoded / seconds if seconds > 0 else 0.0,
    )


def _start_over(folder: Path, n: int, dim: int) -> np.memmap:
    """An empty embeddings file; the manifest goes first, so a crash never looks resumable."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / mf.MANIFEST_FILE).unlink(missing_ok=True)
    return np.lib.format.open_memmap(
        folder / EMBEDDINGS_FILE, mode="w+", dtype=STORED_DTYPE, shape=(n, dim)
    )


def encoder_text(row: tuple[str, str, str]) -> str:
    """What the encoder sees of a stored ``(id, title, text)``: ``"title. text"``."""
    _, title, text = row
    return passage_text(Passage(id="", title=title, text=text))


# ---------------------------------------------------------------- search


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
    """Exact dense search over ``<index_dir>/dense``; ``Passage.score`` is the cosine."""

    def __init__(
        self,
        index_dir: str | Path,
        model: SentenceTransformer,
        *,
        batch_size: int = 64,
        expected_fingerprint: str | None = None,
    ) -> None:
        index_dir = Path(index_dir)
        folder = dense_folder(index_dir)
        manifest = mf.read_manifest(folder)
        if manifest is None or not (folder / EMBEDDINGS_FILE).is_file():
            raise UserError(
                f"no dense index in {folder}; build it with `{build_command(index_dir)}`"
            )
        if manifest.get("format_version") != FORMAT_VERSION:
            raise UserError(
                f"dense index in {folder} has format {manifest.get('format_version')}, this "
                f"version reads {FORMAT_VERSION}; rebuild it with `{build_command(index_dir)}`"
            )
        if not manifest.get("complete"):
            raise UserError(
                f"dense index in {folder} is unfinished ({manifest.get('done', 0):,} of "
                f"{manifest.get('n', 0):,} passages); finish it with `{build_command(index_dir)}`"
            )
        if expected_fingerprint and manifest.get("model_fingerprint") != expected_fingerprint:
            raise UserError(
                f"dense index in {folder} was built with model {manifest.get('model')!r} "
                f"(other weights than retrieval.dense_model); rebuild it with "
                f"`{build_command(index_dir)}`"
            )
        self.store = PassageStore(index_dir)
        self.embeddings = np.load(folder / EMBEDDINGS_FILE, mmap_mode="r")
        n = len(self.store)
        if (
            self.embeddings.shape != (manifest["n"], manifest["dim"])
            or n != manifest["n"]
            or manifest.get("store") != _store_identity(index_dir, n)
        ):
            self.store.close()
            raise UserError(
                f"dense index in {folder} does not match the passage store ({n:,} passages, "
                f"embeddings {self.embeddings.shape}); rebuild it with "
                f"`{build_command(index_dir)}`"
            )
        self.folder = index_dir
        self.manifest = manifest
        self.model = model
        self.batch_size = batch_size

    @classmethod
    def from_settings(cls, settings: Settings, index_dir: str | Path | None = None) -> DenseIndex:
        index_dir = Path(index_dir) if index_dir is not None else settings.index_dir
        folder = dense_folder(index_dir)
        if mf.read_manifest(folder) is None:  # before loading a model
            raise UserError(
                f"no dense index in {folder}; build it with `{build_command(index_dir)}`"
            )
        model, path = load_encoder(settings)
        return cls(
            index_dir,
            model,
            batch_size=settings.retrieval.dense_batch_size,
            expected_fingerprint=model_fingerprint(path),
        )

    def __len__(self) -> int:
        return int(self.embeddings.shape[0])

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        return encode(self.model, queries, self.batch_size)

    def search_vectors(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Document numbers and cosines for already encoded queries."""
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
