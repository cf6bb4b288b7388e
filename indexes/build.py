"""Build a BM25 index folder from a DPR corpus in two streamed passes.

Pass 1 reads the corpus in chunks: each passage goes to the passage store, its title and
text are analysed to term ids (bm25s's analysis, see :mod:`typed_rag.retrieval.analyzer`;
vocabulary grown incrementally), and the chunk's (term, term frequency) postings are
appended to temporary files on disk. Stemming runs in ``workers`` forked processes
(:mod:`indexes.stem_pool`) while this process reads, assigns term ids in corpus order and
writes postings, so the result is byte-identical to an in-process build (``workers=0``). Only the vocabulary and two
int32 per-passage arrays stay in memory.

Pass 2 (:mod:`indexes.score_matrix`) writes the CSC score matrix bm25s loads from those
postings. The folder is then loadable by ``bm25s.BM25.load(..., mmap=True)`` (searched by
:class:`typed_rag.retrieval.bm25.BM25Index`); the build happens in a sibling temp folder
that replaces the old index only when complete.

Scale (documented limits): memory is the vocabulary (~0.35M terms for the 370k default
corpus; expect several million for the 21M DPR passages, ~1-2 GB as a Python dict) plus
~8 bytes per passage; disk is ~6 bytes per posting while building and ~8 bytes per
posting in the index (DPR 21M: ~1.2B postings, ~10 GB index plus the ~13 GB passage
store). Pass 2 writes postings in scattered order, so it runs at disk speed unless the
index fits in the page cache.

bm25s pulls in scipy and numba (seconds to import), so the build functions import it
when they run, not when this module is imported.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import multiprocessing.pool
import os
import shutil
import time
from array import array
from collections import deque
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from multiprocessing.pool import AsyncResult
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from tqdm.auto import tqdm

import typed_rag.retrieval.manifest as mf
from indexes.corpus import CorpusReader, CorpusRow, OnError, ReadStats, resolve_corpus
from indexes.freshness import corpus_fingerprint, stale_reason
from indexes.score_matrix import TF_FILE, TID_FILE, CollectionStats, write_csc
from indexes.stem_pool import default_workers, start_pool, stems_in_worker
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.retrieval.analyzer import DEFAULT_ANALYZER, Analyzer
from typed_rag.retrieval.bm25 import BM25_PARAMS
from typed_rag.retrieval.store import PassageStoreWriter
from typed_rag.retrieval.vocab import HashedVocab, has_hashed_vocab, write_hashed_vocab

log = logging.getLogger(__name__)

_MAX_TF = np.iinfo(np.uint16).max  # tf above this is clipped (its BM25 weight is saturated)


class RowSource(Protocol):
    """What a build reads: rows with ``id``, ``title``, ``text``; ``stats`` after the pass."""

    path: Path
    stats: ReadStats

    def __iter__(self) -> Iterator[CorpusRow]: ...


@dataclass
class BaseBuildReport:
    """The fields every BM25 build report has (:class:`BuildReport`, the sharded one)."""

    out: Path
    skipped: bool = False
    reason: str = ""
    passages: int = 0
    postings: int = 0
    skipped_rows: int = 0
    first_error: str | None = None
    seconds: float = 0.0
    passages_per_s: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["out"] = str(self.out)
        return d


@dataclass
class BuildReport(BaseBuildReport):
    """What ``build_index`` did; ``skipped`` when an up-to-date index was kept."""

    vocab: int = 0


def build_index(
    settings: Settings,
    corpus: str | Path | None = None,
    out: str | Path | None = None,
    *,
    on_error: OnError | None = None,
    limit: int | None = None,
    k1: float | None = None,
    b: float | None = None,
    method: str | None = None,
    if_missing: bool = False,
    show_progress: bool = True,
    chunk_docs: int = 20_000,
    workers: int | None = None,
) -> BuildReport:
    """Build (or, with ``if_missing``, keep an up-to-date) BM25 index; see the module doc."""
    params, out, corpus_path, fingerprint = build_inputs(
        settings, corpus, out, k1=k1, b=b, method=method, show_progress=show_progress
    )
    analyzer = dict(DEFAULT_ANALYZER)
    if if_missing:
        reason = stale_reason(
            out, corpus=fingerprint, params=params, analyzer=analyzer, limit=limit
        )
        if reason is None:
            return BuildReport(out=out, skipped=True, reason="index is up to date")
        log.info("building index: %s", reason)
    _check_out_folder(out)

    tmp = out.parent / f".{out.name}.building-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        report = build_into(
            tmp,
            CorpusReader(corpus_path, on_error or "skip", limit=limit),
            params=params,
            analyzer=analyzer,
            show_progress=show_progress,
            chunk_docs=chunk_docs,
            workers=default_workers() if workers is None else workers,
        )
        report.out = out
        manifest = index_manifest(report, params, analyzer, corpus=fingerprint, limit=limit)
        mf.write_manifest(tmp, manifest)
        _replace_folder(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return report


def build_inputs(
    settings: Settings,
    corpus: str | Path | None,
    out: str | Path | None,
    *,
    k1: float | None,
    b: float | None,
    method: str | None,
    show_progress: bool,
) -> tuple[dict[str, Any], Path, Path, dict[str, Any]]:
    """What an unsharded and a sharded build start from: the checked BM25 parameters, the
    output folder (default ``settings.index_dir``), the corpus file and its fingerprint."""
    params = bm25_params(settings, k1=k1, b=b, method=method)
    out = Path(out).expanduser() if out is not None else settings.index_dir
    corpus_path, source = resolve_corpus(corpus or settings.corpus.path, settings, show_progress)
    return params, out, corpus_path, corpus_fingerprint(corpus_path, source)


@contextlib.contextmanager
def stemming_pool(
    workers: int, analyzer: dict[str, Any]
) -> Iterator[multiprocessing.pool.Pool | None]:
    """The stemming pool of a build (None: in-process), terminated when the block ends."""
    pool = start_pool(workers, analyzer) if workers > 0 else None
    try:
        yield pool
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()


def bm25_params(
    settings: Settings,
    *,
    k1: float | None = None,
    b: float | None = None,
    method: str | None = None,
) -> dict[str, Any]:
    """The BM25 parameters of a build: :data:`~typed_rag.retrieval.bm25.BM25_PARAMS` unless
    given, checked (``settings`` is accepted for the callers' sake; no setting changes them)."""
    params = {
        "k1": float(BM25_PARAMS["k1"] if k1 is None else k1),
        "b": float(BM25_PARAMS["b"] if b is None else b),
        "method": method or BM25_PARAMS["method"],
        "delta": 0.5,
    }
    _check_params(params)
    return params


def index_manifest(
    report: BuildReport, params: dict[str, Any], analyzer: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    """The ``manifest.json`` of a finished build; ``extra`` adds sections (corpus, ...)."""
    import bm25s

    return {
        "format_version": mf.FORMAT_VERSION,
        **extra,
        "params": params,
        "analyzer": analyzer,
        "counts": {
            "passages": report.passages,
            "vocab": report.vocab,
            "postings": report.postings,
            "skipped_rows": report.skipped_rows,
        },
        "first_error": report.first_error,
        "build": {
            "seconds": round(report.seconds, 3),
            "passages_per_s": round(report.passages_per_s, 1),
            "timings": report.timings,
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "bm25s_version": bm25s.__version__,
        },
    }


def build_into(
    folder: Path,
    reader: RowSource,
    *,
    params: dict[str, Any],
    analyzer: dict[str, Any],
    show_progress: bool,
    chunk_docs: int = 20_000,
    workers: int = 0,
) -> BuildReport:
    """Write the passage store and BM25 files of ``reader``'s rows into ``folder``
    (no manifest, no swap: :func:`build_index` and the documents build do those)."""
    t0 = time.perf_counter()
    with stemming_pool(workers, analyzer) as pool:
        first = read_postings(
            folder,
            reader,
            analyzer=analyzer,
            show_progress=show_progress,
            chunk_docs=chunk_docs,
            pool=pool,
            workers=workers,
        )
    t1 = time.perf_counter()
    n_terms = score_postings(
        folder, first.doc_len, first.doc_terms, params=params, show_progress=show_progress
    )
    t2 = time.perf_counter()
    seconds = t2 - t0
    n_docs = int(first.doc_len.size)
    return BuildReport(
        out=folder,
        passages=n_docs,
        vocab=first.vocab,
        postings=n_terms,
        skipped_rows=first.stats.skipped,
        first_error=first.stats.first_error,
        seconds=seconds,
        passages_per_s=n_docs / seconds if seconds > 0 else 0.0,
        timings={"read_tokenise_s": round(t1 - t0, 3), "score_matrix_s": round(t2 - t1, 3)},
    )


@dataclass
class FirstPass:
    """What pass 1 leaves besides its files: per-passage arrays, vocabulary size, reader stats."""

    doc_len: np.ndarray  # int32 tokens per passage (after stop words)
    doc_terms: np.ndarray  # int32 distinct terms per passage = postings per passage
    vocab: int  # terms, the empty query column included
    stats: ReadStats


def read_postings(
    folder: Path,
    reader: RowSource,
    *,
    analyzer: dict[str, Any],
    show_progress: bool,
    chunk_docs: int = 20_000,
    pool: multiprocessing.pool.Pool | None = None,
    workers: int = 0,
    total: int | None = None,
) -> FirstPass:
    """Pass 1: the passage store, the temporary postings files and the vocabulary
    (``vocab.index.json`` and its hashed lookup) of ``reader``'s rows, in ``folder``.

    ``pool`` (from :func:`~indexes.stem_pool.start_pool`, ``workers`` processes) stems in
    worker processes; the caller owns it, so one pool serves several shards."""
    from bm25s.utils import json_functions

    analyze = Analyzer(analyzer, grow=True)
    doc_len = array("i")  # tokens per passage (after stop words)
    doc_terms = array("i")  # distinct terms per passage = postings per passage
    pending: deque[AsyncResult[list[str]]] = deque()

    with (
        PassageStoreWriter(folder) as store,
        (folder / TID_FILE).open("wb") as tid_out,
        (folder / TF_FILE).open("wb") as tf_out,
        tqdm(
            total=total if total is not None else getattr(reader, "limit", None),
            unit="psg",
            unit_scale=True,
            desc="index: read+tokenise",
            disable=not show_progress,
        ) as bar,
    ):

        def add_postings(ids: list[list[int]]) -> None:
            lens, nterms, tids, tfs = _chunk_postings(ids)
            tid_out.write(tids.tobytes())
            tf_out.write(tfs.tobytes())
            doc_len.extend(lens.tolist())
            doc_terms.extend(nterms.tolist())
            bar.update(len(ids))

        for batch in _batches(reader, store, chunk_docs):
            if pool is None:
                add_postings(analyze.ids(batch))
                continue
            # Worker processes stem; this process keeps reading, assigns term ids
            # in corpus order (so the vocabulary equals a sequential build's) and
            # writes postings. At most 2 chunks per worker are in flight.
            pending.append(pool.apply_async(stems_in_worker, (batch,)))
            while len(pending) > 2 * max(1, workers):
                add_postings(analyze.ids_from_stems(pending.popleft().get()))
        while pending:
            add_postings(analyze.ids_from_stems(pending.popleft().get()))

    stats = reader.stats  # the reader has logged its summary of skipped rows
    if len(doc_len) == 0:
        raise UserError(f"no passages to index in {reader.path} ({stats.summary()})")
    vocab = analyze.vocab
    vocab[""] = len(vocab)  # column without postings: the query with no known term
    with (folder / "vocab.index.json").open("w", encoding="utf-8") as f:
        f.write(json_functions.dumps(vocab, ensure_ascii=False))
    if not write_hashed_vocab(folder, vocab):
        log.warning("two terms share a 64-bit hash; the index will load its JSON vocabulary")
    return FirstPass(
        doc_len=np.frombuffer(doc_len, dtype=np.int32),
        doc_terms=np.frombuffer(doc_terms, dtype=np.int32),
        vocab=len(vocab),
        stats=stats,
    )


def score_postings(
    folder: Path,
    doc_len: np.ndarray,
    doc_terms: np.ndarray,
    *,
    params: dict[str, Any],
    show_progress: bool,
    collection: CollectionStats | None = None,
) -> int:
    """Pass 2: the score matrix and ``params.index.json`` from pass 1's files in ``folder``
    (the temporary postings are removed). ``collection`` scores with the statistics of a
    whole sharded collection instead of this folder's own (:mod:`indexes.sharded`)."""
    import bm25s

    n_cols = _vocab_size(folder)
    n_terms = write_csc(
        folder,
        doc_len,
        doc_terms,
        n_cols=n_cols,
        params=params,
        show_progress=show_progress,
        collection=collection,
    )
    bm25_params = {
        "k1": params["k1"],
        "b": params["b"],
        "delta": params["delta"],
        "method": params["method"],
        "idf_method": params["method"],
        "dtype": "float32",
        "int_dtype": "int32",
        "num_docs": int(doc_len.size),
        "version": bm25s.__version__,
        "backend": "numpy",
    }
    (folder / "params.index.json").write_text(json.dumps(bm25_params, indent=2))
    for name in (TID_FILE, TF_FILE):
        (folder / name).unlink()
    return n_terms


def _vocab_size(folder: Path) -> int:
    """Columns of the score matrix: the terms of pass 1's vocabulary (hashed or JSON)."""
    if has_hashed_vocab(folder):
        return len(HashedVocab(folder))
    from bm25s.utils import json_functions

    with (folder / "vocab.index.json").open("r", encoding="utf-8") as f:
        return len(json_functions.loads(f.read()))


def _batches(reader: RowSource, store: PassageStoreWriter, size: int) -> Iterator[list[str]]:
    """Store each good row and yield the texts to index (title and text) in chunks."""
    batch: list[str] = []
    for row in reader:
        store.add(row.id, row.title, row.text)
        batch.append(f"{row.title}\n{row.text}" if row.title else row.text)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _chunk_postings(
    ids: list[list[int]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-document lengths and distinct-term counts, and the chunk's postings
    (term id, clipped tf) in document order, from token-id lists."""
    lens = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(lens.sum()))
    docs = np.repeat(np.arange(len(ids), dtype=np.int64), lens)
    keys, tf = np.unique((docs << 32) | flat, return_counts=True)
    nterms = np.bincount(keys >> 32, minlength=len(ids))
    tids = (keys & 0xFFFFFFFF).astype(np.int32)
    return lens, nterms, tids, np.minimum(tf, _MAX_TF).astype(np.uint16)


def _check_params(params: dict[str, Any]) -> None:
    if params["method"] not in ("lucene", "robertson", "atire", "bm25l", "bm25+"):
        raise UserError(
            f"unknown BM25 method {params['method']!r} (lucene, robertson, atire, bm25l, bm25+)"
        )
    if params["k1"] < 0:
        raise UserError(f"k1 must be >= 0, got {params['k1']}")
    if not 0.0 <= params["b"] <= 1.0:
        raise UserError(f"b must be between 0 and 1, got {params['b']}")


def _check_out_folder(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UserError(f"index output {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / mf.MANIFEST_FILE).exists():
        raise UserError(
            f"{out} exists, is not empty and holds no typed-rag index; choose another --out"
        )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {out.parent}: {exc}") from exc


def _replace_folder(new: Path, out: Path) -> None:
    """Swap the finished build in; the old index is removed only after the swap."""
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    if out.exists():
        os.replace(out, old)
    os.replace(new, out)
    shutil.rmtree(old, ignore_errors=True)
