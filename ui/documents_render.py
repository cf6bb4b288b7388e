"""The documents panel's HTML: each file's state, an upload's progress, the collections
one can upload into. Pure functions of the documents API's JSON, testable without a browser.

A file shows only its name (as the API names it: relative to its collection), never a
path of the server or of the demo's temporary folder.
"""

from __future__ import annotations

import html
from pathlib import PurePath
from typing import Any

STATE_COLOURS = {
    "queued": "#6b7280",
    "uploading": "#6b7280",
    "indexing": "#2563eb",
    "indexed": "#16a34a",
    "skipped": "#d97706",
    "failed": "#dc2626",
    "refused": "#dc2626",
    "deleting": "#6b7280",
}
TERMINAL = ("succeeded", "failed")
NO_DOCUMENTS = '<div class="tr-docs-note">No documents in this collection yet.</div>'
NO_UPLOAD = '<div class="tr-docs-note">Drop files above, then press Upload and index.</div>'


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def state_text(card: dict[str, Any]) -> str:
    """A file's state for people: ``indexed · 2 pages · 3 passages``, ``skipped: why``."""
    state = str(card.get("state") or "queued")
    if state == "indexed":
        bits = ["indexed"]
        if card.get("pages") is not None:
            bits.append(_plural(int(card["pages"]), "page"))
        if card.get("passages") is not None:
            bits.append(_plural(int(card["passages"]), "passage"))
        return " · ".join(bits)
    if card.get("reason"):
        return f"{state}: {card['reason']}"
    return {"indexing": "indexing…", "uploading": "uploading…", "deleting": "deleting…"}.get(
        state, state
    )


def file_row_html(card: dict[str, Any]) -> str:
    """One file: its name and its state, coloured by state (``data-state`` for tests)."""
    state = str(card.get("state") or "queued")
    name = PurePath(str(card.get("filename") or "")).name
    colour = STATE_COLOURS.get(state, "#374151")
    size = card.get("bytes")
    size_html = f' <span class="tr-doc-size">{_size(int(size))}</span>' if size else ""
    return (
        f'<div class="tr-doc" data-state="{html.escape(state)}" '
        f'data-filename="{html.escape(name)}"><span class="tr-doc-name">{html.escape(name)}</span>'
        f'{size_html} <span class="tr-doc-state" style="color:{colour}">'
        f"{html.escape(state_text(card))}</span></div>"
    )


def _size(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f} MB"
    if n >= 1_000:
        return f"{n / 1_000:.0f} kB"
    return f"{n} B"


def documents_html(cards: list[dict[str, Any]]) -> str:
    """The collection's documents, one row each."""
    if not cards:
        return NO_DOCUMENTS
    rows = "".join(file_row_html(c) for c in cards)
    return f'<div class="tr-docs-list">{rows}</div>'


def job_line(job: dict[str, Any]) -> str:
    """What a job is doing: ``indexing: 1/3 files (manual.pdf), 12 passages``."""
    status = str(job.get("status") or "queued")
    if status == "queued":
        return "waiting for the collection's earlier jobs (or another build) to end…"
    if status == "failed":
        return f"the job failed: {job.get('error') or 'no reason given'}"
    done, total = int(job.get("files_done") or 0), int(job.get("files_total") or 0)
    passages = int(job.get("passages") or 0)
    if status == "succeeded":
        return f"done: {_plural(passages, 'passage')} in the collection"
    phase = str(job.get("phase") or "starting")
    bits = [f"{phase}: {done}/{total} files" if total else f"{phase}…"]
    if job.get("current_file"):
        bits.append(f"({PurePath(str(job['current_file'])).name})")
    if passages:
        bits.append(f"{_plural(passages, 'passage')} so far")
    return " ".join(bits)


def upload_cards(
    names: list[str],
    refused: dict[str, str],
    jobs: list[dict[str, Any]],
    listed: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The state of each file of one upload: refused (the server's reason), else what the
    collection's file list says, else what its job says (queued, indexing)."""
    by_name = {str(c.get("filename")): c for c in listed}
    running = any(j.get("status") == "running" for j in jobs)
    out: list[dict[str, Any]] = []
    for name in names:
        if name in refused:
            out.append({"filename": name, "state": "refused", "reason": refused[name]})
        elif name in by_name:
            out.append(by_name[name])
        else:
            out.append({"filename": name, "state": "indexing" if running else "queued"})
    return out


def progress_html(
    collection: str,
    names: list[str],
    refused: dict[str, str],
    jobs: list[dict[str, Any]],
    listed: list[dict[str, Any]],
) -> str:
    """An upload's progress: the job's line, then each file's state."""
    cards = upload_cards(names, refused, jobs, listed)
    lines = [job_line(j) for j in jobs]
    done = bool(jobs) and all(j.get("status") in TERMINAL for j in jobs)
    head = f"Uploading into <b>{html.escape(collection)}</b>"
    if done or not jobs:
        head = f"Uploaded into <b>{html.escape(collection)}</b>"
    notes = "".join(f'<div class="tr-docs-note">{html.escape(line)}</div>' for line in lines)
    rows = "".join(file_row_html(c) for c in cards)
    finished = "true" if done or not jobs else "false"
    return (
        f'<div class="tr-docs-progress" data-done="{finished}"><div>{head}</div>{notes}'
        f'<div class="tr-docs-list">{rows}</div></div>'
    )


def upload_targets(cards: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The collections files can be uploaded into (made over HTTP, not built on the
    server's command line), as the chooser's ``(label, name)`` pairs."""
    out: list[tuple[str, str]] = []
    for card in cards:
        name = str(card.get("id") or card.get("name") or "")
        if not name or not card.get("uploads"):
            continue
        files = card.get("files")
        label = f"{name} ({_plural(int(files), 'file')})" if files is not None else name
        out.append((label, name))
    return out
