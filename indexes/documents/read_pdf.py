"""PDF: the text layer of each page, read by pypdf, with the outline as sections.

pypdf is pure Python (no system libraries) and reads the text layer; it does not do OCR,
so a PDF none of whose pages has text (a scan) is skipped with that reason, and pages
without text are counted in the report. An encrypted PDF that opens with the empty
password (owner-password only, common) is read; one that needs a password is skipped.

Structure: each page's lines are joined into paragraphs (a short line ending a sentence
ends its paragraph; a word hyphenated at a line end is joined again), running headers
and footers (lines repeated at the top or bottom of many pages, numbers aside) are
dropped, and the PDF's outline (bookmarks) gives the section headings, placed where
their title appears on their page.
"""

from __future__ import annotations

import io
import logging
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pypdf
from pypdf.errors import LimitReachedError
from pypdf.generic import ArrayObject, StreamObject

from indexes.documents.document import (
    Document,
    DocumentBuilder,
    SkipFile,
    check_unpacked,
    clean,
    unpack_limit,
)

_MIN_PAGE_CHARS = 20  # a page with fewer non-space characters has no text layer to speak of
_EDGE_LINES = 2  # lines at the top and bottom of a page that may be running headers
_DIGITS = re.compile(r"\d+")
_SENTENCE_END = re.compile(r"[.!?:;)\]\"'”]$")
_LEADER_DOTS = re.compile(r"(?:\s*\.){4,}")  # ". . . . ." of a table of contents
_BAD_TITLES = re.compile(r"(^untitled$|\.(dvi|tex|docx?|pdf|indd|qxd)$|^microsoft word)", re.I)


def _open(data: bytes) -> pypdf.PdfReader:
    if b"%PDF" not in data[:1024]:
        raise SkipFile("not a PDF (no %PDF header)")
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
    except Exception as exc:  # pypdf raises several types for damaged files
        raise SkipFile(f"unreadable PDF ({type(exc).__name__}: {exc})") from None
    if reader.is_encrypted:
        try:
            opened = reader.decrypt("")
        except Exception as exc:  # e.g. AES without the cryptography package
            raise SkipFile(f"encrypted PDF that cannot be opened ({exc})") from None
        if opened == pypdf.PasswordType.NOT_DECRYPTED:
            raise SkipFile("encrypted PDF: a password is needed to open it")
    return reader


def _check_content(reader: pypdf.PdfReader, packed: int) -> None:
    """Skip a PDF bomb before a page is parsed: pages whose content streams unpack to more
    than :func:`unpack_limit` (parsing is pure Python: a few KB of compressed operators,
    or one stream shared by a thousand pages, would take hours). Counted page by page and
    stopped at the limit, so at most that much is unpacked; what is, pypdf keeps for the
    text extraction that follows."""
    limit = unpack_limit(packed)
    total = 0
    for page in reader.pages:
        try:
            contents = page.get("/Contents")
            streams = contents.get_object() if contents is not None else None
            for part in streams if isinstance(streams, ArrayObject) else [streams]:
                stream = part.get_object() if part is not None else None
                if isinstance(stream, StreamObject):
                    total += len(stream.get_data())
        except LimitReachedError:  # one stream over pypdf's own limit (75 MB)
            total = limit + 1
        if total > limit:
            check_unpacked("its pages' content", total, packed, "PDF bomb")


def _outline(reader: pypdf.PdfReader) -> list[tuple[int, int, str]]:
    """(0-based page, level, title) of each bookmark, in outline order."""
    out: list[tuple[int, int, str]] = []

    def walk(items: list[Any], level: int) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item, level + 1)
                continue
            try:
                page = reader.get_destination_page_number(item)
            except Exception:  # a bookmark to nowhere: not a section
                continue
            title = clean(str(getattr(item, "title", "") or ""))
            if page is not None and page >= 0 and title:
                out.append((page, level, title))

    try:
        walk(reader.outline, 1)
    except Exception:  # a damaged outline: the text is still worth reading
        return []
    return out


def _page_lines(reader: pypdf.PdfReader) -> tuple[list[list[str]], int]:
    """The non-empty lines of every page, and how many pages failed to extract."""
    pages: list[list[str]] = []
    failed = 0
    for page in reader.pages:
        try:
            text = page.extract_text() or ""
        except Exception:
            text, failed = "", failed + 1
        lines = (_LEADER_DOTS.sub(" … ", line).strip() for line in text.splitlines())
        pages.append([line for line in lines if line])
    return pages, failed


def _drop_running_lines(pages: list[list[str]]) -> list[list[str]]:
    """Pages without the header and footer lines repeated on many pages."""
    if len(pages) < 4:
        return pages
    seen: Counter[str] = Counter()
    for lines in pages:
        edges = {_DIGITS.sub("#", x) for x in lines[:_EDGE_LINES] + lines[-_EDGE_LINES:]}
        seen.update(edges)
    running = {key for key, n in seen.items() if n >= max(3, 0.3 * len(pages))}
    out = []
    for lines in pages:
        head = [x for x in lines[:_EDGE_LINES] if _DIGITS.sub("#", x) not in running]
        middle = lines[_EDGE_LINES:-_EDGE_LINES] if len(lines) > 2 * _EDGE_LINES else []
        tail_start = max(_EDGE_LINES, len(lines) - _EDGE_LINES)
        tail = [x for x in lines[tail_start:] if _DIGITS.sub("#", x) not in running]
        out.append(head + middle + tail)
    return out


def _paragraphs(lines: list[str]) -> list[str]:
    """Lines joined into paragraphs: a short line that ends a sentence ends one."""
    if not lines:
        return []
    lengths = sorted(len(x) for x in lines)
    full = lengths[int(0.9 * (len(lengths) - 1))]
    paragraphs: list[str] = []
    current = ""
    for line in lines:
        if not current:
            current = line
        elif current.endswith("-") and current[-2:-1].isalpha() and line[:1].islower():
            current = current[:-1] + line  # "exam-" + "ple"
        else:
            current = f"{current} {line}"
        if len(line) < 0.75 * full and _SENTENCE_END.search(line):
            paragraphs.append(current)
            current = ""
    if current:
        paragraphs.append(current)
    return paragraphs


def _place_headings(
    paragraphs: list[str], headings: list[tuple[int, str]], doc: DocumentBuilder, page: int
) -> None:
    """Add a page's paragraphs with its bookmarks' headings where their titles appear."""
    i = 0
    for level, title in headings:
        key = title.lower()
        for j in range(i, len(paragraphs)):
            at = paragraphs[j].lower().find(key)
            if 0 <= at <= 24:  # the title, perhaps after a number ("3.1 ", "Chapter 2 ")
                for para in paragraphs[i:j]:
                    doc.paragraph(para, page)
                end = at + len(key)
                doc.heading(paragraphs[j][:end], level, page)
                rest = paragraphs[j][end:].strip()
                paragraphs[j] = rest
                i = j if rest else j + 1
                break
        else:  # not found on the page: the section starts at the page's next paragraph
            doc.heading(title, level, page)
    for para in paragraphs[i:]:
        doc.paragraph(para, page)


def read_pdf_file(path: Path, data: bytes) -> Document:
    quiet = logging.getLogger("pypdf")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # damaged-but-readable files log a warning per object
    try:
        reader = _open(data)
        try:
            _check_content(reader, len(data))
            n = len(reader.pages)
            pages, failed = _page_lines(reader)
        except SkipFile:
            raise
        except Exception as exc:
            raise SkipFile(f"unreadable PDF ({type(exc).__name__}: {exc})") from None
        outline = _outline(reader)
        try:
            meta_title = clean(str((reader.metadata or {}).get("/Title") or ""))
        except Exception:
            meta_title = ""
    finally:
        quiet.setLevel(level)
    if n == 0:
        raise SkipFile("a PDF without pages")
    empty = sum(1 for lines in pages if sum(len(x) for x in lines) < _MIN_PAGE_CHARS)
    if empty == n:
        raise SkipFile(
            f"no text layer on any of its {n} pages (a scanned PDF? add a text layer with "
            "OCR, e.g. ocrmypdf, first)"
        )
    pages = _drop_running_lines(pages)
    by_page: dict[int, list[tuple[int, str]]] = {}
    for page, lvl, title in outline:
        by_page.setdefault(page, []).append((lvl, title))
    doc = DocumentBuilder()
    for index, lines in enumerate(pages):
        _place_headings(_paragraphs(lines), by_page.get(index, []), doc, index + 1)
    title = meta_title if meta_title and not _BAD_TITLES.search(meta_title) else path.stem
    built = doc.build(title, pages=n)
    if empty:
        built.warnings.append(f"{empty} of {n} pages have no text layer (images only?)")
    if failed:
        built.warnings.append(f"text of {failed} of {n} pages could not be extracted")
    return built
