"""Each format's reader on real files: text, structure, and the reasons files are skipped."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from indexes.documents.document import SkipFile
from indexes.documents.parse import parse_document
from tests.documents.makers import (
    encrypt_pdf,
    write_docx,
    write_pdf,
    write_pdf_bomb,
    write_scanned_pdf,
    write_zip_bomb,
)


def parse(path: Path):
    return parse_document(path, path.read_bytes())


def skip_reason(path: Path) -> str:
    with pytest.raises(SkipFile) as info:
        parse(path)
    return str(info.value)


def test_pdf_pages_outline_sections_and_title(tmp_path: Path) -> None:
    pdf = write_pdf(
        tmp_path / "manual.pdf",
        [
            ("Safety", "Wear goggles at all times.\n\nLock out the press brake first."),
            (None, "Hydraulic oil is changed every two thousand hours."),
            ("Storage", "Keep the dies in the dry cabinet."),
        ],
        title="Workshop Manual",
    )
    doc = parse(pdf)
    assert doc.title == "Workshop Manual" and doc.pages == 3
    headings = [(b.text, b.page) for b in doc.blocks if b.kind == "heading"]
    assert headings == [("Safety", 1), ("Storage", 3)]
    texts = [(b.text, b.page) for b in doc.blocks if b.kind == "text"]
    assert ("Hydraulic oil is changed every two thousand hours.", 2) in texts
    for block in doc.blocks:  # spans index the document's text exactly
        assert doc.text[block.start : block.end] == block.text


def test_pdf_without_title_is_named_by_its_file(tmp_path: Path) -> None:
    doc = parse(write_pdf(tmp_path / "pump-notes.pdf", [(None, "The pump hums at night.")]))
    assert doc.title == "pump-notes"


def test_scanned_pdf_is_skipped_as_having_no_text_layer(tmp_path: Path) -> None:
    reason = skip_reason(write_scanned_pdf(tmp_path / "scan.pdf", pages=3))
    assert "no text layer" in reason and "3 pages" in reason and "OCR" in reason


def test_encrypted_pdf_needing_a_password_is_skipped(tmp_path: Path) -> None:
    plain = write_pdf(tmp_path / "plain.pdf", [(None, "Secret plans for the garden shed.")])
    locked = encrypt_pdf(plain, tmp_path / "locked.pdf", user_password="hunter2")
    assert skip_reason(locked) == "encrypted PDF: a password is needed to open it"


def test_pdf_encrypted_with_owner_password_only_is_read(tmp_path: Path) -> None:
    plain = write_pdf(tmp_path / "plain.pdf", [(None, "Secret plans for the garden shed.")])
    doc = parse(encrypt_pdf(plain, tmp_path / "owner.pdf", user_password=""))
    assert "garden shed" in doc.text


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"this is not a PDF at all", "not a PDF (no %PDF header)"),
        (b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\ngarbage", "unreadable PDF"),
    ],
)
def test_corrupt_pdf_is_skipped_with_the_library_reason(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(content)
    assert skip_reason(path).startswith(expected)


def test_truncated_pdf_is_skipped(tmp_path: Path) -> None:
    good = write_pdf(tmp_path / "good.pdf", [(None, "A complete page of text.")])
    cut = tmp_path / "cut.pdf"
    cut.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 3])
    assert skip_reason(cut).startswith("unreadable PDF")


def test_docx_headings_paragraphs_and_tables(tmp_path: Path) -> None:
    path = write_docx(
        tmp_path / "car.docx",
        "Car Manual",
        [("Wheels", ["Tighten the wheel nuts in a star pattern."]), ("Brakes", ["Bleed them."])],
    )
    doc = parse(path)
    assert doc.title == "Car Manual" and doc.pages is None
    kinds = [(b.kind, b.text) for b in doc.blocks]
    assert ("heading", "Wheels") in kinds and ("heading", "Brakes") in kinds
    assert ("text", "Tighten the wheel nuts in a star pattern.") in kinds
    assert ("text", "Part | Torque") in kinds and (
        "text",
        "Part: wheel nut | Torque: 120 Nm",
    ) in kinds


def test_corrupt_and_password_protected_docx_are_skipped(tmp_path: Path) -> None:
    junk = tmp_path / "junk.docx"
    with zipfile.ZipFile(junk, "w") as z:
        z.writestr("hello.txt", "a zip, but no Word document in it")
    assert skip_reason(junk).startswith("unreadable DOCX")
    ole = tmp_path / "protected.docx"
    ole.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600)
    assert "password-protected" in skip_reason(ole)


def test_zip_and_pdf_bombs_are_skipped_before_they_are_unpacked(tmp_path: Path) -> None:
    docx = write_zip_bomb(tmp_path / "bomb.docx", 40_000_000)  # 40 MB from 39 KB
    assert skip_reason(docx) == (
        "the DOCX (a zip) unpacks to more than 32 MB from 0.04 MB, over the limit (32 MB or "
        "32x the file's size, whichever is larger): a zip bomb?"
    )
    spaces = write_pdf_bomb(tmp_path / "spaces.pdf", b" " * 100_000_000)  # over pypdf's 75 MB
    assert "its pages' content unpacks to more than 32 MB" in skip_reason(spaces)
    # 2 MB of text operators shared by 100 pages: 200 MB that pypdf would parse for an hour.
    ops = write_pdf_bomb(tmp_path / "ops.pdf", b"BT (spindle) Tj ET\n" * 100_000, pages=100)
    assert skip_reason(ops).endswith("a PDF bomb?")
    # Below the limit, the same shape is read.
    small = write_pdf_bomb(tmp_path / "small.pdf", b"BT /F1 12 Tf 72 720 Td (oil) Tj ET\n", 3)
    assert skip_reason(small).startswith("no text layer")  # too few characters, but read
    assert parse(write_docx(tmp_path / "ok.docx", "Fine", [("A", ["text"])])).title == "Fine"


def test_html_main_content_without_menus(tmp_path: Path) -> None:
    path = tmp_path / "tea.html"
    path.write_text(
        "<html><head><title>Tea Handbook</title></head><body>"
        "<nav><a href='/'>Home</a> <a href='/shop'>Shop our teas</a></nav>"
        "<div class='sidebar' role='navigation'><p>Related: green tea, black tea</p></div>"
        "<main><h1>Tea Handbook</h1><h2>Oolong</h2><p>Oolong tea is partially oxidised "
        "and brewed in small clay pots called yixing teapots.</p></main>"
        "<footer>Copyright the tea people, all rights reserved.</footer></body></html>",
        encoding="utf-8",
    )
    doc = parse(path)
    assert doc.title == "Tea Handbook"
    assert "yixing teapots" in doc.text
    for menu in ("Shop our teas", "Related", "Copyright"):
        assert menu not in doc.text
    assert [b.text for b in doc.blocks if b.kind == "heading"] == ["Tea Handbook", "Oolong"]


def test_html_data_tables_pair_cells_with_headers_and_layout_tables_stay(tmp_path: Path) -> None:
    path = tmp_path / "keys.html"
    path.write_text(
        "<html><body><main><h1>Key usages</h1><p>Usages depend on the key type.</p>"
        "<table><tr><th>Key Type</th><th>encrypt</th><th>sign</th><th>wrapKey</th></tr>"
        "<tr><td>AES-CBC</td><td>yes</td><td></td><td>yes</td></tr>"
        "<tr><td colspan='2'>ECDSA</td><td>yes</td><td></td></tr></table>"
        "<table><tr><td><p>A layout cell with its own paragraph.</p></td></tr>"
        "<tr><td><p>Another layout cell.</p></td></tr></table></main></body></html>"
    )
    texts = [b.text for b in parse(path).blocks if b.kind == "text"]
    assert texts == [
        "Usages depend on the key type.",
        "Key Type | encrypt | sign | wrapKey",
        "Key Type: AES-CBC | encrypt: yes | wrapKey: yes",  # the empty sign cell moves nothing
        "Key Type: ECDSA | sign: yes",  # a cell spanning two columns keeps the next in place
        "A layout cell with its own paragraph.",
        "Another layout cell.",
    ]


def test_html_without_main_markup_keeps_prose_not_link_lists(tmp_path: Path) -> None:
    links = " ".join(f"<a href='/{i}'>Link number {i}</a>" for i in range(12))
    prose = (
        "The lighthouse on the northern cape was built in 1871 from granite that was "
        "shipped from the quarries in the south, and its lamp could be seen from a "
        "distance of more than twenty nautical miles on a clear night. "
    )
    path = tmp_path / "cape.htm"
    path.write_text(f"<html><body><div>{links}</div><p>{prose * 2}</p></body></html>")
    doc = parse(path)
    assert "northern cape was built in 1871" in doc.text
    assert "Link number" not in doc.text


def test_markdown_structure_front_matter_and_code(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text(
        "---\ntitle: Field Notes\n---\n\n## Birds\n\nA **heron** stood in the [reeds](x).\n\n"
        "- first item\n- second item\n\n```\nprint('hi')\nprint('there')\n```\n\n"
        "| bird | count | ringed |\n|---|---|---|\n| heron | 3 | |\n| egret | | 2 |\n",
        encoding="utf-8",
    )
    doc = parse(path)
    assert doc.title == "Field Notes"
    texts = [b.text for b in doc.blocks if b.kind == "text"]
    assert "A heron stood in the reeds." in texts
    assert "first item" in texts and "print('hi')\nprint('there')" in texts
    # each value under its own column: an empty cell does not move the next one left
    assert "bird | count | ringed" in texts
    assert "bird: heron | count: 3" in texts and "bird: egret | ringed: 2" in texts
    assert [b.text for b in doc.blocks if b.kind == "heading"] == ["Birds"]


def test_text_paragraphs_and_underlined_titles(tmp_path: Path) -> None:
    path = tmp_path / "readme.rst"
    path.write_text("Pump Guide\n==========\n\nPrime the pump\nbefore starting.\n\nThen run.\n")
    doc = parse(path)
    assert doc.title == "Pump Guide"
    assert [b.text for b in doc.blocks if b.kind == "text"] == [
        "Prime the pump before starting.",
        "Then run.",
    ]


def test_non_utf8_text_is_decoded_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "recette.txt"
    text = (
        "La crème brûlée est un dessert français. On la prépare avec de la crème, des "
        "jaunes d'œufs et du sucre, puis on caramélise le dessus au chalumeau. "
    ) * 3
    path.write_bytes(text.encode("cp1252"))
    doc = parse(path)
    assert "crème brûlée" in doc.text
    assert len(doc.warnings) == 1 and doc.warnings[0].startswith("not UTF-8")


@pytest.mark.parametrize("name", ["image.txt", "data.md", "page.html"])
def test_binary_file_with_a_text_extension_is_skipped(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(bytes(range(256)) * 20)
    assert skip_reason(path).startswith("binary content")


def test_binary_without_nul_bytes_is_still_skipped(tmp_path: Path) -> None:
    path = tmp_path / "blob.txt"
    path.write_bytes(bytes(b for b in range(1, 32) if b not in (9, 10, 13)) * 100 + b"abc")
    assert skip_reason(path).startswith("binary content")


def test_empty_and_blank_files_are_skipped(tmp_path: Path) -> None:
    empty = tmp_path / "empty.md"
    empty.write_bytes(b"")
    assert skip_reason(empty) == "empty file"
    blank = tmp_path / "blank.txt"
    blank.write_text("\n   \n\t\n")
    assert skip_reason(blank) == "no text (only white space)"
