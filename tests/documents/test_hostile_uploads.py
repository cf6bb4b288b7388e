"""Hostile uploads (issue 80): each gets a 4xx naming what is wrong, or is stored and then
``skipped`` with its reason; never a 5xx or a traceback, never a file outside the collection.

Real files made here: a zip bomb (refused as a ``.zip``, skipped as a ``.docx``), PDF
bombs (one page whose content unpacks to 100 MB; 200 pages sharing 2 MB of text operators
that would take pypdf an hour to parse), names with path parts, an empty file, and files
whose extension lies about their type.
"""

from __future__ import annotations

import io
from pathlib import Path

import httpx
from PIL import Image

from tests.documents.makers import write_pdf, write_pdf_bomb, write_zip_bomb
from tests.documents.test_service import AUTH, NOTES, Client, server  # noqa: F401 - fixture
from tests.serving.conftest import LiveServer

TEXT_OPS = b"BT /F1 12 Tf 72 720 Td (spindle) Tj ET\n"


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 64), (200, 10, 10)).save(out, "PNG")
    return out.getvalue()


def refused(r: httpx.Response, status: int, code: str, text: str) -> None:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["code"] == code and text in error["message"], error
    assert "Traceback" not in r.text


def files_outside(tmp_path: Path, before: set[Path]) -> list[Path]:
    """Files that appeared under ``tmp_path`` outside the server's own folders."""
    home = tmp_path / "home"
    own = [home / "uploads" / "shop", home / "collections", home / "jobs"]
    return [
        p
        for p in tmp_path.rglob("*")
        if p.is_file() and p not in before and not any(p.is_relative_to(o) for o in own)
    ]


def test_hostile_uploads_are_refused_or_skipped_with_the_reason(
    server: tuple[LiveServer, Client],  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    _, api = server
    made = tmp_path / "made"
    made.mkdir()
    zip_bomb = write_zip_bomb(made / "bomb.zip", 40_000_000).read_bytes()  # 40 MB in 39 KB
    pdf_bomb = write_pdf_bomb(made / "bomb.pdf", b" " * 100_000_000).read_bytes()
    parse_bomb = write_pdf_bomb(made / "slow.pdf", TEXT_OPS * 50_000, pages=200).read_bytes()
    assert max(len(zip_bomb), len(pdf_bomb), len(parse_bomb)) < 100_000
    small_zip = write_zip_bomb(made / "small.zip", 1_000_000).read_bytes()
    real_pdf = write_pdf(made / "m.pdf", [(None, "A real PDF.")]).read_bytes()
    before = set(tmp_path.rglob("*"))
    assert api.call("POST", "/collections", json={"name": "shop"}).status_code == 201
    md = b"# Note\n\nSome text.\n"

    # Names with path parts, however they are sent: refused before anything is written.
    for name in ("../../etc/x.md", "../x.md", "sub/../../x.md", "/etc/x.md"):
        refused(api.upload("shop", (name, md)), 400, "invalid_file_name", "path")
    for raw in (b"../../etc/x.md", b"..\\..\\etc\\x.md"):  # as a hostile client sends them
        refused(api.upload_raw("shop", raw, md), 400, "invalid_file_name", "path")
    star = (  # RFC 5987's filename*, percent-encoded: the parser does not decode it
        b"--b\r\nContent-Disposition: form-data; name=\"files\"; "
        b"filename*=UTF-8''..%2F..%2Fetc%2Fx.md\r\nContent-Type: text/markdown\r\n\r\n"
        + md + b"\r\n--b--\r\n"
    )  # fmt: skip
    r = api.call("POST", "/collections/shop/files", content=star,
                 headers={**AUTH, "content-type": "multipart/form-data; boundary=b"})  # fmt: skip
    refused(r, 400, "invalid_file_name", "part 'files' is not a file")
    # An empty file, and an archive (a zip bomb or not: archives are not read).
    refused(api.upload("shop", ("empty.md", b"")), 400, "empty_file", "'empty.md' is empty")
    refused(api.upload("shop", ("ok.md", md), ("empty.md", b"")), 400, "empty_file", "empty")
    refused(
        api.upload("shop", ("bomb.zip", zip_bomb)), 415, "unsupported_file_type",
        "file 'bomb.zip' has type '.zip', which is not indexed",
    )  # fmt: skip
    assert api.files("shop") == {}
    assert files_outside(tmp_path, before) == []

    # Stored, then skipped by the job with the reason: bombs, and extensions that lie.
    up = api.upload(
        "shop",
        ("report.docx", zip_bomb),
        ("bomb.pdf", pdf_bomb),
        ("slow.pdf", parse_bomb),
        ("photo.md", png()),
        ("scan.pdf", small_zip),
        ("manual.docx", real_pdf),
        ("notes.md", NOTES),
    )
    assert up.status_code == 202, up.text
    # Parsed, slow.pdf alone would hold the job (and the machine's one build) for an hour.
    job = api.wait(up.json()["id"], timeout_s=300)
    assert job["status"] == "succeeded", job
    files = api.files("shop")
    states = {name: (f["state"], f["reason"]) for name, f in files.items()}
    assert states["notes.md"] == ("indexed", None)
    for name, text in [
        ("report.docx", "the DOCX (a zip) unpacks to more than 32 MB from 0.04 MB"),
        ("bomb.pdf", "its pages' content unpacks to more than 32 MB"),
        ("slow.pdf", "its pages' content unpacks to more than 32 MB"),
        ("photo.md", "binary content (NUL bytes) in a text file"),
        ("scan.pdf", "not a PDF (no %PDF header)"),
        ("manual.docx", "unreadable DOCX (BadZipFile"),
    ]:
        state, reason = states[name]
        assert state == "skipped" and text in reason, (name, state, reason)
    assert "bomb?" in states["report.docx"][1] and "bomb?" in states["bomb.pdf"][1]
    assert sorted(job["errors"]) == sorted(f"{n}: {r}" for n, (s, r) in states.items() if r)
    uploaded = sorted(p.name for p in (tmp_path / "home" / "uploads" / "shop").iterdir())
    assert uploaded == sorted(files)
    assert files_outside(tmp_path, before) == []
    assert not list(tmp_path.rglob("x.md"))
