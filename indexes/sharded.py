"""A sharded BM25 index: the corpus cut into shards of ``shard_size`` passages, each a
complete index folder of :mod:`indexes.build`, scored with the whole collection's
statistics, so that merging the shards' top-k gives exactly an unsharded index's top-k.

Why shards: one index build holds the whole vocabulary, two int32 arrays per passage and
(in pass 2) a score matrix written in scattered order, which runs at disk speed once the
matrix outgrows the page cache (~10 GB for the 21M DPR passages). A shard bounds all of
that by ``shard_size``: its vocabulary, its arrays and its matrix (1M passages: ~60M
postings, ~0.5 GB) fit in memory whatever the corpus size, and each shard is a unit of
work that a killed build does not redo.

The build, in ``<out>.building/`` beside the final folder (stable name, so a rerun finds it):

1. **Pass 1 per shard** (the project's pass 1, :func:`indexes.build.read_postings`):
   rows ``[i * shard_size, (i + 1) * shard_size)`` of the corpus go to ``shard-<i>/``:
   passage store, temporary postings, vocabulary; then the shard's per-passage arrays
   and its document frequencies are saved and ``pass1.json`` marks it done. A rerun
   reads past the rows of finished shards without analysing them and continues with the
   first unfinished one (a half-written shard is started again).
2. **Collection statistics**: the shards' (term hash, df) pairs are summed into one
   sorted table (``collection.npz``, 16 bytes per distinct term), with the passage count
   and the mean passage length. No global vocabulary dict is ever built.
3. **Pass 2 per shard** (:func:`indexes.build.score_postings`): the shard's score matrix
   with the collection's IDF and mean length; its ``manifest.json`` marks it done.
4. The top ``manifest.json`` (``"kind": "sharded"``, the shards and their offsets) is
   written and the folder swapped into place, as an unsharded build does.

A rerun with other inputs (corpus, parameters, shard size, limit) starts over; one with
the same inputs resumes. ``<out>.building/lock`` keeps two builds from running at once.
:class:`typed_rag.retrieval.sharded.ShardedBM25Index` searches the result.

Terms are matched across shards by their 64-bit blake2b hash (the hashed vocabulary of
:mod:`typed_rag.retrieval.vocab`); two different terms would have to share a hash for
their document frequencies to be summed together (about V^2 / 2^65: 1e-6 for 6M terms).
"""

from __future__ import annotations

import fcntl
import itertools
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import typed_rag.retrieval.manifest as mf
from indexes.build import (
    BaseBuildReport,
    _check_out_folder,
    _replace_folder,
    build_inputs,
    read_postings,
    score_postings,
    stemming_pool,
)
from indexes.corpus import CorpusReader, CorpusRow, OnError, ReadStats
from indexes.score_matrix import CollectionStats, document_frequencies
from indexes.stem_pool import default_workers
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.retrieval.analyzer import DEFAULT_ANALYZER
from typed_rag.retrieval.sharded import SHARD_PREFIX, SHARDED_KIND
from typed_rag.retrieval.vocab import HASHES_FILE, IDS_FILE, has_hashed_vocab

log = logging.getLogger(__name__)

PLAN_FILE = "plan.json"
PASS1_FILE = "pass1.json"  # in a shard folder: pass 1 finished
READ_FILE = "read.json"  # the whole corpus was read: shard count and reader stats
COLLECTION_FILE = "collection.npz"
LOCK_FILE = "lock"
DOC_LEN_FILE = "_doc_len.npy"
DOC_TERMS_FILE = "_doc_terms.npy"
DF_FILE = "_df.npy"
DEFAULT_SHARD_SIZE = 1_000_000


@dataclass
class ShardedBuildReport(BaseBuildReport):
    """What ``build_sharded`` did; ``resumed_shards`` counts shards a rerun found done."""

    shards: int = 0
    shard_size: int = 0
    resumed_shards: int = 0
    earlier_s: float = 0.0  # pass 1 seconds of the resumed shards, spent by earlier runs
    vocab_terms: int = 0  # distinct terms of the collection (by hash)


def shard_name(i: int) -> str:
    return f"{SHARD_PREFIX}{i:05d}"


def building_folder(out: Path) -> Path:
    """Where a sharded build of ``out`` keeps its work until it is complete."""
    return out.parent / f"{out.name}.building"


def build_sharded(
    settings: Settings,
    corpus: str | Path | None = None,
    out: str | Path | None = None,
    *,
    shard_size: int = DEFAULT_SHARD_SIZE,
    on_error: OnError | None = None,
    limit: int | None = None,
    k1: float | None = None,
    b: float | None = None,
    method: str | None = None,
    if_missing: bool = False,
    show_progress: bool = True,
    chunk_docs: int = 20_000,
    workers: int | None = None,
    on_shard: Callable[[str, int], None] | None = None,
) -> ShardedBuildReport:
    """Build (or resume, or with ``if_missing`` keep) a sharded BM25 index; see the module doc.

    ``on_shard(phase, i)`` is called after shard ``i`` finishes ``"pass1"`` or ``"pass2"``
    (progress hooks; tests interrupt a build there).
    """
    if shard_size <= 0:
        raise UserError(f"--shard-size must be a positive number, got {shard_size}")
    params, out, corpus_path, fingerprint = build_inputs(
        settings, corpus, out, k1=k1, b=b, method=method, show_progress=show_progress
    )
    plan = {
        "format_version": mf.FORMAT_VERSION,
        "kind": SHARDED_KIND,
        "corpus": fingerprint,
        "params": params,
        "analyzer": dict(DEFAULT_ANALYZER),
        "shard_size": int(shard_size),
        "limit": limit,
        "on_error": on_error or "skip",
    }
    if if_missing:
        old = mf.read_manifest(out)
        if old is not None and old.get("plan") == plan:
            return ShardedBuildReport(out=out, skipped=True, reason="index is up to date")
    _check_out_folder(out)
    work = building_folder(out)
    work.mkdir(parents=True, exist_ok=True)
    with _locked(work):
        old_plan = _read_json(work / PLAN_FILE)
        if old_plan != plan:
            if old_plan is not None:
                log.info("sharded build in %s was for other inputs; starting over", work)
            for child in work.iterdir():
                if child.name != LOCK_FILE:
                    _remove(child)
            _write_json(work / PLAN_FILE, plan)
        report = _build(
            work,
            corpus_path,
            plan,
            show_progress=show_progress,
            chunk_docs=chunk_docs,
            workers=default_workers() if workers is None else workers,
            on_shard=on_shard,
        )
        report.out = out
        (work / LOCK_FILE).unlink(missing_ok=True)
    _replace_folder(work, out)
    return report


def _build(
    work: Path,
    corpus_path: Path,
    plan: dict[str, Any],
    *,
    show_progress: bool,
    chunk_docs: int,
    workers: int,
    on_shard: Callable[[str, int], None] | None,
) -> ShardedBuildReport:
    t0 = time.perf_counter()
    resumed = _finished_pass1(work)
    read = _read_json(work / READ_FILE)
    if read is None:
        stats = _first_passes(
            work, corpus_path, plan, resumed, show_progress, chunk_docs, workers, on_shard
        )
        _write_json(
            work / READ_FILE,
            {"skipped": stats.skipped, "first_error": stats.first_error},
        )
    else:
        stats = ReadStats(skipped=int(read["skipped"]), first_error=read["first_error"])
    n_shards = _finished_pass1(work)
    if n_shards == 0:
        raise UserError(f"no passages to index in {corpus_path} ({stats.summary()})")
    t1 = time.perf_counter()
    hashes, df, n_docs, total_len = _collection(work, n_shards)
    avg_len = float(total_len) / n_docs  # == doc_len.mean() of the whole collection
    t2 = time.perf_counter()
    shards = []
    offset = 0
    postings = 0
    for i in range(n_shards):
        folder = work / shard_name(i)
        info = _shard_info(work, i)
        if mf.read_manifest(folder) is None:
            _score_shard(folder, plan, hashes, df, n_docs, avg_len, show_progress, info)
            if on_shard is not None:
                on_shard("pass2", i)
        shards.append({"folder": folder.name, "offset": offset, "passages": info["passages"]})
        offset += info["passages"]
        postings += info["postings"]
    _remove(work / COLLECTION_FILE)
    t3 = time.perf_counter()
    seconds = t3 - t0
    report = ShardedBuildReport(
        out=work,
        passages=n_docs,
        shards=n_shards,
        shard_size=int(plan["shard_size"]),
        resumed_shards=resumed,
        earlier_s=round(sum(_shard_info(work, i).get("seconds", 0.0) for i in range(resumed)), 3),
        postings=postings,
        vocab_terms=int(hashes.size),
        skipped_rows=stats.skipped,
        first_error=stats.first_error,
        seconds=seconds,
        passages_per_s=(n_docs - sum(s["passages"] for s in shards[:resumed])) / seconds
        if seconds > 0
        else 0.0,
        timings={
            "pass1_s": round(t1 - t0, 3),
            "collection_s": round(t2 - t1, 3),
            "pass2_s": round(t3 - t2, 3),
        },
    )
    mf.write_manifest(
        work,
        {
            "format_version": mf.FORMAT_VERSION,
            "kind": SHARDED_KIND,
            "plan": plan,
            "corpus": plan["corpus"],
            "limit": plan["limit"],
            "params": plan["params"],
            "analyzer": plan["analyzer"],
            "shards": shards,
            "counts": {
                "passages": n_docs,
                "shards": n_shards,
                "postings": postings,
                "vocab": int(hashes.size),
                "skipped_rows": stats.skipped,
            },
            "collection": {"passages": n_docs, "avg_len": avg_len},
            "first_error": stats.first_error,
            "build": {
                "seconds": round(seconds, 3),
                "resumed_shards": resumed,
                "timings": report.timings,
                "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            },
        },
    )
    (work / PLAN_FILE).unlink(missing_ok=True)
    return report


def _first_passes(
    work: Path,
    corpus_path: Path,
    plan: dict[str, Any],
    done: int,
    show_progress: bool,
    chunk_docs: int,
    workers: int,
    on_shard: Callable[[str, int], None] | None,
) -> ReadStats:
    """Pass 1 of every shard after the first ``done`` (whose rows are read past, not
    analysed); returns the reader's statistics of the whole corpus."""
    size = int(plan["shard_size"])
    reader = CorpusReader(corpus_path, plan["on_error"], limit=plan["limit"])
    rows = iter(reader)
    skipped = sum(_shard_info(work, i)["passages"] for i in range(done))
    if skipped:
        log.info("resuming: %d shards (%d passages) done; reading past them", done, skipped)
        for _ in itertools.islice(rows, skipped):
            pass
    with stemming_pool(workers, plan["analyzer"]) as pool:
        i = done
        while True:
            first = next(rows, None)
            if first is None:
                break
            folder = work / shard_name(i)
            _remove(folder)
            folder.mkdir()
            t_shard = time.perf_counter()
            source = _ShardRows(itertools.chain([first], itertools.islice(rows, size - 1)), reader)
            passes = read_postings(
                folder,
                source,
                analyzer=plan["analyzer"],
                show_progress=show_progress,
                chunk_docs=chunk_docs,
                pool=pool,
                workers=workers,
                total=size,
            )
            n_cols = passes.vocab
            np.save(folder / DOC_LEN_FILE, passes.doc_len)
            np.save(folder / DOC_TERMS_FILE, passes.doc_terms)
            np.save(folder / DF_FILE, document_frequencies(folder, n_cols))
            if not has_hashed_vocab(folder):
                raise UserError(
                    f"two terms of shard {i} share a 64-bit hash; a sharded index cannot "
                    f"match its terms across shards (build it unsharded)"
                )
            _write_json(
                folder / PASS1_FILE,
                {
                    "passages": int(passes.doc_len.size),
                    "tokens": int(passes.doc_len.sum(dtype=np.int64)),
                    "vocab": n_cols,
                    "postings": int(passes.doc_terms.sum(dtype=np.int64)),
                    "seconds": round(time.perf_counter() - t_shard, 3),
                },
            )
            if on_shard is not None:
                on_shard("pass1", i)
            i += 1
    return reader.stats


class _ShardRows:
    """The rows of one shard, as a :class:`indexes.build.RowSource`."""

    def __init__(self, rows: Iterator[CorpusRow], reader: CorpusReader) -> None:
        self._rows = rows
        self.path = reader.path
        self._reader = reader

    @property
    def stats(self) -> ReadStats:
        return self._reader.stats

    def __iter__(self) -> Iterator[CorpusRow]:
        return self._rows


def _finished_pass1(work: Path) -> int:
    """Shards 0..n-1 whose pass 1 is finished (the first gap ends the count)."""
    n = 0
    while (work / shard_name(n) / PASS1_FILE).is_file():
        n += 1
    return n


def _shard_info(work: Path, i: int) -> dict[str, Any]:
    info = _read_json(work / shard_name(i) / PASS1_FILE)
    assert info is not None
    return info


def _collection(work: Path, n_shards: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Sorted term hashes of the whole collection and their document frequencies, its
    passage count and total length (cached in ``collection.npz`` for a resumed pass 2)."""
    cached = work / COLLECTION_FILE
    if cached.is_file():
        with np.load(cached) as z:
            if int(z["shards"]) == n_shards:
                return z["hashes"], z["df"], int(z["n_docs"]), int(z["total_len"])
    hashes_parts, df_parts = [], []
    n_docs = total_len = 0
    for i in range(n_shards):
        folder = work / shard_name(i)
        term_hashes = _hash_per_term(folder)
        df = np.load(folder / DF_FILE)
        hashes_parts.append(term_hashes)
        df_parts.append(df)
        info = _shard_info(work, i)
        n_docs += info["passages"]
        total_len += info["tokens"]
    all_hashes = np.concatenate(hashes_parts)
    all_df = np.concatenate(df_parts)
    hashes, inverse = np.unique(all_hashes, return_inverse=True)
    df = np.zeros(hashes.size, dtype=np.int64)
    np.add.at(df, inverse, all_df)
    tmp = work / (COLLECTION_FILE + ".tmp.npz")
    np.savez(tmp, hashes=hashes, df=df, n_docs=n_docs, total_len=total_len, shards=n_shards)
    os.replace(tmp, cached)
    return hashes, df, n_docs, total_len


def _hash_per_term(folder: Path) -> np.ndarray:
    """The 64-bit hash of each term id of a shard (index = term id)."""
    hashes = np.load(folder / HASHES_FILE)
    ids = np.load(folder / IDS_FILE)
    per_term = np.zeros(ids.size, dtype=np.uint64)
    per_term[ids] = hashes
    return per_term


def _score_shard(
    folder: Path,
    plan: dict[str, Any],
    hashes: np.ndarray,
    df: np.ndarray,
    n_docs: int,
    avg_len: float,
    show_progress: bool,
    info: dict[str, int],
) -> None:
    import bm25s

    doc_len = np.load(folder / DOC_LEN_FILE)
    doc_terms = np.load(folder / DOC_TERMS_FILE)
    own = _hash_per_term(folder)
    pos = np.searchsorted(hashes, own)
    collection = CollectionStats(n_docs=n_docs, avg_len=avg_len, df=df[pos])
    t0 = time.perf_counter()
    postings = score_postings(
        folder,
        doc_len,
        doc_terms,
        params=plan["params"],
        show_progress=show_progress,
        collection=collection,
    )
    for name in (DOC_LEN_FILE, DOC_TERMS_FILE, DF_FILE):
        (folder / name).unlink()
    manifest = {
        "format_version": mf.FORMAT_VERSION,
        "params": plan["params"],
        "analyzer": plan["analyzer"],
        "counts": {"passages": info["passages"], "vocab": info["vocab"], "postings": postings},
        "shard": {"collection_passages": n_docs, "collection_avg_len": avg_len},
        "build": {
            "score_matrix_s": round(time.perf_counter() - t0, 3),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "bm25s_version": bm25s.__version__,
        },
    }
    mf.write_manifest(folder, manifest)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


class _locked:
    """An exclusive lock on ``<work>/lock`` (a second build fails at once, naming the folder)."""

    def __init__(self, work: Path) -> None:
        self.path = work / LOCK_FILE

    def __enter__(self) -> None:
        self._f = self.path.open("a")
        try:
            fcntl.flock(self._f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            self._f.close()
            raise UserError(f"another build is running in {self.path.parent}") from exc

    def __exit__(self, *exc: object) -> None:
        self._f.close()
