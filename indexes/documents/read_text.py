"""Plain text: decoding bytes of unknown encoding, and paragraphs from blank lines.

UTF-8 (with or without a BOM) and UTF-16/32 with a BOM are decoded as such; any other
bytes go to charset-normalizer (a tie between its best guesses goes to Windows-1252), and
a file it decodes is kept with a warning naming the encoding it guessed. Bytes that are not text (NUL bytes, or control characters in more
than 1% of the decoded text: a binary file with a text extension) are skipped.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from pathlib import Path

from indexes.documents.document import Document, DocumentBuilder, SkipFile

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_MAX_CONTROL_SHARE = 0.01
_BLANK_LINES = re.compile(r"\n[ \t]*\n")
# An underlined title ("Title\n=====", reStructuredText and setext style).
_UNDERLINE = re.compile(r"^([=\-~^*#])\1{2,}\s*$")


def decode(data: bytes) -> tuple[str, str | None]:
    """The text and, when it was not UTF-8, a warning naming the encoding used."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return _checked(data.decode(encoding, errors="replace")), None
    if b"\x00" in data:
        raise SkipFile("binary content (NUL bytes) in a text file")
    try:
        return _checked(data.decode("utf-8")), None
    except UnicodeDecodeError as exc:
        first_bad = exc.start
    from charset_normalizer import from_bytes

    matches = from_bytes(data)
    best = matches.best()
    if best is not None:  # a tie goes to Windows-1252, the web's default for legacy text
        tied = [m for m in matches if (m.chaos, m.coherence) == (best.chaos, best.coherence)]
        best = next((m for m in tied if m.encoding == "cp1252"), best)
    if best is None:
        raise SkipFile(f"not UTF-8 (invalid byte at offset {first_bad}) and no encoding fits")
    text = _checked(str(best))
    return text, f"not UTF-8 (invalid byte at offset {first_bad}): decoded as {best.encoding}"


def _checked(text: str) -> str:
    """``text`` with normalised line ends, unless it is mostly not text."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text:
        control = sum(1 for ch in text if ch not in "\n\t\f\v" and unicodedata.category(ch) == "Cc")
        if control > _MAX_CONTROL_SHARE * len(text):
            raise SkipFile(
                f"binary content: {control} control characters in {len(text)} "
                "(not a text file despite its extension)"
            )
    return text


def read_text_file(path: Path, data: bytes) -> Document:
    """A ``.txt`` (or ``.rst``) file: paragraphs at blank lines, underlined titles as headings."""
    text, warning = decode(data)
    doc = DocumentBuilder()
    levels: list[str] = []  # underline characters in order of first use (reST's rule)
    title = ""
    for para in _BLANK_LINES.split(text):
        lines = para.strip("\n").splitlines()
        if len(lines) >= 2 and _UNDERLINE.match(lines[1]) and len(lines[0].strip()) > 0:
            mark = lines[1].strip()[0]
            if mark not in levels:
                levels.append(mark)
            doc.heading(lines[0], levels.index(mark) + 1)
            title = title or lines[0].strip()
            lines = lines[2:]
        if any(line.strip() for line in lines):
            doc.paragraph("\n".join(lines))
    if not doc.has_text:
        raise SkipFile("no text (only white space)")
    built = doc.build(title or path.stem)
    if warning:
        built.warnings.append(warning)
    return built
