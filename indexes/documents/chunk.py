"""Passages of about the size the pipelines are tuned for, cut on the document's structure.

A passage never crosses a heading or (PDF) a page, so its section and page are exact.
Within a section, whole paragraphs are packed up to ``max_words``; a passage that has
reached ``min_words`` ends at a paragraph break, a shorter one is filled up sentence by
sentence; a sentence longer than ``max_words`` (a table, a code listing) is cut between
words. A passage is a slice of :attr:`Document.text`, so its span is exact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from indexes.documents.document import Block, Document
from typed_rag.finishing.sentences import NOT_ABBREVIATION

MAX_WORDS = 200
MIN_WORDS = 100
_SENTENCE_BREAK = re.compile(rf"{NOT_ABBREVIATION}(?<=[.!?])\s+(?![a-z])|\n+")
_WORD = re.compile(r"\S+")
_TAIL_WORDS = 20  # a section's last passage shorter than this joins the one before


@dataclass(frozen=True)
class Chunk:
    text: str
    section: str | None
    page: int | None
    start: int
    end: int


@dataclass
class _Unit:
    start: int
    end: int
    words: int


def _word_windows(text: str, offset: int, max_words: int) -> list[_Unit]:
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    return [
        _Unit(offset + words[i][0], offset + words[min(i + max_words, len(words)) - 1][1], n)
        for i in range(0, len(words), max_words)
        for n in [min(max_words, len(words) - i)]
    ]


def _sentences(block: Block, max_words: int) -> list[_Unit]:
    """The block's sentences, each at most ``max_words`` (longer ones cut between words)."""
    out: list[_Unit] = []
    start = 0
    text = block.text
    for m in [*_SENTENCE_BREAK.finditer(text), None]:
        end = m.start() if m else len(text)
        piece = text[start:end]
        n = len(piece.split())
        if n > max_words:
            out.extend(_word_windows(piece, block.start + start, max_words))
        elif n:
            lead = len(piece) - len(piece.lstrip())
            out.append(_Unit(block.start + start + lead, block.start + end, n))
        start = m.end() if m else len(text)
    return out


def _pack(blocks: list[Block], min_words: int, max_words: int) -> list[_Unit]:
    chunks: list[_Unit] = []
    current: _Unit | None = None

    def add(unit: _Unit) -> None:
        nonlocal current
        if current is None:
            current = _Unit(unit.start, unit.end, unit.words)
        else:
            current = _Unit(current.start, unit.end, current.words + unit.words)

    def emit() -> None:
        nonlocal current
        if current is not None:
            chunks.append(current)
            current = None

    for block in blocks:
        words = len(block.text.split())
        have = current.words if current else 0
        if have + words <= max_words:
            add(_Unit(block.start, block.end, words))
            continue
        if have >= min_words:
            emit()
            if words <= max_words:
                add(_Unit(block.start, block.end, words))
                continue
        for sentence in _sentences(block, max_words):
            if current is not None and current.words + sentence.words > max_words:
                emit()
            add(sentence)
    emit()
    if len(chunks) > 1 and chunks[-1].words < _TAIL_WORDS:
        last = chunks.pop()
        if chunks[-1].words + last.words <= max_words + _TAIL_WORDS:
            chunks[-1] = _Unit(chunks[-1].start, last.end, chunks[-1].words + last.words)
        else:
            chunks.append(last)
    return chunks


def chunk_document(
    doc: Document, min_words: int = MIN_WORDS, max_words: int = MAX_WORDS
) -> list[Chunk]:
    """The document's passages in reading order."""
    if not 0 < min_words <= max_words:
        raise ValueError("need 0 < min_words <= max_words")
    out: list[Chunk] = []
    headings: list[tuple[int, str]] = []  # the open headings, outermost first
    run: list[Block] = []

    def flush() -> None:
        if not run:
            return
        section = headings[-1][1] if headings else None
        for unit in _pack(run, min_words, max_words):
            out.append(
                Chunk(doc.text[unit.start : unit.end], section, run[0].page, unit.start, unit.end)
            )
        run.clear()

    for block in doc.blocks:
        if block.kind == "heading":
            flush()
            while headings and headings[-1][0] >= block.level:
                headings.pop()
            headings.append((block.level, block.text))
            continue
        if run and run[-1].page != block.page:
            flush()
        run.append(block)
    flush()
    return out
