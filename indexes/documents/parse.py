"""One file's bytes to a :class:`~indexes.documents.document.Document`, by its extension.

Each format has its reader module; this one picks it and turns anything a library raises
on a damaged file into :class:`SkipFile` with the reason, so one bad file never stops a
build.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from indexes.documents.document import Document, SkipFile
from indexes.documents.read_docx import read_docx_file
from indexes.documents.read_html import read_html_file
from indexes.documents.read_markdown import read_markdown_file
from indexes.documents.read_pdf import read_pdf_file
from indexes.documents.read_text import read_text_file

Reader = Callable[[Path, bytes], Document]

READERS: dict[str, Reader] = {
    ".pdf": read_pdf_file,
    ".docx": read_docx_file,
    ".html": read_html_file,
    ".htm": read_html_file,
    ".xhtml": read_html_file,
    ".md": read_markdown_file,
    ".markdown": read_markdown_file,
    ".txt": read_text_file,
    ".text": read_text_file,
    ".rst": read_text_file,
}
SUPPORTED = frozenset(READERS)


def parse_document(path: Path, data: bytes) -> Document:
    """The document in ``data`` (the bytes of ``path``); :class:`SkipFile` with the reason."""
    if not data:
        raise SkipFile("empty file")
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise SkipFile(f"unsupported file type {path.suffix or '(none)'}")
    try:
        return reader(path, data)
    except SkipFile:
        raise
    except RecursionError:
        raise SkipFile("nested too deeply to read") from None
    except Exception as exc:  # a library's error on a damaged file: report it, go on
        kind = path.suffix.lower().lstrip(".").upper()
        raise SkipFile(f"unreadable {kind} ({type(exc).__name__}: {exc})") from None
