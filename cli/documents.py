"""CLI: document collections (``index build --docs PATH... --name NAME``, ``index list``)."""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from indexes.documents import DocumentsReport, build_collection
from indexes.documents.progress import BuildStatus
from indexes.documents.versions import delete_collection
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.retrieval.collections import WIKI, check_name, collection_dir, list_collections

# index build options that only a Wikipedia (TSV corpus) build takes
_CORPUS_ONLY = (
    "corpus",
    "out",
    "on_error",
    "if_missing",
    "k1",
    "b",
    "method",
    "limit",
    "shard_size",
)


def add_index_commands(index_sub: argparse._SubParsersAction) -> None:
    """``index list``; ``--docs``/``--name`` are options of ``index build`` (cli.indexes)."""
    ls = index_sub.add_parser(
        "list",
        help="list the collections: the Wikipedia default and your document collections",
    )
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.set_defaults(func=_index_list)
    delete = index_sub.add_parser(
        "delete",
        help="delete a document collection's index (never the files it was built from)",
    )
    delete.add_argument("--name", required=True, help="the collection to delete")
    delete.set_defaults(func=_index_delete)


def add_build_options(build: argparse.ArgumentParser) -> None:
    build.add_argument(
        "--docs",
        nargs="+",
        metavar="PATH",
        help="build a collection of your own files instead: PDF, DOCX, HTML, Markdown and "
        "text files, and folders of them (read recursively); needs --name. Running it "
        "again updates the collection: new and changed files are read, unchanged ones "
        "kept, deleted ones removed",
    )
    build.add_argument(
        "--name",
        help="collection name (letters, digits, _ . -); with no --docs, update the "
        "collection from the paths it was built from",
    )
    build.add_argument(
        "--status-file",
        metavar="FILE",
        help="with --docs: keep FILE up to date with the build's progress as JSON (phase, "
        "files done of the total, passages, current file, each file's outcome, the error); "
        "the server's ingestion jobs read it",
    )
    build.add_argument(
        "--exit-with-parent",
        action="store_true",
        help="stop (leaving the previous collection) when the process that started this "
        "build is gone, e.g. a server that was killed",
    )


def wants_documents(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "docs", None) or getattr(args, "name", None))


def build_documents(args: argparse.Namespace, settings: Settings) -> int:
    if not args.name:
        raise UserError("--docs needs --name NAME: the collection to build")
    given = [f"--{k.replace('_', '-')}" for k in _CORPUS_ONLY if getattr(args, k, None)]
    if given:
        raise UserError(f"{', '.join(given)} apply to the Wikipedia index, not to --docs")
    if args.exit_with_parent:
        _exit_with_parent()
    status = BuildStatus(Path(args.status_file) if args.status_file else None)
    try:
        report = build_collection(
            settings,
            args.name,
            args.docs,
            dense=True if args.dense else None,
            show_progress=not args.quiet,
            status=status,
        )
    except BaseException as exc:
        reason = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        status.finish(error=reason or type(exc).__name__)
        raise
    status.finish()
    print("\n".join(report_lines(report)))
    return 0


def _exit_with_parent() -> None:
    """Die with the parent: on Linux the kernel's parent-death signal, elsewhere a thread
    that watches the parent's pid. A build killed so leaves its collection as it was."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        if libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0) == 0:
            if os.getppid() != parent:  # it died before the signal was armed
                os._exit(1)
            return
    except (OSError, AttributeError):
        pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _index_delete(args: argparse.Namespace, settings: Settings) -> int:
    if args.name == WIKI:
        raise UserError(f"{WIKI!r} is the Wikipedia index; it is not deleted from here")
    folder = collection_dir(settings, check_name(args.name))
    if not delete_collection(folder):
        print(f"collection {args.name} had no index; nothing to delete", file=sys.stderr)
        return 0
    print(f"deleted collection {args.name} ({folder})")
    return 0


def report_lines(report: DocumentsReport) -> list[str]:
    """The build report as printed: totals, then every skipped file with its reason."""
    what = f"collection {report.name}: {report.files} files, {report.passages:,} passages"
    if report.pages:
        what += f", {report.pages:,} PDF pages"
    if report.up_to_date:
        lines = [f"{what}; up to date, nothing read ({report.seconds:.1f} s) -> {report.folder}"]
    else:
        lines = [
            f"{what} in {report.seconds:.1f} s -> {report.folder}",
            f"  read {report.read} files ({report.added} new, {report.changed} changed), "
            f"kept {report.kept} unchanged, removed {report.removed}",
        ]
    if report.skipped:
        lines.append(f"skipped {len(report.skipped)} files:")
        lines += [f"  {s.path}: {s.reason}" for s in report.skipped]
    if report.warnings:
        lines.append("warnings:")
        lines += [f"  {path}: {warning}" for path, warning in report.warnings]
    if report.unsupported:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(report.unsupported.items()))
        lines.append(f"not read (unsupported types): {kinds}")
    return lines


def _index_list(args: argparse.Namespace, settings: Settings) -> int:
    infos = list_collections(settings)
    if args.json:
        print(json.dumps([c.to_dict() for c in infos], ensure_ascii=False, indent=2))
        return 0
    print(f"{'name':<20} {'kind':<10} {'passages':>9} {'files':>6} {'search':<7} folder")
    for c in infos:
        passages = f"{c.passages:,}" if c.passages is not None else "-"
        files = str(c.files) if c.files is not None else "-"
        state = "" if c.built else "  (not built)"
        print(f"{c.name:<20} {c.kind:<10} {passages:>9} {files:>6} {c.search:<7} {c.folder}{state}")
        for d in c.dense:
            done = "complete" if d["complete"] else f"{d['done']:,} of {d['passages']:,} encoded"
            print(f"{'':<20} dense index of {d['model']}: {done}")
    return 0
