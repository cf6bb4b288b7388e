"""The ``collection`` section of a document collection's ``manifest.json``.

It records, per file, what the next build needs to leave the file alone: its size,
modification time and sha256 (a file whose size and time are unchanged is not read
again; one whose bytes hash the same is kept), where its passages sit in the store, and
what was said about it. Skipped files are kept with their reasons (printed by the build
and listed by ``GET /v1/collections``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from typed_rag.retrieval.collections import COLLECTION_KEY
from typed_rag.retrieval.manifest import read_manifest

# Bumped when parsing or chunking changes what a file yields: every file is read again.
COLLECTION_VERSION = 2  # 2: table rows paired with their column headers


@dataclass
class FileRecord:
    """One indexed file."""

    sha256: str
    size: int
    mtime_ns: int
    title: str
    first: int  # document number of its first passage in the store
    passages: int
    pages: int | None = None
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FileRecord:
        return cls(
            sha256=str(d["sha256"]),
            size=int(d["size"]),
            mtime_ns=int(d["mtime_ns"]),
            title=str(d.get("title", "")),
            first=int(d["first"]),
            passages=int(d["passages"]),
            pages=d.get("pages"),
            warnings=list(d.get("warnings", [])),
        )


@dataclass
class SkippedRecord:
    """A file left out, and why; size and time let an unchanged bad file go unread."""

    path: str
    reason: str
    size: int | None = None
    mtime_ns: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class CollectionState:
    """What the last build of a collection left (empty for a new one)."""

    roots: list[str] = field(default_factory=list)
    files: dict[str, FileRecord] = field(default_factory=dict)
    skipped: dict[str, SkippedRecord] = field(default_factory=dict)
    chunking: dict[str, int] = field(default_factory=dict)
    version: int = COLLECTION_VERSION

    def section(self, extra: dict[str, Any]) -> dict[str, Any]:
        """The manifest section, with ``extra`` (counts, the last build's report)."""
        return {
            "version": self.version,
            "roots": self.roots,
            "chunking": self.chunking,
            "files": {path: rec.to_json() for path, rec in self.files.items()},
            "skipped": [rec.to_json() for rec in self.skipped.values()],
            **extra,
        }


def read_state(folder: Path) -> CollectionState | None:
    """The state of the collection in ``folder``; None when there is none (or unreadable)."""
    manifest = read_manifest(folder)
    section = (manifest or {}).get(COLLECTION_KEY)
    if not isinstance(section, dict):
        return None
    try:
        return CollectionState(
            roots=list(section.get("roots", [])),
            files={p: FileRecord.from_json(r) for p, r in section.get("files", {}).items()},
            skipped={
                r["path"]: SkippedRecord(r["path"], r["reason"], r.get("size"), r.get("mtime_ns"))
                for r in section.get("skipped", [])
            },
            chunking=dict(section.get("chunking", {})),
            version=int(section.get("version", 0)),
        )
    except (KeyError, TypeError, ValueError):
        return None  # a damaged manifest: the build reads every file again
