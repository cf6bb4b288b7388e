"""What every reader returns: a document's title, extracted text and structure.

Readers (``read_pdf``, ``read_docx``, ``read_html``, ``read_markdown``, ``read_text``)
add headings and paragraphs to a :class:`DocumentBuilder` in reading order; the chunker
(:mod:`indexes.documents.chunk`) cuts passages from the blocks, and each block's span
points into :attr:`Document.text`, so a passage's character span is exact.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Literal

_SPACE = re.compile(r"\s+")
BLOCK_SEPARATOR = "\n\n"


class SkipFile(Exception):
    """A file that cannot be indexed; the message is the reason the build report shows."""


# A packed file (a DOCX is a zip; a PDF's pages are compressed streams) may unpack to at
# most this many bytes, or this many times its own size if more: a zip or PDF bomb (a
# few KB that unpack to GB, or take hours to parse) is skipped before it is read. Real
# files stay far below: a 7 MB, 1,151-page PDF manual has 26 MB of page content.
UNPACK_FLOOR = 32_000_000
UNPACK_RATIO = 32


def unpack_limit(packed: int) -> int:
    """The most bytes a file of ``packed`` bytes may unpack to."""
    return max(UNPACK_FLOOR, UNPACK_RATIO * packed)


def check_unpacked(what: str, unpacked: int, packed: int, bomb: str) -> None:
    """:class:`SkipFile` if ``what`` (``unpacked`` bytes, or more) is over the limit."""
    limit = unpack_limit(packed)
    if unpacked > limit:
        raise SkipFile(
            f"{what} unpacks to more than {limit / 1e6:g} MB from {packed / 1e6:.2f} MB, "
            f"over the limit ({UNPACK_FLOOR / 1e6:g} MB or {UNPACK_RATIO}x the file's size, "
            f"whichever is larger): a {bomb}?"
        )


@dataclass(frozen=True)
class Block:
    """A heading or a paragraph; ``start``/``end`` index :attr:`Document.text`."""

    kind: Literal["heading", "text"]
    text: str
    start: int
    end: int
    level: int = 1  # headings: 1 = top level
    page: int | None = None  # 1-based, PDF only


@dataclass
class Document:
    """One file's extracted content."""

    title: str
    text: str
    blocks: list[Block]
    pages: int | None = None  # PDF page count
    warnings: list[str] = field(default_factory=list)  # kept, but worth a line in the report


def clean(text: str) -> str:
    """Runs of white space (line breaks included) as one space, trimmed."""
    return _SPACE.sub(" ", text).strip()


def table_rows(rows: Sequence[Sequence[str]]) -> list[str]:
    """A table as paragraphs, one a row: the first (header) row's cells joined by " | ",
    every later row as "header: cell" for its non-empty cells. Empty cells are common
    (a feature matrix of ticks), and a row read without them ("AES-CBC | ✔ | ✔") credits
    its values to the wrong columns; paired with their headers, they cannot move."""
    if not rows:
        return []
    header = [clean(h) for h in rows[0]]
    out = [" | ".join(h for h in header if h)]
    for row in rows[1:]:
        cells = [
            f"{h}: {c}" if h and h != c else c
            for h, c in zip_longest(header, (clean(c) for c in row), fillvalue="")
            if c
        ]
        out.append(" | ".join(cells))
    return [line for line in out if line]


class DocumentBuilder:
    """Collects blocks in reading order and the text they index into."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._pos = 0
        self.blocks: list[Block] = []

    def _add(
        self, kind: Literal["heading", "text"], text: str, level: int, page: int | None
    ) -> None:
        if not text:
            return
        if self._parts:
            self._parts.append(BLOCK_SEPARATOR)
            self._pos += len(BLOCK_SEPARATOR)
        start = self._pos
        self._parts.append(text)
        self._pos += len(text)
        self.blocks.append(Block(kind, text, start, self._pos, level, page))

    def heading(self, text: str, level: int = 1, page: int | None = None) -> None:
        self._add("heading", clean(text).rstrip("¶ "), max(1, level), page)  # Sphinx permalinks

    def paragraph(self, text: str, page: int | None = None, *, keep_lines: bool = False) -> None:
        """Add a paragraph; ``keep_lines`` keeps its line breaks (code, tables)."""
        if keep_lines:
            lines = [" ".join(line.split()) for line in text.splitlines()]
            self._add("text", "\n".join(x for x in lines if x), 1, page)
        else:
            self._add("text", clean(text), 1, page)

    @property
    def has_text(self) -> bool:
        return any(b.kind == "text" for b in self.blocks)

    def build(self, title: str, pages: int | None = None) -> Document:
        return Document(
            title=clean(title), text="".join(self._parts), blocks=self.blocks, pages=pages
        )
