"""Versions of a collection folder, switched atomically.

A collection ``NAME`` is a symbolic link to its current version ``.NAME.<time>`` beside
it. A build writes a new version, then points the link at it with one rename
(:func:`switch_to`): a reader opens the old version or the new one, never a half-written
one, and a build that crashes leaves the link on the previous version (its own leftovers
are removed by the next build, :func:`remove_leftovers`). One build per collection runs
at a time (:func:`build_lock`).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from typed_rag.errors import UserError


@contextmanager
def build_lock(folder: Path) -> Iterator[None]:
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise UserError(f"another build of collection {folder.name} is running") from None
        yield


def switch_to(version: Path, folder: Path) -> None:
    """Point ``folder`` (a symbolic link) at ``version`` in one rename; remove the old one."""
    old: Path | None = None
    if folder.is_symlink():
        old = folder.parent / os.readlink(folder)
    elif folder.exists():  # a plain folder (copied in by hand): moved aside first
        old = folder.parent / f".{folder.name}.old-{os.getpid()}"
        os.replace(folder, old)
    link = folder.parent / f".{folder.name}.link-{os.getpid()}"
    link.unlink(missing_ok=True)
    os.symlink(version.name, link)
    os.replace(link, folder)
    if old is not None and old.resolve() != version.resolve():
        shutil.rmtree(old, ignore_errors=True)


def remove_leftovers(folder: Path) -> None:
    """Versions that crashed builds left behind (never the one in use)."""
    current = folder.resolve() if folder.is_symlink() else None
    ours = re.compile(rf"^\.{re.escape(folder.name)}\.(\d+|link-\d+|old-\d+)$")
    for stale in folder.parent.iterdir():
        if not ours.match(stale.name) or (current is not None and stale.resolve() == current):
            continue
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)


def delete_collection(folder: Path) -> bool:
    """Remove collection ``folder``: its link, its current version and any leftovers, under
    the build lock (a running build of it makes this a :class:`UserError`). False if there
    was nothing to remove."""
    with build_lock(folder):
        existed = folder.is_symlink() or folder.exists()
        remove_leftovers(folder)
        if folder.is_symlink():
            target = folder.parent / os.readlink(folder)
            folder.unlink()
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target, ignore_errors=True)
        elif folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
    (folder.parent / f".{folder.name}.lock").unlink(missing_ok=True)
    return existed
