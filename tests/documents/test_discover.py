"""Which files a build reads, and the reasons it gives for the ones it does not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from indexes.documents.discover import discover
from indexes.documents.parse import SUPPORTED
from tests.documents.makers import write_symlink_loops
from typed_rag.errors import UserError


def reasons(found) -> dict[str, str]:
    return {Path(s.path).name: s.reason for s in found.skipped}


def test_walks_folders_and_reports_what_it_leaves_out(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    (root / "sub" / ".git").mkdir(parents=True)
    (root / "a.md").write_text("# A\n\ntext")
    (root / "sub" / "b.txt").write_text("text")
    (root / "sub" / ".git" / "config.txt").write_text("hidden")
    (root / "photo.png").write_bytes(b"\x89PNG")
    (root / "empty.txt").write_bytes(b"")
    (root / "huge.txt").write_text("x" * 5000)
    (root / "dangling.md").symlink_to(root / "gone.md")
    write_symlink_loops(root)
    found = discover([root], SUPPORTED, max_bytes=4000)
    assert [Path(f.path).name for f in found.files] == ["a.md", "b.txt"]
    why = reasons(found)
    assert why["empty.txt"] == "empty file"
    assert why["huge.txt"].startswith("too large: 0.0 MB, over the limit")
    assert "documents.max_file_mb" in why["huge.txt"]
    assert why["back-to-top"].startswith("symlink loop (a link back to the folder")
    assert why["self.txt"].startswith("symlink loop")
    assert why["dangling.md"].startswith("broken symlink")
    assert found.unsupported == {".png": 1}
    assert "config.txt" not in why


def test_paths_stay_as_the_user_gave_them_and_files_are_read_once(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.txt").write_text("text")
    (tmp_path / "alias").symlink_to(real)
    found = discover([real, tmp_path / "alias", real / "a.txt"], SUPPORTED, 10_000)
    assert [f.path for f in found.files] == [str(real / "a.txt")]
    assert reasons(found) == {"alias": f"same folder as {real} (read once)"}


def test_a_named_file_of_another_type_is_reported(tmp_path: Path) -> None:
    (tmp_path / "slides.pptx").write_bytes(b"PK")
    found = discover([tmp_path / "slides.pptx"], SUPPORTED, 10_000)
    assert reasons(found)["slides.pptx"].startswith("unsupported file type .pptx")


def test_a_missing_path_is_an_error_before_anything_is_read(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such file or folder: .*nope"):
        discover([tmp_path / "nope"], SUPPORTED, 10_000)


def test_a_folder_that_cannot_be_listed_is_reported(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root lists every folder")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        found = discover([tmp_path], SUPPORTED, 10_000)
    finally:
        locked.chmod(0o755)
    assert reasons(found)["locked"] == "folder permission denied"
