"""``GET /v1/collections/NAME/files``: each document's state, from the index and the jobs.

A file the collection's index holds (same size and time as uploaded) is ``indexed`` with
its pages and passages; one the last build skipped is ``skipped`` with the reason; while a
job runs or waits the others are ``indexing`` or ``queued``; what is left is ``failed``,
with the reason its last job gives.
"""

from __future__ import annotations

import os
from typing import Any

from serving import uploads
from serving.jobs import TERMINAL, Job
from typed_rag.config import Settings
from typed_rag.retrieval.collections import COLLECTION_KEY, collection_dir, uploads_dir
from typed_rag.retrieval.manifest import read_manifest


def file_states(settings: Settings, name: str, jobs: list[Job]) -> list[dict[str, Any]]:
    """Each uploaded file (or, for a collection built on the server, each indexed file)
    with its state: what the index holds, else what its jobs say."""
    folder = uploads_dir(settings, name)
    section = (read_manifest(collection_dir(settings, name)) or {}).get(COLLECTION_KEY) or {}
    indexed: dict[str, dict[str, Any]] = section.get("files", {})
    skipped = {str(r.get("path")): r for r in section.get("skipped", [])}
    running = next((j for j in jobs if j.status == "running"), None)
    queued = any(j.status == "queued" for j in jobs)
    finished = [j for j in jobs if j.status in TERMINAL]
    if not folder.is_dir():  # built with `typed-rag index build`: shown, never changed here
        return [_server_file(path, rec, section) for path, rec in indexed.items()]
    out: list[dict[str, Any]] = []
    for f in uploads.stored_files(folder):
        path = os.path.abspath(folder / f.filename)
        rec, skip = indexed.get(path), skipped.get(path)
        if rec is not None and (rec.get("size"), rec.get("mtime_ns")) == (f.bytes, f.mtime_ns):
            info = {"pages": rec.get("pages"), "passages": rec.get("passages")}
            out.append(uploads.file_card(f, "indexed", info, name))
        elif skip is not None and skip.get("size") == f.bytes:
            out.append(uploads.file_card(f, "skipped", {"reason": skip.get("reason")}, name))
        elif running is not None:
            out.append(uploads.file_card(f, "indexing", None, name))
        elif queued:
            out.append(uploads.file_card(f, "queued", None, name))
        else:
            out.append(_after_jobs(f, finished, name))
    return out


def _after_jobs(f: uploads.StoredFile, finished: list[Job], name: str) -> dict[str, Any]:
    """A file the index does not hold and no job will read: why, from the last job."""
    for job in reversed(finished):
        outcome = job.outcomes.get(f.filename)
        if outcome and outcome.get("state") == "skipped":
            return uploads.file_card(f, "skipped", {"reason": outcome.get("reason")}, name)
        if job.status == "failed" and (f.filename in job.files or job.outcomes):
            reason = f"{job.error} ({job.id}); the collection's next job reads it again"
            return uploads.file_card(f, "failed", {"reason": reason}, name)
    reason = "no job indexed it (the server stopped first?); delete it and upload it again"
    return uploads.file_card(f, "failed", {"reason": reason}, name)


def _server_file(path: str, rec: dict[str, Any], section: dict[str, Any]) -> dict[str, Any]:
    """A file of a collection built on the server, named relative to its root."""
    roots = [str(r) for r in section.get("roots", [])]
    shown = os.path.basename(path)
    for root in roots:
        if path.startswith(root.rstrip(os.sep) + os.sep):
            shown = os.path.relpath(path, root)
            if len(roots) > 1:
                shown = os.path.join(os.path.basename(root.rstrip(os.sep)), shown)
            break
    f = uploads.StoredFile(uploads.file_id(shown), shown, int(rec.get("size", 0)), 0,
                           int(rec.get("mtime_ns", 0)))  # fmt: skip
    info = {"pages": rec.get("pages"), "passages": rec.get("passages")}
    card = uploads.file_card(f, "indexed", info)
    card["created_at"] = int(f.mtime_ns // 1_000_000_000)
    return card
