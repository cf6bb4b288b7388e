"""Where each passage of a document collection came from: file, page, section, span.

A Wikipedia index has no such file; a collection built from documents
(:mod:`indexes.documents`) writes one beside its passage store, so every retriever over
that folder (BM25, dense, hybrid) returns passages that cite a file and page. Two files,
like the store: ``passages.meta.jsonl`` holds one JSON object per document number and
``passages.meta.offsets`` ``n + 1`` little-endian int64 byte offsets of its lines, so a
hit's metadata is read without loading the rest.
"""

from __future__ import annotations

import json
import os
from array import array
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from typed_rag.errors import UserError

META_FILE = "passages.meta.jsonl"
META_OFFSETS_FILE = "passages.meta.offsets"


@dataclass(frozen=True)
class PassageMeta:
    """One passage's origin. ``page`` is 1-based (PDF only); ``span`` is the passage's
    character range in the text extracted from its file."""

    source: str
    doc_title: str
    section: str | None = None
    page: int | None = None
    span: tuple[int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["span"] = list(self.span) if self.span is not None else None
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PassageMeta:
        span = d.get("span")
        return cls(
            source=str(d["source"]),
            doc_title=str(d.get("doc_title", "")),
            section=d.get("section"),
            page=d.get("page"),
            span=(int(span[0]), int(span[1])) if span else None,
        )


def has_meta(folder: Path) -> bool:
    return (folder / META_FILE).is_file()


class PassageMetaWriter:
    """Append one record per stored passage, in document order."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._lines: BinaryIO = (folder / META_FILE).open("wb")
        self._offsets = array("q", [0])
        self._folder = folder
        self.count = 0

    def add(self, meta: PassageMeta) -> None:
        line = json.dumps(meta.to_json(), ensure_ascii=False).encode("utf-8") + b"\n"
        self._lines.write(line)
        self._offsets.append(self._offsets[-1] + len(line))
        self.count += 1

    def close(self) -> None:
        self._lines.close()
        (self._folder / META_OFFSETS_FILE).write_bytes(self._offsets.tobytes())

    def __enter__(self) -> PassageMetaWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PassageMetaReader:
    """Read-only view of a written metadata file; records are decoded on demand."""

    def __init__(self, folder: Path) -> None:
        offsets_path = folder / META_OFFSETS_FILE
        if not offsets_path.is_file():
            raise UserError(f"passage metadata incomplete: {offsets_path} is missing")
        self._offsets = np.fromfile(offsets_path, dtype="<i8")
        self._path = folder / META_FILE
        if self._offsets.size == 0 or self._path.stat().st_size != int(self._offsets[-1]):
            raise UserError(f"passage metadata damaged: {self._path} does not match its offsets")
        self._file = self._path.open("rb")

    def __len__(self) -> int:
        return int(self._offsets.size - 1)

    def get(self, doc: int) -> PassageMeta:
        start, end = int(self._offsets[doc]), int(self._offsets[doc + 1])
        # pread: no shared file position, so threads may search at the same time
        data = os.pread(self._file.fileno(), end - start, start)
        return PassageMeta.from_json(json.loads(data))

    def close(self) -> None:
        self._file.close()
