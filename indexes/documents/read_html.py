"""HTML: the page's main text, without menus, by jusText (boilerplate removal) over lxml.

Before jusText classifies paragraphs, elements that are navigation by their markup are
removed (``nav``, ``aside``, ``footer``, scripts, forms and ARIA navigation, banner,
search and complementary roles), and a page with ``main``, ``article`` or ``role=main``
keeps only that: its paragraphs are all kept but for link lists (more than half of the
text in links). A page without such markup is left to jusText's classifier, which keeps
the paragraphs that read as prose (length, stop-word density, link density; English stop
words, then language-independent when English finds nothing; then those not judged bad
when nothing is good; then, on a page of short paragraphs only, all but link lists).
Headings stay as sections when text is kept under them. A data table becomes one paragraph
a row, its cells paired with their column headers.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import justext
import lxml.html
from lxml import etree

from indexes.documents.document import Document, DocumentBuilder, SkipFile, clean, table_rows
from indexes.documents.read_text import decode

_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.I)
_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>")
_HEADING = re.compile(r"\bh([1-6])\b")
_NOT_CONTENT = (
    "//nav|//aside|//footer|//script|//style|//noscript|//form|//template|"
    "//*[@role='navigation' or @role='banner' or @role='contentinfo' or "
    "@role='complementary' or @role='search']"
)
_MAIN = "//main|//article|//*[@role='main']"
_MAX_LINK_SHARE = 0.5  # inside marked main content, a paragraph mostly of links is a menu
_BLOCK_IN_CELL = (  # a cell holding blocks: a layout table, left as it is
    ".//*[self::td or self::th]//*[self::p or self::div or self::ul or self::ol or self::pre"
    " or self::h1 or self::h2 or self::h3 or self::table]"
)


def _decode_html(data: bytes) -> tuple[str, str | None]:
    """Text by the page's declared charset, else as any text file (:func:`decode`)."""
    declared = _CHARSET.search(data[:4096])
    if declared:
        try:
            return data.decode(declared.group(1).decode("ascii"), errors="replace"), None
        except LookupError:
            pass  # an unknown charset name: guess as for any text
    return decode(data)


def _main_content(dom: Any) -> Any:
    for el in dom.xpath(_NOT_CONTENT):
        el.drop_tree()
    main = dom.xpath(_MAIN)
    if main:
        body = dom.find("body")
        if body is not None:
            keep = main[0]
            for child in list(body):
                body.remove(child)
            body.append(keep)
    return dom


def _data_tables(dom: Any) -> Any:
    """Each data table (2+ rows, no block content or table inside a cell: not a layout
    table) as one ``p`` a row, its cells paired with their column headers (:func:`table_rows`);
    jusText would read every cell as a paragraph of its own, apart from its column."""
    for table in dom.xpath("//table[not(.//table)]"):
        rows = table.xpath(".//tr")
        if len(rows) < 2 or table.xpath(_BLOCK_IN_CELL):
            continue
        grid = []
        for tr in rows:
            cells: list[str] = []
            for cell in tr.xpath("./th|./td"):
                span = int(cell.get("colspan", "1")) if cell.get("colspan", "").isdigit() else 1
                cells += [cell.text_content()] + [""] * (min(span, 50) - 1)
            grid.append(cells)
        box = lxml.html.Element("div")
        for line in table_rows(grid):
            para = lxml.html.Element("p")
            para.text = line
            box.append(para)
        box.tail = table.tail
        table.getparent().replace(table, box)
    return dom


def _preprocess(dom: Any) -> Any:
    return _main_content(_data_tables(justext.core.preprocessor(dom)))


def _paragraphs(html: str, language_independent: bool) -> list[Any]:
    if language_independent:
        return justext.justext(
            html, frozenset(), stopwords_low=0.0, stopwords_high=0.0, preprocessor=_preprocess
        )
    return justext.justext(html, justext.get_stoplist("English"), preprocessor=_preprocess)


def read_html_file(path: Path, data: bytes) -> Document:
    text, warning = _decode_html(data)
    text = _XML_DECL.sub("", text)
    if not text.strip():
        raise SkipFile("no text (only white space)")
    try:
        head = lxml.html.document_fromstring(text)
    except (etree.ParserError, ValueError) as exc:
        raise SkipFile(f"unreadable HTML: {exc}") from None
    page_title = clean(head.findtext(".//title") or "")
    try:
        paragraphs = _paragraphs(text, language_independent=False)
        if head.xpath(_MAIN):  # the page says where its content is: trust it
            keep = {id(p) for p in paragraphs if p.links_density() <= _MAX_LINK_SHARE}
        else:
            if not any(not p.is_boilerplate and not p.is_heading for p in paragraphs):
                paragraphs = _paragraphs(text, language_independent=True)
            keep = {id(p) for p in paragraphs if not p.is_boilerplate}
            if not any(id(p) in keep and not p.is_heading for p in paragraphs):
                keep = {id(p) for p in paragraphs if p.class_type != "bad" or p.is_heading}
            if not any(id(p) in keep and not p.is_heading for p in paragraphs):
                # only short paragraphs (lists, notes): all but the link lists
                keep = {id(p) for p in paragraphs if p.links_density() <= _MAX_LINK_SHARE}
    except (etree.ParserError, ValueError) as exc:
        raise SkipFile(f"unreadable HTML: {exc}") from None
    doc = DocumentBuilder()
    pending: list[tuple[str, int]] = []  # headings waiting for text under them
    first_h1 = ""
    for p in paragraphs:
        level = _HEADING.search(p.dom_path)
        if p.is_heading and level:
            pending.append((p.text, int(level.group(1))))
            if level.group(1) == "1" and not first_h1:
                first_h1 = clean(p.text)
            continue
        if id(p) not in keep or not p.text.strip():
            continue
        for heading, lvl in pending:
            doc.heading(heading, lvl)
        pending = []
        doc.paragraph(p.text)
    if not doc.has_text:
        raise SkipFile("no main text found in the HTML page (only menus, links or markup)")
    built = doc.build(page_title or first_h1 or path.stem)
    if warning:
        built.warnings.append(warning)
    return built
