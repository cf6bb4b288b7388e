"""Markdown, parsed by markdown-it-py (CommonMark, with tables).

Headings become sections; paragraphs, list items and table rows become paragraphs (a
table row as its cells paired with their column headers, :func:`table_rows`); code blocks
keep their lines. Inline markup is dropped to its text (link text, image alt text, code
spans). A YAML front-matter block is not text: its ``title:`` names the document when there
is no top-level heading.
"""

from __future__ import annotations

import re
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

from indexes.documents.document import Document, DocumentBuilder, SkipFile, table_rows
from indexes.documents.read_text import decode

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_FRONT_TITLE = re.compile(r"^title:\s*[\"']?(.+?)[\"']?\s*$", re.M)


def _inline_text(token: Token) -> str:
    parts: list[str] = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image":
            parts.append(_inline_text(child))
    return "".join(parts)


def markdown_document(text: str, fallback_title: str) -> tuple[DocumentBuilder, str]:
    """Blocks of a Markdown text and its title (first level-1 heading, front matter, fallback)."""
    title = ""
    match = _FRONT_MATTER.match(text)
    if match:
        found = _FRONT_TITLE.search(match.group(1))
        title = found.group(1) if found else ""
        text = text[match.end() :]
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    doc = DocumentBuilder()
    table: list[list[str]] | None = None  # the rows of the table being read
    h1 = ""
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            level = int(tok.tag[1])
            heading = _inline_text(tokens[i + 1])
            doc.heading(heading, level)
            if level == 1 and not h1:
                h1 = heading
        elif tok.type == "paragraph_open":
            doc.paragraph(_inline_text(tokens[i + 1]))
        elif tok.type in ("fence", "code_block"):
            doc.paragraph(tok.content, keep_lines=True)
        elif tok.type == "table_open":
            table = []
        elif tok.type == "tr_open" and table is not None:
            table.append([])
        elif tok.type == "inline" and table:  # one inline token a cell, empty ones too
            table[-1].append(_inline_text(tok))
        elif tok.type == "table_close" and table is not None:
            for line in table_rows(table):
                doc.paragraph(line)
            table = None
    return doc, (h1 or title or fallback_title)


def read_markdown_file(path: Path, data: bytes) -> Document:
    text, warning = decode(data)
    doc, title = markdown_document(text, path.stem)
    if not doc.has_text:
        raise SkipFile("no text in the Markdown file (headings or markup only)")
    built = doc.build(title)
    if warning:
        built.warnings.append(warning)
    return built
