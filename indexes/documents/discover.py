"""Which files a documents build reads: the given files and everything under the folders.

Folders are walked recursively in name order, following symbolic links, but never into
a folder twice: a link back to a folder being walked is a symlink loop and is reported as
such, as are links that point nowhere or at themselves. Hidden files and folders (``.git``)
are not read; files of unsupported types inside a folder are counted, not reported one by
one; a file named on the command line is always reported. Empty files and files over the
size limit are skipped here, before they are read.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from typed_rag.errors import UserError


@dataclass(frozen=True)
class Found:
    """A file to read: its path as the user reaches it (absolute, links not resolved)."""

    path: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


@dataclass
class Discovery:
    files: list[Found] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    unsupported: Counter[str] = field(default_factory=Counter)  # suffix -> files in folders


def _stat_reason(path: str, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop (the link points back at itself)"
    if exc.errno == errno.ENOENT and os.path.islink(path):
        return f"broken symlink (points to {os.readlink(path)}, which does not exist)"
    if exc.errno == errno.EACCES:
        return "permission denied"
    return f"cannot read: {exc.strerror or exc}"


class _Walk:
    def __init__(self, suffixes: frozenset[str], max_bytes: int) -> None:
        self.suffixes = suffixes
        self.max_bytes = max_bytes
        self.out = Discovery()
        self._files: dict[tuple[int, int], str] = {}
        self._folders: dict[tuple[int, int], str] = {}

    def file(self, path: str, st: os.stat_result, named: bool) -> None:
        suffix = os.path.splitext(path)[1].lower()
        if suffix not in self.suffixes:
            if named:
                kinds = ", ".join(sorted(self.suffixes))
                self.skip(path, f"unsupported file type {suffix or '(none)'} (supported: {kinds})")
            else:
                self.out.unsupported[suffix or "(none)"] += 1
            return
        key = (st.st_dev, st.st_ino)
        if key in self._files:
            if self._files[key] != path:
                self.skip(path, f"same file as {self._files[key]} (read once)")
            return
        self._files[key] = path
        if st.st_size == 0:
            self.skip(path, "empty file")
        elif st.st_size > self.max_bytes:
            self.skip(
                path,
                f"too large: {st.st_size / 1e6:.1f} MB, over the limit of "
                f"{self.max_bytes / 1e6:.1f} MB (documents.max_file_mb)",
            )
        else:
            self.out.files.append(Found(path, st.st_size, st.st_mtime_ns))

    def folder(self, path: str, st: os.stat_result, ancestors: tuple[str, ...]) -> None:
        key = (st.st_dev, st.st_ino)
        if key in self._folders:
            first = self._folders[key]
            if first in ancestors:
                self.skip(path, f"symlink loop (a link back to the folder {first})")
            elif first != path:
                self.skip(path, f"same folder as {first} (read once)")
            return
        self._folders[key] = path
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError as exc:
            self.skip(path, f"folder {_stat_reason(path, exc)}")
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            self.entry(entry.path, (*ancestors, path), named=False)

    def entry(self, path: str, ancestors: tuple[str, ...], named: bool) -> None:
        try:
            st = os.stat(path)  # follows links
        except OSError as exc:
            self.skip(path, _stat_reason(path, exc))
            return
        if stat.S_ISDIR(st.st_mode):
            self.folder(path, st, ancestors)
        elif stat.S_ISREG(st.st_mode):
            self.file(path, st, named)
        else:
            self.skip(path, "not a regular file (a device, socket or pipe)")

    def skip(self, path: str, reason: str) -> None:
        self.out.skipped.append(Skipped(path, reason))


def absolute(path: str | Path) -> str:
    """The path as the user names it, made absolute (``..`` removed, links kept)."""
    return os.path.abspath(os.path.expanduser(str(path)))


def discover(paths: Sequence[str | Path], suffixes: Iterable[str], max_bytes: int) -> Discovery:
    """Every readable file of a supported type under ``paths``; the rest with reasons."""
    if not paths:
        raise UserError("no documents given: pass one or more files or folders")
    walk = _Walk(frozenset(suffixes), max_bytes)
    for root in paths:
        path = absolute(root)
        if not os.path.lexists(path):
            raise UserError(f"no such file or folder: {root}")
        walk.entry(path, (), named=True)
    return walk.out
