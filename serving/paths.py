"""No server path in a response: a collection's files are shown relative to the collection.

A documents build records each passage's file by its absolute path on the server (its
``source``, and its id ``PATH#N``), which the CLI shows as it is. Over HTTP that path says
where the server keeps its files, so every string of a response is rewritten: a file under
a collection's one folder as its path inside it (``manual.pdf``, ``sub/notes.md``); with
several roots, as ``<root name>/<path inside>``, a root that is a file as its name; the
server's home as ``<home>``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from typed_rag.config import Settings
from typed_rag.retrieval.collections import COLLECTION_KEY, WIKI, collection_dir
from typed_rag.retrieval.manifest import read_manifest


class PathScrubber:
    """Rewrites server paths in strings (longest prefix first) to what a client may see."""

    def __init__(self, replacements: Sequence[tuple[str, str]]) -> None:
        self.replacements = sorted(
            ((old, new) for old, new in replacements if old), key=lambda r: -len(r[0])
        )

    def text(self, value: str) -> str:
        for old, new in self.replacements:
            if old in value:
                value = value.replace(old, new)
        return value

    def walk(self, value: Any) -> Any:
        """``value`` (JSON-like: dicts, lists, strings) with every string rewritten."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.walk(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.walk(v) for v in value]
        return value


def root_replacements(roots: Sequence[str]) -> list[tuple[str, str]]:
    """How the files under ``roots`` read relative to their collection."""
    out: list[tuple[str, str]] = []
    for root in roots:
        root = root.rstrip(os.sep) or os.sep
        name = os.path.basename(root)
        if os.path.isdir(root) or not os.path.splitext(root)[1]:
            out.append((root + os.sep, "" if len(roots) == 1 else name + os.sep))
            out.append((root, name))
        else:  # a file named on the command line
            out.append((root, name))
    return out


def display_roots(roots: Sequence[str]) -> list[str]:
    """A collection's roots as a client sees them: their names."""
    return [os.path.basename(r.rstrip(os.sep)) or r for r in roots]


class CollectionPaths:
    """The scrubber of each collection, read from its manifest once per version."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        home = str(settings.home.expanduser().absolute())
        self._home = [(home + os.sep, "<home>/"), (home, "<home>")]
        self._cache: dict[str, tuple[str, PathScrubber]] = {}
        self._lock = threading.Lock()

    def for_collection(self, name: str | None) -> PathScrubber:
        """What requests answered from collection ``name`` (None: the default) may show."""
        if name is None or name == WIKI:
            return PathScrubber(self._home)
        try:
            folder = collection_dir(self.settings, name)
        except Exception:  # noqa: BLE001 - a bad name has no files to hide
            return PathScrubber(self._home)
        version = os.path.realpath(folder)
        with self._lock:
            cached = self._cache.get(name)
            if cached is not None and cached[0] == version:
                return cached[1]
        section = (read_manifest(folder) or {}).get(COLLECTION_KEY) or {}
        roots = [str(r) for r in section.get("roots", [])]
        scrubber = PathScrubber([*root_replacements(roots), *self._home])
        with self._lock:
            self._cache[name] = (version, scrubber)
        return scrubber
