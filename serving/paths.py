"""No server path in a response: files are shown relative to their collection, the
server's folders by the setting that names them.

A documents build records each passage's file by its absolute path on the server (its
``source``, and its id ``PATH#N``), which the CLI shows as it is. Over HTTP that path says
where the server keeps its files, so every string of a response is rewritten: a file under
a collection's one folder as its path inside it (``manual.pdf``, ``sub/notes.md``); with
several roots, as ``<root name>/<path inside>``, a root that is a file as its name; the
server's home as ``<home>``. The default collection (``retrieval.index_dir``) is one like
the others when it was built from documents.

Error messages (a chat request's, ``/health``'s, a job's) are free text that may quote an
exception, so they get more: the index and the corpus by the setting that names them
(``<retrieval.index_dir>``, ``<corpus.path>``), and any absolute path still left as
``<path>/`` and its last part (``<path>/qwen.gguf``). Answers and passages keep their text
(a passage may well mention ``/usr/bin``); only their files' paths are rewritten.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from typed_rag.config import Settings
from typed_rag.retrieval.collections import COLLECTION_KEY, WIKI, collection_dir
from typed_rag.retrieval.manifest import read_manifest

# An absolute path in free text: "/" at the start or after a space, a quote, a bracket,
# "=" or ","; not this server's own routes (/v1/..., /health), which messages name.
_ABSOLUTE = re.compile(
    r"(?:^|(?<=[\s'\"`(\[{=,]))"
    r"(?!/(?:v1|health|metrics|ui|openapi\.json|favicon\.ico)\b)"
    r"/[^\s'\"`()\[\]{}<>,;:]+"
)
_LAST_PART = re.compile(r"[^/]*/?$")


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

    def message(self, value: str) -> str:
        """A free-text message: :meth:`text`, then any absolute path left hidden."""
        return hide_paths(self.text(value))

    def walk(self, value: Any) -> Any:
        """``value`` (JSON-like: dicts, lists, strings) with every string rewritten."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.walk(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.walk(v) for v in value]
        return value

    def with_roots(self, roots: Sequence[str]) -> PathScrubber:
        """This scrubber, and the files under ``roots`` relative to them."""
        return PathScrubber([*root_replacements(roots), *self.replacements])


def hide_paths(text: str) -> str:
    """Each absolute path in ``text`` as ``<path>/`` and its last part."""

    def hide(found: re.Match[str]) -> str:
        last = _LAST_PART.search(found.group(0).rstrip("/"))
        return "<path>/" + (last.group(0) if last else "")

    return _ABSOLUTE.sub(hide, text)


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


def folder_replacements(folder: str | Path, shown: str) -> list[tuple[str, str]]:
    """``folder`` (as given and with its links resolved) shown as ``shown``."""
    out: list[tuple[str, str]] = []
    for path in {str(Path(folder).expanduser().absolute()), os.path.realpath(folder)}:
        path = path.rstrip(os.sep)
        if path:  # never "/" itself
            out += [(path + os.sep, shown + "/"), (path, shown)]
    return out


def display_roots(roots: Sequence[str]) -> list[str]:
    """A collection's roots as a client sees them: their names."""
    return [os.path.basename(r.rstrip(os.sep)) or r for r in roots]


def display_model(model: str) -> str:
    """A model as a client sees it: a name, or a local file's or folder's name."""
    if os.path.isabs(model) or model.startswith("~"):
        return Path(model).name
    return model


class ServerPaths:
    """What requests may show of the server's disk: one scrubber per collection (read
    from its manifest once per version) for answers, and :meth:`message` for errors."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.home = PathScrubber(folder_replacements(settings.home, "<home>"))
        self.folders = PathScrubber(
            [
                *self.home.replacements,
                *folder_replacements(settings.index_dir, "<retrieval.index_dir>"),
                *folder_replacements(settings.corpus.path, "<corpus.path>"),
            ]
        )
        self._cache: dict[str, tuple[str, PathScrubber]] = {}
        self._lock = threading.Lock()

    def for_collection(self, name: str | None) -> PathScrubber:
        """What requests answered from collection ``name`` (None: the default) may show."""
        name = name or WIKI
        try:
            folder = collection_dir(self.settings, name)
        except Exception:  # noqa: BLE001 - a bad name has no files to hide
            return self.home
        version = os.path.realpath(folder)
        with self._lock:
            cached = self._cache.get(name)
            if cached is not None and cached[0] == version:
                return cached[1]
        section = (read_manifest(folder) or {}).get(COLLECTION_KEY) or {}
        scrubber = self.home.with_roots([str(r) for r in section.get("roots", [])])
        with self._lock:
            self._cache[name] = (version, scrubber)
        return scrubber

    def message(self, text: str, files: PathScrubber | None = None) -> str:
        """An error message as a client may read it; ``files``: how the files it may name
        read (a collection's :meth:`for_collection`), else those of the default one."""
        files = files or self.for_collection(None)
        return PathScrubber([*files.replacements, *self.folders.replacements]).message(text)
