"""Build or update a document collection: read, chunk and index a user's files.

``build_collection(settings, name, paths)`` finds the files under ``paths``
(:mod:`~indexes.documents.discover`), compares them with the collection's manifest
(:mod:`~indexes.documents.manifest`) and writes a new version of the collection: a file
whose size and modification time are unchanged is not opened, one whose bytes hash as
before is not parsed; their passages are copied from the previous passage store. New and
changed files are parsed (:mod:`~indexes.documents.parse`) and chunked
(:mod:`~indexes.documents.chunk`) by worker processes (:mod:`~indexes.documents.reading`);
files no longer found are left out. The BM25 index is then built over all passages by the
same builder as the Wikipedia index (:func:`indexes.build.build_into`), and a dense
index for each encoder search uses when ``--dense`` or ``retrieval.kind`` asks for them
(under ``auto``: each the collection already had).

The new version is written to ``.NAME.<time>`` beside the collection and ``NAME`` (a
symbolic link) is switched to it in one rename, so readers see the old collection or the
new one, never a half-built one, and a crash leaves the previous collection as it was.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

import typed_rag.retrieval.manifest as mf
from indexes.build import bm25_params, build_into, default_workers, index_manifest
from indexes.corpus import CorpusRow, ReadStats
from indexes.documents.chunk import MAX_WORDS, MIN_WORDS
from indexes.documents.discover import Found, discover
from indexes.documents.manifest import (
    COLLECTION_VERSION,
    CollectionState,
    FileRecord,
    SkippedRecord,
    read_state,
)
from indexes.documents.parse import SUPPORTED
from indexes.documents.progress import BuildStatus
from indexes.documents.reading import FileRead, read_files
from indexes.documents.versions import build_lock, remove_leftovers, switch_to
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.retrieval.analyzer import DEFAULT_ANALYZER
from typed_rag.retrieval.collections import COLLECTION_KEY, WIKI, check_name, collection_dir
from typed_rag.retrieval.dense import dense_folder
from typed_rag.retrieval.loader import dense_models
from typed_rag.retrieval.passage_meta import PassageMeta, PassageMetaWriter
from typed_rag.retrieval.store import PassageStore


@dataclass
class DocumentsReport:
    """What a build did; printed by ``index build --docs`` and kept in the manifest."""

    name: str
    folder: Path
    files: int = 0  # files in the collection now
    pages: int = 0  # PDF pages in the collection now
    passages: int = 0
    added: int = 0
    changed: int = 0
    kept: int = 0  # unchanged files whose passages were copied, not read
    removed: int = 0
    read: int = 0  # files parsed by this build
    read_pages: int = 0  # PDF pages parsed by this build
    up_to_date: bool = False  # nothing changed: the collection was left as it was
    skipped: list[SkippedRecord] = field(default_factory=list)
    unsupported: dict[str, int] = field(default_factory=dict)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    parse_s: float = 0.0
    index_s: float = 0.0
    dense_s: float = 0.0
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        """The numbers of this build (the manifest's ``last_build``)."""
        keys = ("added", "changed", "kept", "removed", "read", "read_pages")
        out: dict[str, Any] = {k: getattr(self, k) for k in keys}
        for k in ("parse_s", "index_s", "dense_s", "seconds"):
            out[k] = round(getattr(self, k), 3)
        return out


def passage_title(doc_title: str, section: str | None) -> str:
    """The title the model sees: "document title — section" (just the title outside sections)."""
    if section and section.strip().lower() != doc_title.strip().lower():
        return f"{doc_title} — {section}" if doc_title else section
    return doc_title


class _Rows:
    """The passages of the new version, in file order: copied or freshly read.

    The BM25 builder stores every row it is given, so the metadata written here lines up
    with the passage store by document number. ``produce_s`` is the wall time spent here
    (reading, parsing, copying), so the build's remaining time is the index's.
    """

    def __init__(
        self,
        files: list[Found],
        old: CollectionState,
        old_store: PassageStore | None,
        meta: PassageMetaWriter,
        report: DocumentsReport,
        show_progress: bool,
        workers: int,
        status: BuildStatus,
    ) -> None:
        self.path = report.folder
        self.status = status
        self.stats = ReadStats()
        self.files = files
        self.old = old
        self.old_store = old_store
        self.meta = meta
        self.report = report
        self.show_progress = show_progress
        self.workers = workers
        self.state = CollectionState(chunking={"min_words": MIN_WORDS, "max_words": MAX_WORDS})
        self.produce_s = 0.0

    def _plan(self, found: Found) -> str:
        """``copy`` (size and time unchanged), ``skipped`` (the same bad file) or ``read``."""
        same = (found.size, found.mtime_ns)
        before = self.old.files.get(found.path)
        if before is not None and (before.size, before.mtime_ns) == same:
            return "copy"
        skipped = self.old.skipped.get(found.path)
        if skipped is not None and (skipped.size, skipped.mtime_ns) == same:
            return "skipped"
        return "read"

    def __iter__(self) -> Iterator[CorpusRow]:
        t0 = time.perf_counter()
        plans = [self._plan(f) for f in self.files]
        tasks = [
            (f.path, getattr(self.old.files.get(f.path), "sha256", None))
            for f, plan in zip(self.files, plans, strict=True)
            if plan == "read"
        ]
        reads = read_files(tasks, self.workers)
        bar = tqdm(
            total=len(self.files), unit="file", desc="documents", disable=not self.show_progress
        )
        with bar:
            for found, plan in zip(self.files, plans, strict=True):
                self.status.reading(found.path)
                if plan == "copy":
                    rows = self._copy(found, self.old.files[found.path])
                elif plan == "skipped":
                    self.state.skipped[found.path] = self.old.skipped[found.path]
                    rows = iter(())
                else:
                    rows = self._read(found, next(reads))
                for row in rows:
                    self.produce_s += time.perf_counter() - t0
                    yield row
                    t0 = time.perf_counter()
                self._outcome(found.path)
                bar.update()
        self.status.set_phase("indexing")
        self.produce_s += time.perf_counter() - t0

    def _outcome(self, path: str) -> None:
        """Tell the status file how ``path`` ended: its passages, or why it was skipped."""
        record = self.state.files.get(path)
        if record is not None:
            before = self.old.files.get(path)
            unchanged = before is not None and before.sha256 == record.sha256
            self.status.done(
                path, passages=record.passages, pages=record.pages, unchanged=unchanged
            )
        else:
            skipped = self.state.skipped.get(path)
            self.status.done(path, reason=skipped.reason if skipped else "no passages")

    def _read(self, found: Found, got: FileRead) -> Iterator[CorpusRow]:
        path, before = found.path, self.old.files.get(found.path)
        self.report.parse_s += got.seconds
        if got.same and before is not None:
            yield from self._copy(found, before)
            return
        if got.skip is not None:
            self.state.skipped[path] = SkippedRecord(path, got.skip, found.size, found.mtime_ns)
            return
        assert got.sha256 is not None
        self.report.read += 1
        self.report.read_pages += got.pages or 0
        if before is None:
            self.report.added += 1
        else:
            self.report.changed += 1
        first = self.meta.count
        for i, chunk in enumerate(got.chunks, 1):
            span = (chunk.start, chunk.end)
            self.meta.add(PassageMeta(path, got.title, chunk.section, chunk.page, span))
            yield CorpusRow(f"{path}#{i}", passage_title(got.title, chunk.section), chunk.text, 0)
        self.report.warnings.extend((path, w) for w in got.warnings)
        self.state.files[path] = FileRecord(
            got.sha256, found.size, found.mtime_ns, got.title, first, len(got.chunks),
            got.pages, got.warnings,
        )  # fmt: skip

    def _copy(self, found: Found, before: FileRecord) -> Iterator[CorpusRow]:
        """An unchanged file's passages, from the previous store."""
        assert self.old_store is not None and self.old_store.meta is not None
        first = self.meta.count
        for doc in range(before.first, before.first + before.passages):
            pid, title, text = self.old_store.get(doc)
            self.meta.add(self.old_store.meta.get(doc))
            yield CorpusRow(pid, title, text, 0)
        self.report.kept += 1
        self.state.files[found.path] = FileRecord(
            before.sha256, found.size, found.mtime_ns, before.title, first,
            before.passages, before.pages, before.warnings,
        )  # fmt: skip


def _open_previous(folder: Path) -> tuple[CollectionState, PassageStore | None]:
    """The previous version's state and store; an empty state when there is none usable."""
    state = read_state(folder)
    chunking = {"min_words": MIN_WORDS, "max_words": MAX_WORDS}
    if state is None or state.version != COLLECTION_VERSION or state.chunking != chunking:
        return CollectionState(), None  # new, or built by another parser: read everything
    try:
        store = PassageStore(folder)
    except (UserError, OSError):
        return CollectionState(), None
    if store.meta is None:
        store.close()
        return CollectionState(), None
    return state, store


def _unchanged(files: list[Found], old: CollectionState, skipped: list[SkippedRecord]) -> bool:
    """The same files (by size and time) and the same skips as the last build."""
    if {f.path for f in files} != set(old.files) | {
        p for p, r in old.skipped.items() if r.size is not None
    }:
        return False
    for f in files:
        rec = old.files.get(f.path) or old.skipped.get(f.path)
        if rec is None or (rec.size, rec.mtime_ns) != (f.size, f.mtime_ns):
            return False
    found_skips = {(s.path, s.reason) for s in skipped}
    return found_skips == {(r.path, r.reason) for r in old.skipped.values() if r.size is None}


def build_collection(
    settings: Settings,
    name: str,
    paths: Sequence[str | Path] | None = None,
    *,
    dense: bool | None = None,
    show_progress: bool = True,
    workers: int | None = None,
    status: BuildStatus | None = None,
) -> DocumentsReport:
    """Build collection ``name`` from ``paths`` (default: the paths it was built from);
    ``status`` follows its progress file by file (``index build --status-file``)."""
    status = status or BuildStatus()
    if name == WIKI:
        raise UserError(
            f"{WIKI!r} is the Wikipedia collection (built by `typed-rag index build`); "
            "give your documents another --name"
        )
    check_name(name)
    t0 = time.perf_counter()
    folder = collection_dir(settings, name)
    with build_lock(folder):
        remove_leftovers(folder)
        old, old_store = _open_previous(folder)
        try:
            if paths is None:
                if not old.roots:
                    raise UserError(
                        f"collection {name!r} does not exist; give its files: --docs PATH"
                    )
                paths = old.roots
            roots = [os.path.abspath(os.path.expanduser(str(p))) for p in paths]
            max_bytes = int(settings.documents.max_file_mb * 1_000_000)
            found = discover(roots, SUPPORTED, max_bytes)
            report = DocumentsReport(name=name, folder=folder, unsupported=dict(found.unsupported))
            report.skipped = [SkippedRecord(s.path, s.reason) for s in found.skipped]
            for s in found.skipped:
                status.skipped(s.path, s.reason)
            status.start(len(found.files))
            encoders = _dense_to_build(settings, folder, dense)
            same_params = (mf.read_manifest(folder) or {}).get("params") == bm25_params(settings)
            if (
                old_store is not None
                and same_params
                and all(_has_dense(folder, m) for m in encoders)
                and _unchanged(found.files, old, report.skipped)
            ):
                return _up_to_date(report, old, t0, status)
            report = _write_version(
                settings, folder, roots, found.files, old, old_store, report,
                encoders=encoders, show_progress=show_progress, workers=workers, status=status,
            )  # fmt: skip
        finally:
            if old_store is not None:
                old_store.close()
    report.seconds = time.perf_counter() - t0
    return report


def _has_dense(folder: Path, model: str) -> bool:
    return mf.read_manifest(dense_folder(folder, model)) is not None


def _dense_to_build(settings: Settings, folder: Path, dense: bool | None) -> list[str]:
    """The encoders whose dense index a new version of the collection gets: those search
    uses (``dense_model``, and for hybrid ``fuse_models``), all of them when asked
    (``dense``) or the kind needs them; under ``auto`` those the collection already has."""
    models = dense_models(settings)
    if dense is not None:
        return models if dense else []
    declared = settings.declared().retrieval
    return declared.dense_to_build(models, lambda m: _has_dense(folder, m))


def _up_to_date(
    report: DocumentsReport, old: CollectionState, t0: float, status: BuildStatus
) -> DocumentsReport:
    for path, record in old.files.items():
        status.done(path, passages=record.passages, pages=record.pages, unchanged=True)
    for path, skipped in old.skipped.items():
        if skipped.size is not None:  # read and skipped before; discovery's are reported
            status.done(path, reason=skipped.reason)
    report.up_to_date = True
    report.kept = report.files = len(old.files)
    report.passages = sum(r.passages for r in old.files.values())
    report.pages = sum(r.pages or 0 for r in old.files.values())
    report.skipped = list(old.skipped.values())
    report.seconds = time.perf_counter() - t0
    return report


def _write_version(
    settings: Settings,
    folder: Path,
    roots: list[str],
    files: list[Found],
    old: CollectionState,
    old_store: PassageStore | None,
    report: DocumentsReport,
    *,
    encoders: list[str],
    show_progress: bool,
    workers: int | None,
    status: BuildStatus,
) -> DocumentsReport:
    version = folder.parent / f".{folder.name}.{time.time_ns()}"
    version.mkdir(parents=True)
    try:
        params = bm25_params(settings)
        analyzer = dict(DEFAULT_ANALYZER)
        with PassageMetaWriter(version) as meta:
            readers = default_workers() if workers is None else workers
            rows = _Rows(files, old, old_store, meta, report, show_progress, readers, status)
            t0 = time.perf_counter()
            if not files:
                raise UserError(_nothing_to_index(report))
            try:  # stemming in this process: the worker processes read the files
                built = build_into(
                    version, rows, params=params, analyzer=analyzer, show_progress=False, workers=0
                )
            except UserError:
                if meta.count == 0:
                    report.skipped.extend(rows.state.skipped.values())
                    raise UserError(_nothing_to_index(report)) from None
                raise
        report.index_s = time.perf_counter() - t0 - rows.produce_s
        state = rows.state
        state.roots = roots
        state.skipped.update({s.path: s for s in report.skipped})
        report.skipped = list(state.skipped.values())
        report.removed = len(set(old.files) - set(state.files))
        report.files = len(state.files)
        report.passages = built.passages
        report.pages = sum(r.pages or 0 for r in state.files.values())
        extra = {
            "name": report.name,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "unsupported": report.unsupported,
            "last_build": report.summary(),
        }
        manifest = index_manifest(built, params, analyzer, **{COLLECTION_KEY: state.section(extra)})
        mf.write_manifest(version, manifest)
        if encoders:
            from indexes.dense import build_dense

            t1 = time.perf_counter()
            status.set_phase("dense")
            for model in encoders:
                encoder = settings.with_section("retrieval", dense_model=model)
                build_dense(encoder, version, show_progress=show_progress)
            report.dense_s = time.perf_counter() - t1
        switch_to(version, folder)
    except BaseException:
        shutil.rmtree(version, ignore_errors=True)
        raise
    return report


def _nothing_to_index(report: DocumentsReport) -> str:
    lines = [f"nothing to index in collection {report.name!r}: no file gave any text"]
    lines += [f"  skipped {s.path}: {s.reason}" for s in report.skipped[:20]]
    if report.unsupported:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(report.unsupported.items()))
        lines.append(f"  unsupported file types: {kinds}")
    return "\n".join(lines)
