"""Real files for the documents tests, written by the libraries people make them with."""

from __future__ import annotations

import os
from pathlib import Path

import docx
from fpdf import FPDF
from PIL import Image
from pypdf import PdfWriter

from typed_rag.config import Settings


def write_pdf(path: Path, pages: list[tuple[str | None, str]], title: str = "") -> Path:
    """A PDF with one page per ``(bookmark or None, text)``; bookmarks make its outline."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    if title:
        pdf.set_title(title)
    for bookmark, text in pages:
        pdf.add_page()
        if bookmark:
            pdf.start_section(bookmark, level=0)
            pdf.set_font("Helvetica", style="B", size=14)
            pdf.multi_cell(0, 8, bookmark, new_x="LMARGIN", new_y="NEXT")
            pdf.set_font("Helvetica", size=11)
        for para in text.split("\n\n"):
            pdf.multi_cell(0, 6, para, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(4)
    pdf.output(str(path))
    return path


def write_scanned_pdf(path: Path, pages: int = 2) -> Path:
    """A PDF of images only, like a scan without OCR."""
    pdf = FPDF()
    for i in range(pages):
        pdf.add_page()
        pdf.image(Image.new("RGB", (200, 260), (255, 255 - 40 * i, 255)), x=10, y=10, w=120)
    pdf.output(str(path))
    return path


def encrypt_pdf(src: Path, dest: Path, user_password: str) -> Path:
    """``src`` encrypted; an empty user password opens it (owner password only)."""
    writer = PdfWriter(clone_from=str(src))
    writer.encrypt(user_password=user_password, owner_password="owner-secret", algorithm="RC4-128")
    with dest.open("wb") as f:
        writer.write(f)
    return dest


def write_docx(path: Path, title: str, sections: list[tuple[str, list[str]]]) -> Path:
    """A Word file: a Title paragraph, then Heading 1 sections of paragraphs, and a table."""
    doc = docx.Document()
    doc.add_heading(title, 0)
    for heading, paragraphs in sections:
        doc.add_heading(heading, 1)
        for text in paragraphs:
            doc.add_paragraph(text)
    table = doc.add_table(rows=2, cols=2)
    for r, row in enumerate([("Part", "Torque"), ("wheel nut", "120 Nm")]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    doc.save(str(path))
    return path


def write_symlink_loops(folder: Path) -> None:
    """A link back to ``folder`` (a folder loop) and a link to itself (ELOOP)."""
    os.symlink(folder, folder / "back-to-top")
    os.symlink(folder / "self.txt", folder / "self.txt")


LOREM = (
    "Maintenance records are kept for every machine in the workshop. Each entry names "
    "the technician, the date and the parts that were replaced. "
)


def shop_settings(tmp_path: Path) -> Settings:
    """Server settings (fake engine) with collection ``shop`` built: a two-page PDF manual
    (oil change every 2000 hours on page 2, section Hydraulics) and a Markdown note."""
    from indexes.documents import build_collection
    from tests.serving.conftest import server_settings

    settings = server_settings(tmp_path, **{"retrieval.backend": "numpy"})
    docs = tmp_path / "docs"
    docs.mkdir()
    write_pdf(
        docs / "press.pdf",
        [("Safety", "Wear goggles."), ("Hydraulics", "Change the hydraulic oil every 2000 hours.")],
        title="Press Brake Manual",
    )
    (docs / "notes.md").write_text("# Notes\n\n## Coolant\n\nTop up the coolant weekly.\n")
    build_collection(settings, "shop", [docs], show_progress=False, workers=0)
    return settings


def write_pdf_bomb(path: Path, content: bytes, pages: int = 1) -> Path:
    """A PDF whose pages all show one compressed content stream: a few KB that unpack to
    ``pages * len(content)`` bytes of page content (spaces, or text operators that take
    pypdf seconds per MB to parse)."""
    from pypdf.generic import DecodedStreamObject, NameObject

    writer = PdfWriter()
    stream = DecodedStreamObject()
    stream.set_data(content)
    shared = writer._add_object(stream.flate_encode())
    for _ in range(pages):
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Contents")] = shared
    with path.open("wb") as f:
        writer.write(f)
    return path


def write_zip_bomb(path: Path, unpacked: int, member: str = "word/document.xml") -> Path:
    """A zip (a DOCX is one) with one member of ``unpacked`` spaces: ~1,000 times smaller."""
    import zipfile

    block = b" " * 1_000_000
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open(member, "w", force_zip64=True) as out:
            for _ in range(unpacked // len(block)):
                out.write(block)
    return path
