"""``typed-rag index build``, ``retrieve`` and ``corpus download`` through the real CLI."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from cli.main import main


def _base(tmp_path: Path, corpus: Path) -> list[str]:
    return [
        "--set",
        f"home={tmp_path / 'home'}",
        "--set",
        f"corpus.path={corpus}",
        "--set",
        "retrieval.backend=numpy",
    ]


def test_build_then_retrieve(
    tmp_path: Path, tiny_corpus: Path, capsys: pytest.CaptureFixture
) -> None:
    base = _base(tmp_path, tiny_corpus)
    assert main([*base, "index", "build", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "indexed 16 passages" in out and "passages/s" in out

    assert main([*base, "index", "build", "--if-missing", "--quiet"]) == 0
    assert "up to date; nothing to do" in capsys.readouterr().out

    assert main([*base, "retrieve", "why do leaves change color in autumn", "-k", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(" 1.") and "p1" in lines[0] and "Autumn leaf color" in lines[0]
    assert lines[1].strip().startswith("Leaves change color in autumn because chlorophyll")
    assert lines[-1].startswith("(2 passages; load")


def test_retrieve_json(tmp_path: Path, tiny_corpus: Path, capsys: pytest.CaptureFixture) -> None:
    base = _base(tmp_path, tiny_corpus)
    assert main([*base, "index", "build", "--quiet"]) == 0
    capsys.readouterr()
    assert main([*base, "retrieve", "bread yeast", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    passages = payload["passages"]
    assert [p["rank"] for p in passages] == list(range(1, len(passages) + 1))
    assert {p["id"] for p in passages[:2]} == {"p7", "p8"}
    assert set(passages[0]) == {"rank", "score", "id", "title", "text", "source", "page", "section"}
    assert (passages[0]["source"], passages[0]["page"], passages[0]["section"]) == (None,) * 3


def test_build_options_and_custom_out(
    tmp_path: Path, tiny_corpus: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "idx"
    args = ["index", "build", "--out", str(out), "--k1", "1.5", "--b", "0.7", "--limit", "10"]
    assert main([*_base(tmp_path, tiny_corpus), *args, "--method", "atire", "--quiet"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["params"]["k1"] == 1.5 and manifest["params"]["method"] == "atire"
    assert manifest["counts"]["passages"] == 10
    capsys.readouterr()
    assert main([*_base(tmp_path, tiny_corpus), "retrieve", "bread", "--index", str(out)]) == 0
    assert "p7" in capsys.readouterr().out


def test_on_error_stop_exits_2_with_line(
    tmp_path: Path, tiny_corpus: Path, capsys: pytest.CaptureFixture
) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text(tiny_corpus.read_text() + 'p99\t"no title column"\n', encoding="utf-8")
    base = _base(tmp_path, bad)
    assert main([*base, "index", "build", "--on-error", "stop", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("typed-rag: error: ") and "line 18: wrong column count: 2" in err
    assert "Traceback" not in err

    assert main([*base, "index", "build", "--quiet"]) == 0  # default: skip and report
    assert "skipped 1 malformed rows (first: line 18: wrong column count" in capsys.readouterr().out


def test_user_errors_exit_2(
    tmp_path: Path, tiny_corpus: Path, capsys: pytest.CaptureFixture
) -> None:
    base = _base(tmp_path, tiny_corpus)
    assert main([*base, "retrieve", "anything"]) == 2
    assert "no index at" in capsys.readouterr().err
    assert main([*base, "index", "build", "--corpus", str(tmp_path / "nope.tsv")]) == 2
    assert "corpus file not found" in capsys.readouterr().err
    assert main([*base, "index", "build", "--limit", "0"]) == 2
    assert "--limit must be a positive number" in capsys.readouterr().err


def test_build_from_url_and_download_command(
    tmp_path: Path, tiny_corpus: Path, file_server, capsys: pytest.CaptureFixture
) -> None:
    data = gzip.compress(tiny_corpus.read_bytes())
    file_server.files["psgs.tsv.gz"] = data
    base = _base(tmp_path, tiny_corpus)
    url = file_server.url("psgs.tsv.gz")
    assert main([*base, "index", "build", "--corpus", url, "--quiet"]) == 0
    assert "indexed 16 passages" in capsys.readouterr().out
    assert (tmp_path / "home" / "corpora" / "psgs.tsv.gz").read_bytes() == data

    sha = hashlib.sha256(data).hexdigest()
    dl = ["corpus", "download", "dpr-wiki", "--url", url, "--out", str(tmp_path / "dl"), "--quiet"]
    assert main([*base, *dl, "--sha256", sha]) == 0
    out = capsys.readouterr().out
    assert f"sha256 {sha} (verified sha256)" in out
    assert (tmp_path / "dl" / "psgs_w100.tsv.gz").read_bytes() == data

    assert main([*base, *dl, "--sha256", "f" * 64, "--force"]) == 2
    assert "checksum mismatch" in capsys.readouterr().err
