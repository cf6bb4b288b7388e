"""The user's command lines, run as a user runs them: ``typed-rag`` in a fresh home."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli.main import main
from tests.documents.makers import write_docx, write_pdf

TYPED_RAG = str(Path(sys.executable).parent / "typed-rag")

SENTENCES = {
    "espresso.md": (
        "# Espresso at home\n\n## Grinding\n\n"
        "A conical burr grinder set one notch finer fixes a sour, fast espresso shot.\n",
        "which grinder setting fixes a sour espresso shot",
    ),
    "tides.html": (
        "<html><head><title>Harbour notes</title></head><body><nav><a href='/'>Home</a>"
        "</nav><main><h1>Harbour notes</h1><p>Spring tides in the harbour rise four metres "
        "above the lowest mark twice a month.</p></main></body></html>",
        "how high do spring tides rise in the harbour",
    ),
    "beekeeping.txt": (
        "Beekeeping log\n\nThe queen bee was marked with a blue dot on the third of May.\n",
        "when was the queen bee marked blue",
    ),
}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TYPED_RAG, *args], capture_output=True, text=True, timeout=300, check=False
    )


def test_the_two_command_lines_on_a_fresh_home(tmp_path: Path) -> None:
    docs = tmp_path / "my docs"
    docs.mkdir()
    for name, (content, _) in SENTENCES.items():
        (docs / name).write_text(content, encoding="utf-8")
    (docs / "report.pdf").write_bytes(b"%PDF-1.5\n% a PDF cut off in the middle of")
    home = tmp_path / "empty-home"
    home.mkdir()

    built = run("--set", f"home={home}", "index", "build", "--docs", str(docs), "--name", "mine")
    assert built.returncode == 0, built.stderr
    assert "collection mine: 3 files" in built.stdout
    assert f"{docs / 'report.pdf'}: unreadable PDF" in built.stdout

    for name, (_, query) in SENTENCES.items():
        found = run("--set", f"home={home}", "retrieve", "--collection", "mine", "-k", "3",
                    "--json", query)  # fmt: skip
        assert found.returncode == 0, found.stderr
        passages = json.loads(found.stdout)["passages"]
        assert Path(passages[0]["source"]).name == name, (query, passages)
        for key in ("source", "page", "section", "title", "text", "score"):
            assert key in passages[0]
    manifest = json.loads((home / "collections" / "mine" / "manifest.json").read_text())
    skipped = manifest["collection"]["skipped"]
    assert [Path(s["path"]).name for s in skipped] == ["report.pdf"]
    assert skipped[0]["reason"].startswith("unreadable PDF")


def test_pdf_and_docx_passages_cite_file_page_and_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    write_pdf(
        docs / "manual.pdf",
        [("Safety", "Wear goggles."), ("Hydraulics", "Change the hydraulic oil every 2000 hours.")],
        title="Press Brake Manual",
    )
    write_docx(docs / "car.docx", "Car Manual", [("Wheels", ["Torque the wheel nuts crosswise."])])
    base = ["--set", f"home={tmp_path / 'home'}", "--set", "retrieval.backend=numpy"]
    assert main([*base, "index", "build", "--docs", str(docs), "--name", "m", "--quiet"]) == 0
    capsys.readouterr()
    assert main([*base, "retrieve", "--collection", "m", "-k", "1", "--json", "hydraulic oil"]) == 0
    hit = json.loads(capsys.readouterr().out)["passages"][0]
    assert (Path(hit["source"]).name, hit["page"], hit["section"]) == (
        "manual.pdf",
        2,
        "Hydraulics",
    )
    assert hit["title"] == "Press Brake Manual — Hydraulics"
    assert main([*base, "retrieve", "--collection", "m", "-k", "1", "--json", "wheel nuts"]) == 0
    hit = json.loads(capsys.readouterr().out)["passages"][0]
    assert (Path(hit["source"]).name, hit["page"], hit["section"]) == ("car.docx", None, "Wheels")
    assert main([*base, "retrieve", "--collection", "m", "-k", "1", "wheel nuts"]) == 0
    assert "car.docx" in capsys.readouterr().out

    assert main([*base, "index", "list", "--json"]) == 0
    listed = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
    assert listed["m"]["files"] == 2 and listed["wiki"]["kind"] == "wikipedia"
    assert (listed["m"]["search"], listed["m"]["dense"]) == ("bm25", [])
    assert main([*base, "--set", "retrieval.kind=hybrid", "index", "list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("m "))
    name, kind, _passages, files, search, _folder = row.split()
    assert (kind, files, search) == ("documents", "2", "hybrid")


def test_bad_command_lines_get_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--set", f"home={tmp_path / 'home'}"]
    assert main([*base, "index", "build", "--docs", str(tmp_path)]) == 2
    assert "--docs needs --name" in capsys.readouterr().err
    assert main([*base, "index", "build", "--docs", str(tmp_path / "nope"), "--name", "x"]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    assert (
        main([*base, "index", "build", "--docs", str(tmp_path), "--name", "x", "--limit", "3"]) == 2
    )
    assert "--limit apply to the Wikipedia index" in capsys.readouterr().err
    assert main([*base, "retrieve", "--collection", "nope", "anything"]) == 2
    assert "unknown collection 'nope' (known: wiki)" in capsys.readouterr().err


def test_ask_answers_from_a_collection_and_cites_file_and_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    write_pdf(
        docs / "manual.pdf",
        [("Safety", "Wear goggles."), ("Hydraulics", "Change the hydraulic oil every 2000 hours.")],
        title="Press Brake Manual",
    )
    base = [
        "--set", f"home={tmp_path / 'home'}", "--set", "retrieval.backend=numpy",
        "--set", "engine.backend=fake", "--set", "reranker.kind=none",
    ]  # fmt: skip
    assert main([*base, "index", "build", "--docs", str(docs), "--name", "m", "--quiet"]) == 0
    capsys.readouterr()
    question = "How often is the hydraulic oil changed?"
    assert main([*base, "ask", "--collection", "m", "--mode", "rag", question]) == 0
    out = capsys.readouterr().out
    assert f"Press Brake Manual — Hydraulics ({docs / 'manual.pdf'}, page 2" in out
    assert main([*base, "ask", "--collection", "m", "--mode", "rag", "--json", question]) == 0
    top = json.loads(capsys.readouterr().out)["passages"][0]
    assert (Path(top["source"]).name, top["page"], top["section"]) == (
        "manual.pdf",
        2,
        "Hydraulics",
    )
