"""Passage store: id, title and text by document number, without loading the text.

Two files in the index folder: ``passages.bin`` holds every passage's id, title and
text as UTF-8, one after the other; ``passages.offsets`` holds ``3 * n + 1`` little-endian
int64 byte offsets (field ``f`` of document ``i`` is ``bin[off[3i+f]:off[3i+f+1]]``).
Both are memory-mapped when read, so opening a 21M-passage store costs no RAM beyond the
pages that searches touch (the offsets are 0.5 GB on disk for 21M passages).
"""

from __future__ import annotations

import mmap
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np

from typed_rag.errors import UserError
from typed_rag.retrieval.base import Passage
from typed_rag.retrieval.passage_meta import PassageMetaReader, has_meta

TEXT_FILE = "passages.bin"
OFFSETS_FILE = "passages.offsets"
_FIELDS = 3  # id, title, text


class PassageStoreWriter:
    """Append passages in document order; offsets are flushed to disk in blocks."""

    def __init__(self, folder: Path, flush_every: int = 1 << 16) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._text: BinaryIO = (folder / TEXT_FILE).open("wb")
        self._offsets: BinaryIO = (folder / OFFSETS_FILE).open("wb")
        self._pos = 0
        self._buffer = array("q", [0])
        self._flush_every = flush_every
        self.count = 0

    def add(self, pid: str, title: str, text: str) -> int:
        """Store one passage; return its document number."""
        for field in (pid, title, text):
            data = field.encode("utf-8")
            self._text.write(data)
            self._pos += len(data)
            self._buffer.append(self._pos)
        self.count += 1
        if len(self._buffer) >= self._flush_every:
            self._flush()
        return self.count - 1

    def _flush(self) -> None:
        self._offsets.write(self._buffer.tobytes())
        self._buffer = array("q")

    def close(self) -> None:
        self._flush()
        self._text.close()
        self._offsets.close()

    def __enter__(self) -> PassageStoreWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PassageStore:
    """Read-only, memory-mapped view of a written store."""

    def __init__(self, folder: str | Path) -> None:
        folder = Path(folder)
        text_path, offsets_path = folder / TEXT_FILE, folder / OFFSETS_FILE
        for path in (text_path, offsets_path):
            if not path.is_file():
                raise UserError(f"passage store incomplete: {path} is missing")
        self._offsets = np.memmap(offsets_path, dtype="<i8", mode="r")
        if (self._offsets.size - 1) % _FIELDS:
            raise UserError(f"passage store damaged: {offsets_path} has a wrong size")
        self._file = text_path.open("rb")
        size = text_path.stat().st_size
        if size != int(self._offsets[-1]):
            raise UserError(f"passage store damaged: {text_path} size does not match its offsets")
        # mmap cannot map an empty file
        self._blob: mmap.mmap | bytes = (
            mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        )
        self._n = (self._offsets.size - 1) // _FIELDS
        # a document collection's file/page/section of each passage (None for Wikipedia)
        self.meta = PassageMetaReader(folder) if has_meta(folder) else None
        if self.meta is not None and len(self.meta) != self._n:
            raise UserError(f"passage store damaged: {folder} has metadata for another count")

    def __len__(self) -> int:
        return self._n

    def get(self, doc: int) -> tuple[str, str, str]:
        """``(id, title, text)`` of document number ``doc``."""
        if not 0 <= doc < self._n:
            raise IndexError(f"document {doc} out of range 0..{self._n - 1}")
        o = self._offsets[doc * _FIELDS : doc * _FIELDS + _FIELDS + 1].tolist()
        blob = self._blob
        return (
            blob[o[0] : o[1]].decode("utf-8"),
            blob[o[1] : o[2]].decode("utf-8"),
            blob[o[2] : o[3]].decode("utf-8"),
        )

    def get_many(self, docs: Sequence[int]) -> list[tuple[str, str, str]]:
        return [self.get(int(d)) for d in docs]

    def passages(
        self, docs: np.ndarray, scores: np.ndarray, positive_only: bool = False
    ) -> list[list[Passage]]:
        """Ranked hits (one row of document numbers and scores per query) as Passages.

        ``positive_only`` drops scores <= 0 (BM25's documents that match no term).
        """
        out: list[list[Passage]] = []
        for row_docs, row_scores in zip(docs.tolist(), scores.tolist(), strict=True):
            hits: list[Passage] = []
            for doc, score in zip(row_docs, row_scores, strict=True):
                if positive_only and score <= 0.0:
                    continue
                pid, title, text = self.get(doc)
                hit = Passage(id=pid, title=title, text=text, score=float(score))
                if self.meta is not None:
                    m = self.meta.get(doc)
                    hit.source, hit.page, hit.section = m.source, m.page, m.section
                hits.append(hit)
            out.append(hits)
        return out

    def get_id(self, doc: int) -> str:
        """Only the passage id (no text decoding), e.g. for evaluation runs."""
        o = self._offsets[doc * _FIELDS : doc * _FIELDS + 2].tolist()
        return self._blob[o[0] : o[1]].decode("utf-8")

    def close(self) -> None:
        if self.meta is not None:
            self.meta.close()
        if isinstance(self._blob, mmap.mmap):
            self._blob.close()
        self._file.close()
