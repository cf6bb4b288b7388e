"""Word ``.docx`` files, read by python-docx in body order (paragraphs and tables).

Paragraphs styled ``Heading N`` become sections of level N and ``Title`` names the
document (else the file's title property, else its name). A table row becomes one
paragraph of its cells paired with their column headers (``table_rows``). Word files have
no fixed pages, so passages carry no page number. A password-protected Word file is an OLE
container, not a zip: it is reported as such.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import docx
from docx.table import Table
from docx.text.paragraph import Paragraph

from indexes.documents.document import (
    Document,
    DocumentBuilder,
    SkipFile,
    check_unpacked,
    clean,
    table_rows,
)

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_HEADING_STYLE = re.compile(r"^heading\s*(\d)?", re.I)


def _style(paragraph: Paragraph) -> str:
    try:
        return paragraph.style.name if paragraph.style is not None else ""
    except (KeyError, AttributeError):  # a style id the styles part does not define
        return ""


def read_docx_file(path: Path, data: bytes) -> Document:
    if data.startswith(_OLE_MAGIC):
        raise SkipFile(
            "a password-protected or old-format (.doc) Word file; save it as .docx "
            "without a password"
        )
    _check_zip(data)
    try:
        word = docx.Document(io.BytesIO(data))
    except Exception as exc:  # zip, XML and package errors alike mean: not a readable .docx
        raise SkipFile(f"unreadable DOCX ({type(exc).__name__}: {exc})") from None
    doc = DocumentBuilder()
    title = ""
    for item in word.iter_inner_content():
        if isinstance(item, Table):
            rows = []
            for row in item.rows:
                cells = row.cells
                # a merged cell repeats in each column it spans: its text once, in the first
                rows.append(
                    [
                        "" if i and cell._tc is cells[i - 1]._tc else cell.text
                        for i, cell in enumerate(cells)
                    ]
                )
            for line in table_rows(rows):
                doc.paragraph(line)
            continue
        style = _style(item)
        heading = _HEADING_STYLE.match(style)
        if style.lower() == "title":
            title = title or clean(item.text)
            doc.heading(item.text, 1)
        elif heading:
            doc.heading(item.text, int(heading.group(1) or 1))
        else:
            doc.paragraph(item.text)
    if not doc.has_text:
        raise SkipFile("no text in the Word document")
    core_title = clean(word.core_properties.title or "")
    return doc.build(title or core_title or path.stem)


def _check_zip(data: bytes) -> None:
    """Skip a zip bomb before python-docx unpacks its parts (it reads each one whole). The
    sizes its directory declares bound what reading can give: zipfile stops at them."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return  # not a zip: python-docx says what it is
    check_unpacked("the DOCX (a zip)", unpacked, len(data), "zip bomb")
