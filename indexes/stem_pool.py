"""Stemming in forked worker processes for an index build.

Stemming is the slow part of analysing a passage; a build hands chunks of texts to a
pool of forked processes (each with its own :class:`~typed_rag.retrieval.analyzer.Analyzer`
of the same configuration) while it reads on, then assigns term ids in corpus order
itself, so the index is byte-identical to an in-process build.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.pool
import os
import threading
from typing import Any

from tqdm._monitor import TMonitor

from typed_rag.retrieval.analyzer import Analyzer

log = logging.getLogger(__name__)

_worker_analyzer: Analyzer | None = None


def _init_worker(config: dict[str, Any]) -> None:
    global _worker_analyzer
    _worker_analyzer = Analyzer(config)


def stems_in_worker(texts: list[str]) -> list[str]:
    """The stems of ``texts``, computed in a pool worker (its analyzer set up by the pool)."""
    assert _worker_analyzer is not None
    return _worker_analyzer.stems(texts)


def start_pool(workers: int, config: dict[str, Any]) -> multiprocessing.pool.Pool | None:
    """A fork-started pool, or None (build in-process) where fork is unsafe or missing.

    fork, not spawn: spawn re-imports the caller's main module, which breaks any script
    without an ``if __name__ == "__main__"`` guard. Forking is safe only while this
    process runs a single thread, so the pool is started before any progress bar.
    (A server that builds while serving gets an in-process build.)
    """
    # tqdm's monitor thread is harmless here: workers never touch tqdm or its lock.
    others = [
        t
        for t in threading.enumerate()
        if t is not threading.current_thread() and not isinstance(t, TMonitor)
    ]
    if others or "fork" not in multiprocessing.get_all_start_methods():
        log.debug("building in-process: threads are running or fork is unavailable")
        return None
    ctx = multiprocessing.get_context("fork")
    return ctx.Pool(workers, initializer=_init_worker, initargs=(config,))


def default_workers() -> int:
    """Stemming processes for a build: one per core, at most 8 (0 = in-process)."""
    return max(1, min(os.cpu_count() or 1, 8))
