"""Reading new and changed files: bytes, hash, parse and chunk, in worker processes.

Parsing is most of a build's time (pypdf is pure Python), so files are read by a pool
of forked processes, one per core (at most 8), and come back in the order they were given:
the collection's passage order does not depend on which worker was quicker. Without fork
(or while other threads run: a server) they are read in this process.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tqdm._monitor import TMonitor

from indexes.documents.chunk import Chunk, chunk_document
from indexes.documents.document import SkipFile
from indexes.documents.parse import parse_document


@dataclass
class FileRead:
    """What reading one file gave: its passages, or why it has none."""

    path: str
    sha256: str | None = None
    same: bool = False  # the bytes hash as before: keep the old passages
    title: str = ""
    pages: int | None = None
    chunks: list[Chunk] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skip: str | None = None
    seconds: float = 0.0


def read_file(task: tuple[str, str | None]) -> FileRead:
    """Read, hash and (unless its hash is ``old_sha``) parse and chunk one file."""
    path, old_sha = task
    t0 = time.perf_counter()
    out = FileRead(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        out.skip = f"cannot read: {exc.strerror or exc}"
        return out
    out.sha256 = hashlib.sha256(data).hexdigest()
    if out.sha256 == old_sha:
        out.same = True
    else:
        try:
            doc = parse_document(Path(path), data)
            out.chunks = chunk_document(doc)
            out.title, out.pages, out.warnings = doc.title, doc.pages, doc.warnings
            if not out.chunks:
                out.skip = "no text to index"
        except SkipFile as exc:
            out.skip = str(exc)
    out.seconds = time.perf_counter() - t0
    return out


def _can_fork() -> bool:
    others = [
        t
        for t in threading.enumerate()
        if t is not threading.current_thread() and not isinstance(t, TMonitor)
    ]
    return not others and "fork" in multiprocessing.get_all_start_methods()


def read_files(tasks: Sequence[tuple[str, str | None]], workers: int) -> Iterator[FileRead]:
    """:func:`read_file` of each ``(path, old sha256)``, in order."""
    if workers <= 1 or len(tasks) < 2 or not _can_fork():
        yield from map(read_file, tasks)
        return
    with multiprocessing.get_context("fork").Pool(min(workers, len(tasks))) as pool:
        yield from pool.imap(read_file, tasks, chunksize=1)
