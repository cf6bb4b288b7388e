"""An approximate nearest-neighbour (ANN) index beside a dense index, with FAISS.

The exact scan of :func:`typed_rag.retrieval.dense.top_k_inner_product` reads every row
for every query: ~25 ms on 370k x 384 float16, about 1.5-2 s on the 21M DPR passages. An
ANN index answers from a small part of the rows. Two kinds (``index build --dense --ann``,
built by :func:`indexes.ann.build_ann`):

- ``hnsw``: FAISS ``IndexHNSWSQ`` (an HNSW graph over float16 copies of the vectors,
  inner product). Best recall per millisecond; memory ~ n x (2 x dim + 8 x M) bytes
  (3.7M x 384, M=32: ~3.8 GB), so it suits collections up to a few million passages.
- ``ivfpq``: FAISS ``IndexIVFPQ`` (a coarse k-means quantizer of ``nlist`` lists and
  product-quantised codes of ``pq_m`` bytes a vector): ~n x pq_m bytes in memory (21M x 48:
  1 GB), so it fits the 21M DPR passages on a 24 GB machine.

Both return ``refine`` candidates that are scored again exactly, in float32, from the
memory-mapped float16 embeddings the exact scan reads, so ``Passage.score`` is the exact
cosine in every mode and the ANN only decides which rows are looked at.

``<dense folder>/ann.faiss`` holds the index and ``ann.json`` its kind, build and search
parameters, how many rows are added and the dense index it describes (its manifest's
model fingerprint, row count and store); :class:`AnnIndex` refuses one that does not match.
faiss is an optional dependency (``pip install 'typed-rag[ann]'``, the faiss-cpu wheel),
imported only when an ANN index is built or opened.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np

from typed_rag.errors import UserError

log = logging.getLogger(__name__)

AnnKind = Literal["auto", "hnsw", "ivfpq", "none"]
ANN_FILE = "ann.faiss"
ANN_MANIFEST = "ann.json"
ANN_FORMAT = 1
INSTALL_HINT = "pip install 'typed-rag[ann]' (or: pip install faiss-cpu)"

# ``auto``: the exact scan below EXACT_BELOW rows (see choose_kind), where it costs less than
# encoding the query (3-15 ms at 50k) with recall 1.0 and nothing to build; HNSW up to
# HNSW_UP_TO; IVF-PQ above. On the scale benchmark (docs/retrieval.md, results/scale/
# summary.json) HNSW reached recall@10 0.961 against the exact scan at 370k but at most 0.908
# at 3.7M (efSearch 1024), where IVF-PQ reached 0.966 at 2.4 ms; the switch lies between.
EXACT_BELOW = 50_000
HNSW_UP_TO = 1_000_000

# Build and search parameters, chosen on the scale benchmark: HNSW's reach 0.961 at 370k;
# IVF-PQ's probes and rescored candidates the cheapest setting reaching 0.95 at 3.7M (at
# 370k nprobe 48 with 200 rescored already reached 0.954).
HNSW_PARAMS: dict[str, int] = {"M": 32, "ef_construction": 128, "ef_search": 256, "refine": 64}
IVFPQ_PARAMS: dict[str, int] = {"pq_m": 48, "pq_bits": 8, "nprobe": 128, "refine": 400}


def faiss_module() -> Any:
    """The faiss module, or a UserError saying what to install."""
    try:
        import faiss
    except ImportError as exc:
        raise UserError(
            f"the ANN index needs FAISS, which is not installed: {INSTALL_HINT}"
        ) from exc
    return faiss


def faiss_available() -> bool:
    try:
        faiss_module()
    except UserError:
        return False
    return True


def choose_kind(kind: AnnKind, n: int) -> Literal["hnsw", "ivfpq", "none"]:
    """What ``--ann kind`` means for ``n`` rows: ``auto`` is the exact scan (``none``)
    below :data:`EXACT_BELOW`, HNSW up to :data:`HNSW_UP_TO`, IVF-PQ above."""
    if kind != "auto":
        return kind
    if n < EXACT_BELOW:
        return "none"
    return "hnsw" if n <= HNSW_UP_TO else "ivfpq"


def ivf_lists(n: int) -> int:
    """IVF lists for ``n`` rows: about 4 sqrt(n), a power of two, 64 to 65,536."""
    target = 4 * float(np.sqrt(max(n, 1)))
    return int(min(65_536, max(64, 2 ** round(np.log2(target)))))


def read_ann_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / ANN_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def dense_identity(dense_manifest: dict[str, Any]) -> dict[str, Any]:
    """What an ANN manifest records of the dense index it was built from."""
    return {
        "model_fingerprint": dense_manifest.get("model_fingerprint"),
        "n": dense_manifest.get("n"),
        "dim": dense_manifest.get("dim"),
        "store": dense_manifest.get("store"),
    }


class AnnIndex:
    """Approximate top-k over an embeddings matrix, exact scores for the rows it returns."""

    def __init__(self, index: Any, manifest: dict[str, Any], embeddings: np.ndarray) -> None:
        self.index = index
        self.manifest = manifest
        self.kind: str = manifest["kind"]
        self.embeddings = embeddings
        self.search_params: dict[str, int] = dict(manifest["search"])
        self.set_search(**self.search_params)

    @classmethod
    def open(
        cls, folder: Path, embeddings: np.ndarray, dense_manifest: dict[str, Any] | None = None
    ) -> AnnIndex | None:
        """The finished ANN index in dense folder ``folder``, None when there is none.

        Raises UserError when one is there but faiss is missing, it is unfinished, or it
        was built from other embeddings.
        """
        manifest = read_ann_manifest(folder)
        if manifest is None or not (folder / ANN_FILE).is_file():
            return None
        rebuild = f"rebuild it with `typed-rag index build --dense --ann {manifest.get('kind')}`"
        if manifest.get("format_version") != ANN_FORMAT or not manifest.get("complete"):
            raise UserError(
                f"the ANN index in {folder} is unfinished ({manifest.get('added', 0):,} of "
                f"{manifest.get('n', 0):,} rows) or of another format; finish or {rebuild}"
            )
        if dense_manifest is not None and manifest.get("dense") != dense_identity(dense_manifest):
            raise UserError(f"the ANN index in {folder} describes other embeddings; {rebuild}")
        if int(manifest["n"]) != embeddings.shape[0]:
            raise UserError(f"the ANN index in {folder} has {manifest['n']} rows; {rebuild}")
        faiss = faiss_module()
        index = faiss.read_index(str(folder / ANN_FILE))
        return cls(index, manifest, embeddings)

    def set_search(self, **params: int) -> None:
        """Change search parameters (``ef_search`` / ``nprobe``, ``refine``) in place."""
        self.search_params.update(params)
        faiss = faiss_module()
        if self.kind == "hnsw":
            self.index.hnsw.efSearch = int(self.search_params["ef_search"])
        else:
            faiss.extract_index_ivf(self.index).nprobe = int(self.search_params["nprobe"])

    def search(
        self,
        vectors: np.ndarray,
        k: int,
        exact: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows and exact float32 inner products of the best ``k`` candidates per query,
        best first (ties in row order); shape ``(len(vectors), min(k, n))``. A query for
        which the ANN finds fewer than ``k`` rows is answered by ``exact`` (the exact
        scan) when given, else it raises."""
        n, q = self.embeddings.shape[0], vectors.shape[0]
        k = min(int(k), n)
        if q == 0 or k <= 0:
            return np.zeros((q, 0), np.int64), np.zeros((q, 0), np.float32)
        qf = np.ascontiguousarray(vectors, dtype=np.float32)
        depth = min(n, max(k, int(self.search_params.get("refine", k))))
        _, cand = self.index.search(qf, depth)
        rows_out = np.zeros((q, k), np.int64)
        scores_out = np.zeros((q, k), np.float32)
        short = []
        for i in range(q):
            rows = np.unique(cand[i][cand[i] >= 0])  # sorted, -1 (fewer found) dropped
            if rows.size < k:
                short.append(i)
                continue
            scores = np.asarray(self.embeddings[rows], np.float32) @ qf[i]
            order = np.lexsort((rows, -scores))[:k]
            rows_out[i], scores_out[i] = rows[order], scores[order]
        if short:
            if exact is None:
                raise RuntimeError(f"the ANN index found fewer than {k} rows for a query")
            rows_out[short], scores_out[short] = exact(qf[short], k)
        return rows_out, scores_out
