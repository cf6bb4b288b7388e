"""The demo's documents panel: its HTML (pure), and its handlers against a live server
with the documents API on (real uploads, a real build in the job's worker process)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.documents.makers import write_pdf
from tests.serving.conftest import live_server, make_rag, server_settings
from ui.documents_render import (
    documents_html,
    job_line,
    progress_html,
    state_text,
    upload_cards,
    upload_targets,
)
from ui.render import sources_html

KEY = "sekret"


# --- the HTML (pure) ----------------------------------------------------------------


def test_each_state_reads_for_people() -> None:
    indexed = {"filename": "press.pdf", "state": "indexed", "pages": 2, "passages": 1}
    assert state_text(indexed) == "indexed · 2 pages · 1 passage"
    assert state_text({"state": "indexed", "passages": 3}) == "indexed · 3 passages"
    assert state_text({"state": "skipped", "reason": "no text (a scan?)"}) == (
        "skipped: no text (a scan?)"
    )
    assert state_text({"state": "indexing"}) == "indexing…"
    assert state_text({"state": "queued"}) == "queued"
    row = documents_html([{"filename": "a<b>.md", "state": "failed", "reason": "x & y"}])
    assert 'data-state="failed"' in row and "a&lt;b&gt;.md" in row and "x &amp; y" in row
    assert "No documents" in documents_html([])


def test_an_upload_shows_each_file_refused_listed_or_waiting() -> None:
    names = ["press.pdf", "tool.exe", "notes.md"]
    refused = {"tool.exe": "file 'tool.exe' has type '.exe', which is not indexed"}
    listed = [{"filename": "press.pdf", "state": "indexed", "pages": 2, "passages": 2}]
    running = [{"id": "job-1", "status": "running", "phase": "reading", "files_done": 1,
                "files_total": 2, "current_file": "notes.md", "passages": 2}]  # fmt: skip
    cards = upload_cards(names, refused, running, listed)
    assert [c["state"] for c in cards] == ["indexed", "refused", "indexing"]
    assert [c["state"] for c in upload_cards(names, {}, [{"status": "queued"}], [])] == [
        "queued"
    ] * 3
    html = progress_html("shop", names, refused, running, listed)
    assert "Uploading into <b>shop</b>" in html and 'data-done="false"' in html
    assert "reading: 1/2 files (notes.md) 2 passages so far" in html
    assert "refused: file &#x27;tool.exe&#x27; has type" in html
    done = dict(running[0], status="succeeded", passages=3)
    assert 'data-done="true"' in progress_html("shop", names, refused, [done], listed)
    assert job_line(done) == "done: 3 passages in the collection"
    assert job_line({"status": "failed", "error": "nothing to index"}) == (
        "the job failed: nothing to index"
    )
    assert "waiting" in job_line({"status": "queued"})


def test_only_uploaded_collections_are_upload_targets() -> None:
    cards = [
        {"id": "wiki", "kind": "wikipedia", "uploads": False},
        {"id": "shop", "uploads": True, "files": 2},
        {"id": "built-on-server", "uploads": False, "files": 9},
        {"id": "empty", "uploads": True, "files": 0},
    ]
    assert upload_targets(cards) == [("shop (2 files)", "shop"), ("empty (0 files)", "empty")]


def test_a_document_source_names_its_file_and_page_and_no_server_path() -> None:
    info = {
        "mode": "rag",
        "citations": [
            {"citation": 1, "id": "manuals/press.pdf#2", "title": "Press — Hydraulics",
             "snippet": "Change the oil.", "source": "manuals/press.pdf", "page": 2,
             "section": "Hydraulics"},
            {"citation": 2, "id": "x#1", "title": "Old", "snippet": "s",
             "source": "/srv/secret/home/old.pdf", "page": 1},
        ],
    }  # fmt: skip
    panel = sources_html(info, "Oil [1].", turn=1, final=True)
    assert "manuals/press.pdf · page 2 · Hydraulics" in panel and 'data-page="2"' in panel
    assert "old.pdf · page 1" in panel and "/srv/secret" not in panel
    assert "file://" not in panel


# --- the handlers against a live server ---------------------------------------------


async def _drain(gen: Any) -> list[tuple[Any, ...]]:
    return [out async for out in gen]


def test_the_panel_uploads_follows_the_job_lists_and_deletes(tmp_path: Path) -> None:
    from ui.documents import make_handlers
    from ui.documents_client import DocumentsClient

    pdf = write_pdf(
        tmp_path / "press.pdf",
        [("Safety", "Wear goggles."), ("Hydraulics", "Change the hydraulic oil often.")],
        title="Press Brake Manual",
    )
    bad = tmp_path / "tool.exe"
    bad.write_bytes(b"MZ")
    settings = server_settings(tmp_path, **{"server.api_key": KEY})
    with live_server(settings, make_rag(settings)) as srv:
        off = make_handlers(DocumentsClient(srv.api, "wrong-key"))
        panel, _target, listed = asyncio.run(off["load"]())
        assert panel["visible"] is False  # the API refuses this key: no panel

        handlers = make_handlers(DocumentsClient(srv.api, KEY))
        panel, _target, listed = asyncio.run(handlers["load"]())
        assert panel["visible"] is True and listed == {"collection": None, "files": []}

        outs = asyncio.run(_drain(handlers["upload"]([str(pdf), str(bad)], None, "shop", "wiki")))
        first, last_progress = outs[0][0], outs[-2][0]
        assert 'data-state="uploading"' in first
        assert 'data-done="true"' in last_progress, last_progress
        assert "indexed · 2 pages · 2 passages" in last_progress
        assert "refused: file &#x27;tool.exe&#x27; has type &#x27;.exe&#x27;" in last_progress
        assert str(tmp_path) not in "".join(str(o) for o in outs)  # no path, theirs or ours
        listed = outs[-2][2]
        assert [c["filename"] for c in listed["files"]] == ["press.pdf"]
        picker = outs[-1][5]
        assert picker["value"] == "shop"  # indexed: the chat now answers from it
        assert "shop" in [value for _label, value in picker["choices"]]

        file_id = listed["files"][0]["id"]
        gone = asyncio.run(_drain(handlers["delete"](listed, file_id, "shop")))
        assert gone[0][0]["files"][0]["state"] == "deleting"
        final, note, _picker = gone[-1]
        assert final == {"collection": "shop", "files": []}
        assert "Deleted press.pdf; shop was rebuilt without it." in note


@pytest.mark.parametrize("value", [None, [], ""])
def test_nothing_dropped_says_so(value: Any) -> None:
    from ui.documents import make_handlers
    from ui.documents_client import DocumentsClient

    handlers = make_handlers(DocumentsClient("http://127.0.0.1:9/v1"))
    outs = asyncio.run(_drain(handlers["upload"](value, "shop", "", "wiki")))
    assert len(outs) == 1 and "Drop one or more files first" in outs[0][0]


def test_only_gradios_temporary_copies_are_removed_once_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ui.documents import _forget

    cache = tmp_path / "gradio"
    (cache / "abc").mkdir(parents=True)
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(cache))
    copy, mine = cache / "abc" / "press.pdf", tmp_path / "press.pdf"
    copy.write_bytes(b"%PDF")
    mine.write_bytes(b"%PDF")
    _forget([copy, mine, cache / "abc" / "gone.pdf"])
    assert not copy.exists() and mine.exists()
