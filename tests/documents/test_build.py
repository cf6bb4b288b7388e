"""Building and updating a collection: incremental reads, bad files, atomic versions."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import indexes.documents.reading as reading_module
from indexes.documents import build_collection
from tests.documents.makers import (
    encrypt_pdf,
    write_docx,
    write_pdf,
    write_scanned_pdf,
    write_symlink_loops,
)
from typed_rag.config import Settings, load_settings
from typed_rag.errors import UserError
from typed_rag.retrieval.base import Passage
from typed_rag.retrieval.collections import (
    collection_dir,
    collection_settings,
    list_collections,
    open_collection,
)


def settings_for(tmp_path: Path, **extra: Any) -> Settings:
    return load_settings(**{"home": str(tmp_path / "home"), "retrieval.backend": "numpy", **extra})


def search(settings: Settings, name: str, query: str, k: int = 3) -> list[Passage]:
    retriever = open_collection(settings, name)
    try:
        return retriever.search([query], k)[0]
    finally:
        retriever.close()


def manifest(settings: Settings, name: str) -> dict[str, Any]:
    return json.loads((collection_dir(settings, name) / "manifest.json").read_text())


@pytest.fixture()
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files the build opens (to hash or parse), in order."""
    seen: list[str] = []

    def spy(path: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(Path(path).name)
        return open(path, *args, **kwargs)

    monkeypatch.setattr(reading_module, "open", spy, raising=False)
    return seen


def make_docs(root: Path) -> Path:
    root.mkdir()
    (root / "a.md").write_text("# Animals\n\nThe aardvark digs for termites at dusk.\n")
    (root / "b.txt").write_text("The bison herd crossed the frozen river in January.\n")
    write_pdf(root / "c.pdf", [(None, "Intro page."), ("Deer", "The caribou migrate north.")])
    write_docx(root / "d.docx", "Dogs", [("Wild dogs", ["The dingo hunts alone or in packs."])])
    return root


def top_source(settings: Settings, query: str) -> str | None:
    hits = search(settings, "zoo", query, k=1)
    return Path(hits[0].source).name if hits and hits[0].source else None


def test_incremental_update_reads_only_new_and_changed_files(
    tmp_path: Path, opened: list[str]
) -> None:
    settings = settings_for(tmp_path)
    docs = make_docs(tmp_path / "docs")
    first = build_collection(settings, "zoo", [docs], show_progress=False, workers=0)
    assert (first.added, first.read, first.files, first.kept) == (4, 4, 4, 0)
    assert sorted(opened) == ["a.md", "b.txt", "c.pdf", "d.docx"]
    for query, name in [("aardvark termites", "a.md"), ("caribou migrate", "c.pdf"),
                        ("dingo packs", "d.docx"), ("bison river", "b.txt")]:  # fmt: skip
        assert top_source(settings, query) == name
    caribou = search(settings, "zoo", "caribou migrate", k=1)[0]
    assert (caribou.page, caribou.section, caribou.title) == (2, "Deer", "c — Deer")
    aardvark_id = search(settings, "zoo", "aardvark", k=1)[0].id

    opened.clear()
    again = build_collection(settings, "zoo", [docs], show_progress=False, workers=0)
    assert again.up_to_date and again.read == 0 and opened == []

    (docs / "b.txt").write_text("The buffalo herd grazed on the plain.\n")
    (docs / "c.pdf").unlink()
    (docs / "e.html").write_text(
        "<html><body><main><p>The emu cannot fly.</p></main></body></html>"
    )
    opened.clear()
    third = build_collection(settings, "zoo", [docs], show_progress=False, workers=0)
    assert (third.added, third.changed, third.removed, third.kept) == (1, 1, 1, 2)
    assert third.read == 2 and sorted(opened) == ["b.txt", "e.html"]
    assert top_source(settings, "buffalo plain") == "b.txt"
    assert top_source(settings, "emu fly") == "e.html"
    assert search(settings, "zoo", "bison", k=3) == []
    assert search(settings, "zoo", "caribou", k=3) == []
    kept = search(settings, "zoo", "aardvark", k=1)[0]
    assert kept.id == aardvark_id and kept.section == "Animals"
    files = manifest(settings, "zoo")["collection"]["files"]
    assert sorted(Path(p).name for p in files) == ["a.md", "b.txt", "d.docx", "e.html"]
    import hashlib

    b = files[str(docs / "b.txt")]
    assert b["sha256"] == hashlib.sha256((docs / "b.txt").read_bytes()).hexdigest()

    # touched, same bytes: hashed again but not parsed
    os.utime(docs / "a.md", ns=(1, 1))
    opened.clear()
    fourth = build_collection(settings, "zoo", [docs], show_progress=False, workers=0)
    assert opened == ["a.md"] and fourth.read == 0 and fourth.kept == 4
    assert search(settings, "zoo", "aardvark", k=1)[0].id == aardvark_id


def test_bad_files_are_skipped_with_reasons_and_the_rest_builds(
    tmp_path: Path, opened: list[str]
) -> None:
    settings = settings_for(tmp_path, **{"documents.max_file_mb": "0.05"})
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("The kingfisher dives for small fish.\n")
    (docs / "corrupt.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf\n%%EOF")
    plain = write_pdf(tmp_path / "plain.pdf", [(None, "A secret page.")])
    encrypt_pdf(plain, docs / "locked.pdf", user_password="pw")
    write_scanned_pdf(docs / "scan.pdf")
    (docs / "binary.txt").write_bytes(bytes(range(256)) * 4)
    (docs / "empty.md").write_bytes(b"")
    (docs / "big.txt").write_text("word " * 20_000)
    (docs / "latin.txt").write_bytes(
        ("Le héron cendré pêche dans l'étang près du château. " * 4).encode("latin-1")
    )
    write_symlink_loops(docs)
    report = build_collection(settings, "birds", [docs], show_progress=False, workers=0)
    why = {Path(s.path).name: s.reason for s in report.skipped}
    assert why["corrupt.pdf"].startswith("unreadable PDF")
    assert why["locked.pdf"] == "encrypted PDF: a password is needed to open it"
    assert why["scan.pdf"].startswith("no text layer on any of its 2 pages")
    assert why["binary.txt"].startswith("binary content")
    assert why["empty.md"] == "empty file"
    assert why["big.txt"].startswith("too large")
    assert why["back-to-top"].startswith("symlink loop")
    assert why["self.txt"].startswith("symlink loop")
    assert report.files == 2  # good.md and latin.txt
    assert [w for _, w in report.warnings][0].startswith("not UTF-8")
    assert top_source_in(settings, "birds", "kingfisher dives") == "good.md"
    assert top_source_in(settings, "birds", "héron cendré château") == "latin.txt"
    stored = {
        Path(s["path"]).name: s["reason"]
        for s in manifest(settings, "birds")["collection"]["skipped"]
    }  # noqa: E501
    assert stored == why

    # unchanged bad files are not read again; their reasons stay
    opened.clear()
    again = build_collection(settings, "birds", [docs], show_progress=False, workers=0)
    assert again.up_to_date and opened == []
    assert {Path(s.path).name: s.reason for s in again.skipped} == why


def top_source_in(settings: Settings, name: str, query: str) -> str | None:
    hits = search(settings, name, query, k=1)
    return Path(hits[0].source).name if hits and hits[0].source else None


def test_a_crash_leaves_the_previous_collection_usable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The otter floats on its back.\n")
    build_collection(settings, "river", [docs], show_progress=False, workers=0)
    (docs / "b.txt").write_text("The beaver builds a dam.\n")

    def crash(path: Path, data: bytes) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(reading_module, "parse_document", crash)
    with pytest.raises(KeyboardInterrupt):
        build_collection(settings, "river", [docs], show_progress=False, workers=0)
    assert top_source_in(settings, "river", "otter") == "a.txt"
    assert search(settings, "river", "beaver") == []
    parent = collection_dir(settings, "river").parent
    assert sorted(p.name for p in parent.iterdir() if not p.name.endswith(".lock")) == [
        os.readlink(parent / "river"),
        "river",
    ]
    # a version a killed build left behind is removed by the next build
    (parent / ".river.123").mkdir()
    monkeypatch.undo()
    build_collection(settings, "river", [docs], show_progress=False, workers=0)
    assert not (parent / ".river.123").exists()
    assert top_source_in(settings, "river", "beaver") == "b.txt"


def test_a_collection_of_only_bad_files_is_an_error_naming_them(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "broken.pdf").write_bytes(b"garbage")
    with pytest.raises(UserError, match=r"nothing to index(.|\n)*broken.pdf: not a PDF"):
        build_collection(settings, "empty", [docs], show_progress=False, workers=0)
    assert not collection_dir(settings, "empty").exists()


def test_names_listing_and_settings(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The otter floats on its back.\n")
    with pytest.raises(UserError, match="invalid collection name"):
        build_collection(settings, "../evil", [docs])
    with pytest.raises(UserError, match="Wikipedia collection"):
        build_collection(settings, "wiki", [docs])
    build_collection(settings, "river", [docs], show_progress=False, workers=0)
    infos = {c.name: c for c in list_collections(settings)}
    assert set(infos) == {"wiki", "river"}
    assert not infos["wiki"].built and infos["river"].built
    assert (infos["river"].files, infos["river"].passages) == (1, 1)
    assert infos["river"].roots == [str(docs)]
    assert collection_settings(settings, "river").index_dir == collection_dir(settings, "river")
    assert collection_settings(settings, None) is settings
    with pytest.raises(UserError, match=r"unknown collection 'lake' \(known: wiki, river\)"):
        collection_settings(settings, "lake")
    # updated from the paths it was built from
    (docs / "b.txt").write_text("The beaver builds a dam.\n")
    report = build_collection(settings, "river", None, show_progress=False, workers=0)
    assert report.added == 1 and report.kept == 1


def test_worker_processes_give_the_same_collection(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    docs = make_docs(tmp_path / "docs")
    build_collection(settings, "one", [docs], show_progress=False, workers=0)
    build_collection(settings, "two", [docs], show_progress=False, workers=2)
    one = (collection_dir(settings, "one") / "passages.meta.jsonl").read_bytes()
    assert one == (collection_dir(settings, "two") / "passages.meta.jsonl").read_bytes()
    assert (collection_dir(settings, "one") / "passages.bin").read_bytes() == (
        collection_dir(settings, "two") / "passages.bin"
    ).read_bytes()
