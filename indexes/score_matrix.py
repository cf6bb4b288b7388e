"""Pass 2 of a BM25 index build: the CSC score matrix bm25s loads, from pass 1's postings.

Pass 1 (:mod:`indexes.build`) leaves every posting on disk as a term id (``TID_FILE``)
and a clipped term frequency (``TF_FILE``), in document order, plus per-passage lengths
and distinct-term counts. Here the document frequencies are counted, the IDF computed
with bm25s's own scorer for the chosen method, and every posting's score written
straight into memory-mapped ``.npy`` files by a chunked counting sort (term-major, as
bm25s stores it). Postings land in scattered order, so this runs at disk speed unless
the index fits in the page cache. bm25s (scipy, numba: seconds to import) is imported
when the matrix is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

TID_FILE = "_postings.tid"  # int32 term id per posting (temporary)
TF_FILE = "_postings.tf"  # uint16 term frequency per posting (temporary)
_NONOCCURRENCE = ("bm25l", "bm25+")


@dataclass(frozen=True)
class CollectionStats:
    """The statistics a shard of a larger collection is scored with instead of its own:
    the collection's passage count, its mean passage length and, for each of this shard's
    terms (its columns), the collection's document frequency. With them every posting
    gets exactly the score an unsharded index of the whole collection gives it."""

    n_docs: int
    avg_len: float
    df: np.ndarray  # int64, one per column of this shard


def document_frequencies(folder: Path, n_cols: int) -> np.ndarray:
    """Passages per term (column) among pass 1's postings in ``folder``."""
    tids_all = _memmap_or_empty(folder / TID_FILE, np.int32)
    df = np.zeros(n_cols, dtype=np.int64)
    step = 50_000_000
    for s in range(0, int(tids_all.size), step):
        df += np.bincount(tids_all[s : s + step], minlength=n_cols)
    return df


def write_csc(
    folder: Path,
    doc_len: np.ndarray,
    doc_terms: np.ndarray,
    *,
    n_cols: int,
    params: dict[str, Any],
    show_progress: bool,
    docs_per_step: int = 100_000,
    collection: CollectionStats | None = None,
) -> int:
    """Score every posting and write the term-major CSC arrays bm25s loads; with
    ``collection``, IDF and length normalisation use the whole collection's statistics
    (the matrix's own columns still hold only this folder's postings)."""
    from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer

    tids_all = _memmap_or_empty(folder / TID_FILE, np.int32)
    tfs_all = _memmap_or_empty(folder / TF_FILE, np.uint16)
    nnz = int(tids_all.size)
    df = document_frequencies(folder, n_cols)
    n_docs = int(doc_len.size)
    avg_len = float(doc_len.mean())
    method = params["method"]
    if collection is None:
        idf = _idf_array(df, n_docs, _select_idf_scorer(method))
    else:
        if collection.df.shape != df.shape or bool((collection.df < df).any()):
            raise ValueError("collection document frequencies do not cover this shard's")
        avg_len = float(collection.avg_len)
        idf = _idf_array(collection.df, collection.n_docs, _select_idf_scorer(method))
    tfc: Callable[..., np.ndarray] = _select_tfc_scorer(method)
    k1, b, delta = params["k1"], params["b"], params["delta"]
    nonocc = None
    if method in _NONOCCURRENCE:
        # bm25s's definition: the score a document gets for a query term it lacks
        nonocc = (
            idf * tfc(tf_array=0, l_d=avg_len, l_avg=avg_len, k1=k1, b=b, delta=delta)
        ).astype(np.float32)
        np.save(folder / "nonoccurrence_array.index.npy", nonocc)

    indptr = np.zeros(n_cols + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    data = np.lib.format.open_memmap(
        folder / "data.csc.index.npy", mode="w+", dtype=np.float32, shape=(nnz,)
    )
    indices = np.lib.format.open_memmap(
        folder / "indices.csc.index.npy", mode="w+", dtype=np.int32, shape=(nnz,)
    )
    heads = indptr[:-1].copy()
    post_ptr = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(doc_terms, out=post_ptr[1:])
    for d0 in tqdm(
        range(0, n_docs, docs_per_step),
        desc="index: score matrix",
        unit="step",
        disable=not show_progress,
    ):
        d1 = min(d0 + docs_per_step, n_docs)
        p0, p1 = int(post_ptr[d0]), int(post_ptr[d1])
        if p0 == p1:
            continue
        t = np.asarray(tids_all[p0:p1])
        tf = np.asarray(tfs_all[p0:p1]).astype(np.float32)
        docs = np.repeat(np.arange(d0, d1, dtype=np.int32), doc_terms[d0:d1])
        lens = doc_len[docs].astype(np.float32)
        scores = idf[t] * tfc(tf_array=tf, l_d=lens, l_avg=avg_len, k1=k1, b=b, delta=delta)
        if nonocc is not None:
            scores -= nonocc[t]
        order = np.argsort(t, kind="stable")  # term-major, documents stay ascending
        ts = t[order]
        uniq, first, count = np.unique(ts, return_index=True, return_counts=True)
        pos = heads[ts] + (np.arange(ts.size) - np.repeat(first, count))
        data[pos] = scores[order]
        indices[pos] = docs[order]
        heads[uniq] += count
    data.flush()
    indices.flush()
    del data, indices
    np.save(folder / "indptr.csc.index.npy", indptr)
    return nnz


def _idf_array(df: np.ndarray, n_docs: int, idf_fn: Callable[..., float]) -> np.ndarray:
    """IDF per term with bm25s's scalar formula (0 where a term has no document)."""
    idf = np.zeros(df.size, dtype=np.float32)
    present = np.flatnonzero(df)
    idf[present] = [idf_fn(int(d), N=n_docs) for d in df[present]]
    return idf


def _memmap_or_empty(path: Path, dtype: type) -> np.ndarray:
    if path.stat().st_size == 0:
        return np.empty(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r")
