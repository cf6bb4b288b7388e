"""The demo's documents panel: upload files into a collection, watch them being indexed,
list a collection's documents and delete one.

It is a client of the server's documents API (:class:`ui.documents_client.DocumentsClient`,
over HTTP with the server's key, like the chat), so it is shown only where that API
answers (``server.api_key`` set, or ``documents.uploads = "on"``). An upload stores the
files, then follows the job that indexes them until it ends, showing each file's state:
queued, indexing, indexed with its pages and passages, skipped or refused with the reason.
"""

from __future__ import annotations

import asyncio
import html
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import gradio as gr

from ui.documents_client import DocumentsClient, DocumentsError
from ui.documents_render import (
    NO_UPLOAD,
    TERMINAL,
    documents_html,
    file_row_html,
    progress_html,
    upload_targets,
)
from ui.render import collection_choices

log = logging.getLogger(__name__)

POLL_S = 0.5  # how often a running job is asked about
FOLLOW_S = 3600.0  # an upload stops following its job after this long (the job goes on)

CSS = """
.tr-doc { padding: 4px 0; }
.tr-doc-name { font-weight: 600; }
.tr-doc-size, .tr-docs-note { color: #6b7280; font-size: 0.85em; }
.tr-doc-state { font-size: 0.9em; margin-left: 6px; }
.tr-doc-row { align-items: center; }
"""

Listed = dict[str, Any]  # {"collection": NAME, "files": [file cards]}: what the list shows


def _note(text: str) -> str:
    return f'<div class="tr-docs-note">{html.escape(text)}</div>'


def _files_of(value: Any) -> list[Path]:
    """The paths gr.File hands over (strings, or objects with ``.name`` in some versions)."""
    items = value if isinstance(value, list) else [value] if value else []
    return [Path(getattr(v, "name", v)) for v in items if v]


def _forget(paths: list[Path]) -> None:
    """Remove Gradio's temporary copies of sent files: the server keeps its own, and a
    user's documents should not linger in a second place. Only files in Gradio's upload
    folder are touched."""
    try:
        from gradio.utils import get_upload_folder

        cache = Path(get_upload_folder()).resolve()
    except (ImportError, OSError):
        return
    for path in paths:
        try:
            if path.resolve().is_relative_to(cache):
                path.unlink(missing_ok=True)
        except OSError:
            continue


def _built(listed: list[dict[str, Any]]) -> bool:
    return any(c.get("state") == "indexed" for c in listed)


def _deleted(listed: Listed, file_id: str) -> Listed:
    """The list with one file shown as being deleted."""
    files = [dict(c, state="deleting") if c.get("id") == file_id else c for c in listed["files"]]
    return {**listed, "files": files}


async def _follow(
    client: DocumentsClient, jobs: list[dict[str, Any]]
) -> AsyncIterator[list[dict[str, Any]]]:
    """The jobs as they change, polled until each has ended (or :data:`FOLLOW_S` passed)."""
    deadline = time.monotonic() + FOLLOW_S
    while True:
        jobs = [await client.job(str(j["id"])) for j in jobs]
        yield jobs
        if all(j.get("status") in TERMINAL for j in jobs) or time.monotonic() > deadline:
            return
        await asyncio.sleep(POLL_S)


def make_handlers(client: DocumentsClient) -> dict[str, Callable[..., Any]]:
    """The panel's event handlers (plain async functions, testable without a browser)."""

    async def targets(chosen: str | None = None) -> tuple[Any, str | None]:
        cards = await client.collections()
        choices = upload_targets(cards)
        names = [n for _, n in choices]
        value = chosen if chosen in names else (names[0] if names else None)
        return gr.update(choices=choices, value=value), value

    async def load() -> tuple[Any, Any, Listed]:
        """Page load: show the panel if the documents API answers, with the first collection."""
        if not await client.enabled():
            return gr.update(visible=False), gr.skip(), {"collection": None, "files": []}
        try:
            target, name = await targets()
            files = await client.files(name) if name else []
        except DocumentsError as exc:
            log.info("demo could not list the collections: %s", exc)
            return gr.update(visible=True), gr.skip(), {"collection": None, "files": []}
        return gr.update(visible=True), target, {"collection": name, "files": files}

    async def show(name: str | None) -> Listed:
        """The chosen collection's documents."""
        if not name:
            return {"collection": None, "files": []}
        try:
            return {"collection": name, "files": await client.files(name)}
        except DocumentsError as exc:
            return {"collection": name, "files": [], "error": str(exc)}

    async def upload(
        files: Any, target: str | None, new_name: str | None, chat_choice: str | None
    ) -> AsyncIterator[tuple[Any, ...]]:
        """Store the dropped files, then follow their job. Outputs: progress, the file
        drop (emptied), the list, the chooser, the new name (emptied), the chat's picker."""
        skip = gr.skip()
        paths = _files_of(files)
        name = (new_name or "").strip() or (target or "")
        if not paths:
            yield _note("Drop one or more files first."), skip, skip, skip, skip, skip
            return
        if not name:
            yield _note("Choose a collection, or name a new one."), skip, skip, skip, skip, skip
            return
        names = [p.name for p in paths]
        waiting = [{"filename": n, "state": "uploading"} for n in names]
        yield progress_html(name, names, {}, [], waiting), skip, skip, skip, skip, skip
        try:
            await client.create(name)
            sent = await client.upload(name, paths)
            chooser, _ = await targets(name)
        except DocumentsError as exc:  # the files stay dropped: the user may try again
            yield _note(f"Could not upload into {name}: {exc}"), skip, skip, skip, skip, skip
            return
        _forget(paths)
        refused = {k: v for u in sent for k, v in u.refused.items()}
        jobs = [u.job for u in sent if u.job]
        listed: list[dict[str, Any]] = []
        dropped: Any = None  # sent: the drop zone is emptied
        try:
            async for now in _follow(client, jobs):
                jobs = now
                listed = await client.files(name)
                yield (
                    progress_html(name, names, refused, jobs, listed),
                    dropped,
                    {"collection": name, "files": listed},
                    chooser,
                    "",
                    skip,
                )
                chooser = dropped = skip  # set once
            if not jobs:  # every file refused: nothing to index
                return
            cards = await client.collections()
        except DocumentsError as exc:
            yield _note(f"Lost track of the upload: {exc}"), skip, skip, skip, skip, skip
            return
        value = name if _built(listed) else chat_choice
        picker = gr.update(choices=collection_choices(cards), value=value)
        yield skip, skip, skip, skip, skip, picker

    async def delete(
        listed: Listed, file_id: str, chat_choice: str | None
    ) -> AsyncIterator[tuple[Any, ...]]:
        """Remove one file and follow the rebuild. Outputs: the list, progress, chat picker."""
        name = listed.get("collection")
        skip = gr.skip()
        if not name:
            return
        shown = next((c for c in listed["files"] if c.get("id") == file_id), {})
        label = str(shown.get("filename") or "the file")
        yield _deleted(listed, file_id), _note(f"Deleting {label}…"), skip
        try:
            answer = await client.delete(name, file_id)
            jobs = [answer["job"]] if answer.get("job") else []
            async for now in _follow(client, jobs):
                jobs = now
            files = await client.files(name)
            cards = await client.collections()
        except DocumentsError as exc:
            yield await show(name), _note(f"Could not delete {label}: {exc}"), skip
            return
        failed = [j for j in jobs if j.get("status") == "failed"]
        note = (
            f"Deleted {label}; rebuilding {name} failed: {failed[0].get('error')}"
            if failed
            else f"Deleted {label}; {name} was rebuilt without it."
        )
        picker = gr.update(choices=collection_choices(cards), value=chat_choice)
        yield {"collection": name, "files": files}, _note(note), picker

    return {"load": load, "show": show, "upload": upload, "delete": delete}


def documents_panel(
    demo: gr.Blocks,
    api_base: str,
    api_key: str | None,
    chat_collection: gr.Dropdown,
    concurrency: int | None,
) -> None:
    """Build the panel inside ``demo`` (hidden until a page load finds the API on)."""
    handlers = make_handlers(DocumentsClient(api_base, api_key))
    with gr.Accordion("Your documents", open=True, visible=False, elem_id="tr-docs") as panel:
        gr.Markdown(
            "Upload PDF, Word, HTML, Markdown or text files into a collection; the server "
            "indexes them, then the chat can answer from that collection."
        )
        with gr.Row():
            target = gr.Dropdown(
                [],
                value=None,
                label="Collection",
                info="upload into this collection (and list its documents)",
                elem_id="tr-docs-collection",
                scale=3,
            )
            new_name = gr.Textbox(
                label="…or a new collection",
                placeholder="e.g. manuals (letters, digits, _ . -)",
                elem_id="tr-docs-new",
                scale=3,
            )
        files = gr.File(
            file_count="multiple",
            type="filepath",
            label="Drop files here, or click to choose",
            elem_id="tr-docs-files",
        )
        send = gr.Button("Upload and index", variant="primary", elem_id="tr-docs-upload")
        progress = gr.HTML(NO_UPLOAD, elem_id="tr-docs-progress")
        gr.Markdown("**Documents in the collection**")
        listed = gr.State({"collection": None, "files": []})

        @gr.render(inputs=[listed])
        def rows(current: Listed) -> None:
            if current.get("error"):
                gr.HTML(_note(str(current["error"])), elem_id="tr-docs-list")
                return
            cards = current.get("files") or []
            if not cards:
                gr.HTML(documents_html([]), elem_id="tr-docs-list")
                return
            for card in cards:
                with gr.Row(elem_classes=["tr-doc-row"], key=f"row-{card.get('id')}"):
                    gr.HTML(file_row_html(card), elem_classes=["tr-doc-cell"])
                    button = gr.Button(
                        "Delete",
                        size="sm",
                        scale=0,
                        min_width=80,
                        elem_classes=["tr-doc-delete"],
                        interactive=card.get("state") != "deleting",
                        key=f"delete-{card.get('id')}",
                    )
                    file_id = str(card.get("id"))

                    async def remove(
                        chat_choice: str | None, _id: str = file_id, _now: Listed = current
                    ) -> AsyncIterator[tuple[Any, ...]]:
                        async for out in handlers["delete"](_now, _id, chat_choice):
                            yield out

                    button.click(
                        remove,
                        [chat_collection],
                        [listed, progress, chat_collection],
                        api_name=False,
                        concurrency_limit=concurrency,
                    )

        send.click(
            handlers["upload"],
            [files, target, new_name, chat_collection],
            [progress, files, listed, target, new_name, chat_collection],
            api_name=False,
            concurrency_limit=concurrency,
        )
        target.input(handlers["show"], target, listed, api_name=False)
    demo.load(handlers["load"], None, [panel, target, listed], api_name=False)
