"""``manifest.json`` of an index folder: what it was built from and with which settings.

The loaders read it to check an index's format and files before opening it; the builds
in :mod:`indexes` write it, and ``index build --if-missing`` compares it with the
current inputs (:mod:`indexes.freshness`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

MANIFEST_FILE = "manifest.json"
FORMAT_VERSION = 1
INDEX_FILES = (
    "data.csc.index.npy",
    "indices.csc.index.npy",
    "indptr.csc.index.npy",
    "vocab.index.json",
    "params.index.json",
    "passages.bin",
    "passages.offsets",
)


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest, or None if the folder holds no (readable) index manifest."""
    try:
        return json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    tmp = folder / (MANIFEST_FILE + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, folder / MANIFEST_FILE)
