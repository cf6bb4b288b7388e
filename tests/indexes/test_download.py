"""Resumable, checksum-checked downloads against a local HTTP server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from indexes.download import REGISTRY, download
from typed_rag.errors import UserError

PAYLOAD = os.urandom(3 * (1 << 20) + 12345)  # > chunk size, so progress and resume matter
SHA = hashlib.sha256(PAYLOAD).hexdigest()
MD5 = hashlib.md5(PAYLOAD).hexdigest()


def test_download_verifies_sha256(tmp_path: Path, file_server) -> None:
    file_server.files["c.tsv.gz"] = PAYLOAD
    dest = tmp_path / "out" / "c.tsv.gz"
    result = download(file_server.url("c.tsv.gz"), dest, sha256=SHA, show_progress=False)
    assert dest.read_bytes() == PAYLOAD
    assert (result.sha256, result.verified, result.bytes) == (SHA, "sha256", len(PAYLOAD))
    assert not dest.with_name("c.tsv.gz.part").exists()
    # present and valid: nothing is fetched again
    again = download(file_server.url("c.tsv.gz"), dest, sha256=SHA, show_progress=False)
    assert again.already_present and len(file_server.requests) == 1


def test_resume_after_interrupted_download(tmp_path: Path, file_server) -> None:
    file_server.files["c.tsv.gz"] = PAYLOAD
    file_server.cut_next_after = 1_500_000
    dest = tmp_path / "c.tsv.gz"
    part = tmp_path / "c.tsv.gz.part"
    with pytest.raises(UserError, match="run the same command again to resume"):
        download(file_server.url("c.tsv.gz"), dest, md5=MD5, show_progress=False)
    assert not dest.exists()
    kept = part.stat().st_size
    assert 0 < kept <= 1_500_000

    result = download(file_server.url("c.tsv.gz"), dest, md5=MD5, show_progress=False)
    assert file_server.requests[-1]["range"] == f"bytes={kept}-"
    assert result.resumed_from == kept and result.verified == "md5"
    assert dest.read_bytes() == PAYLOAD and result.sha256 == SHA  # hash covers both parts
    assert not part.exists()


def test_complete_part_file_is_finished_without_refetching(tmp_path: Path, file_server) -> None:
    file_server.files["c.bin"] = PAYLOAD
    (tmp_path / "c.bin.part").write_bytes(PAYLOAD)  # e.g. killed right before the rename
    result = download(file_server.url("c.bin"), tmp_path / "c.bin", sha256=SHA, show_progress=False)
    assert result.verified == "sha256" and (tmp_path / "c.bin").read_bytes() == PAYLOAD


def test_server_without_range_support_restarts(tmp_path: Path, file_server) -> None:
    file_server.files["c.bin"] = PAYLOAD
    file_server.honor_range = False
    (tmp_path / "c.bin.part").write_bytes(b"stale bytes from another file")
    result = download(file_server.url("c.bin"), tmp_path / "c.bin", sha256=SHA, show_progress=False)
    assert result.resumed_from == 0 and (tmp_path / "c.bin").read_bytes() == PAYLOAD


def test_checksum_mismatch_deletes_the_download(tmp_path: Path, file_server) -> None:
    file_server.files["c.bin"] = PAYLOAD
    dest = tmp_path / "c.bin"
    with pytest.raises(UserError) as info:
        download(file_server.url("c.bin"), dest, sha256="0" * 64, show_progress=False)
    assert "checksum mismatch for c.bin" in str(info.value) and SHA in str(info.value)
    assert not dest.exists() and not (tmp_path / "c.bin.part").exists()


def test_existing_file_with_wrong_checksum_is_reported(tmp_path: Path, file_server) -> None:
    dest = tmp_path / "c.bin"
    dest.write_bytes(b"something else")
    with pytest.raises(UserError, match="use --force"):
        download(file_server.url("c.bin"), dest, sha256=SHA, show_progress=False)
    file_server.files["c.bin"] = PAYLOAD
    result = download(file_server.url("c.bin"), dest, sha256=SHA, force=True, show_progress=False)
    assert result.verified == "sha256" and dest.read_bytes() == PAYLOAD


def test_http_errors_and_bad_checksum_flags(tmp_path: Path, file_server) -> None:
    with pytest.raises(UserError, match="HTTP 404"):
        download(file_server.url("missing"), tmp_path / "m", show_progress=False)
    with pytest.raises(UserError, match="--sha256 must be 64 hex digits"):
        download(file_server.url("x"), tmp_path / "x", sha256="abc", show_progress=False)
    with pytest.raises(UserError, match="interrupted"):
        download("http://127.0.0.1:9/x", tmp_path / "y", show_progress=False, timeout_s=2)


def test_registry_has_dpr_wiki_without_invented_checksums() -> None:
    dpr = REGISTRY["dpr-wiki"]
    assert dpr.url == "https://dl.fbaipublicfiles.com/dpr/wikipedia_split/psgs_w100.tsv.gz"
    assert dpr.sha256 is None and dpr.md5 is None
