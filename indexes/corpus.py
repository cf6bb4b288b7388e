"""Streaming reader for DPR ``psgs_w100.tsv`` corpora (id, text, title), plain or gzip.

The reader is a generator with bounded memory, so the 21M-row DPR Wikipedia streams
through it. Every record is parsed with :mod:`csv` (tab-separated, DPR's doubled-quote
escaping, ``strict`` quoting). Records are expected on one line, as DPR writes them; a
quoted field may run onto following lines only when the joined lines parse cleanly (at
most ``max_record_lines``), so one broken quote can never swallow the good rows after it.

Malformed rows (wrong column count, bad quoting, empty id or text, duplicate id, bad
UTF-8) are reported with their line number. ``on_error="skip"`` counts and skips them and
logs a summary at the end; ``on_error="stop"`` raises :class:`UserError` at the first.
Blank lines carry no row and are ignored. A header row (``id text title`` in any order)
is optional and, when present, decides the column order.
"""

from __future__ import annotations

import csv
import gzip
import logging
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal, NamedTuple

from indexes.download import download
from indexes.seen_ids import SeenIds
from typed_rag.config import Settings
from typed_rag.errors import UserError

log = logging.getLogger(__name__)

OnError = Literal["skip", "stop"]
COLUMNS = ("id", "text", "title")  # DPR's column order
_GZIP_MAGIC = b"\x1f\x8b"
_MAX_FIELD = 1 << 26  # characters


class CorpusRow(NamedTuple):
    """One passage and the (1-based) line of the file where its record starts."""

    id: str
    title: str
    text: str
    line: int


@dataclass
class ReadStats:
    """What a pass over the corpus saw; filled in while iterating."""

    rows: int = 0
    skipped: int = 0
    lines: int = 0
    header: bool = False
    first_error: str | None = None

    def summary(self) -> str:
        """One line for logs and manifests, e.g. ``skipped 2 malformed rows (first: line 17: ...)``."""
        text = f"read {self.rows:,} rows"
        if self.skipped:
            text += f"; skipped {self.skipped:,} malformed rows (first: {self.first_error})"
        return text


def is_url(source: str | Path) -> bool:
    """True for an http(s) URL, which is downloaded before reading."""
    return isinstance(source, str) and source.lower().startswith(("http://", "https://"))


def resolve_corpus(
    source: str | Path, settings: Settings, show_progress: bool = True
) -> tuple[Path, str]:
    """Local path of the corpus and its source string; a URL is downloaded (resumably)
    to ``<home>/corpora/<file name>`` first and reused on later runs."""
    if is_url(source):
        url = str(source)
        name = url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1] or "corpus.tsv"
        dest = settings.home / "corpora" / name
        result = download(url, dest, show_progress=show_progress)
        return result.path, url
    path = Path(source).expanduser()
    if not path.exists():
        raise UserError(f"corpus file not found: {path} (set corpus.path)")
    return path, str(path.resolve())


class CorpusReader:
    """Iterate the good rows of a DPR TSV file; ``stats`` describes the pass."""

    def __init__(
        self,
        path: str | Path,
        on_error: OnError = "skip",
        *,
        limit: int | None = None,
        max_record_lines: int = 16,
    ) -> None:
        if on_error not in ("skip", "stop"):
            raise UserError(f"on_error must be 'skip' or 'stop', not {on_error!r}")
        if limit is not None and limit < 0:
            raise UserError(f"limit must be >= 0, not {limit}")
        self.path = Path(path)
        self.on_error = on_error
        self.limit = limit
        self.max_record_lines = max(1, max_record_lines)
        # csv's default field limit (128 KiB) is below some real passages' length; the
        # limit is process-wide and only ever raised here.
        csv.field_size_limit(max(csv.field_size_limit(), _MAX_FIELD))
        self.stats = ReadStats()
        self._spanned = 1  # lines of the record parsed last
        self._joined: list[_Line] = []

    def __iter__(self) -> Iterator[CorpusRow]:
        path = self.path
        if not path.exists():
            raise UserError(f"corpus file not found: {path} (set corpus.path)")
        if not path.is_file():
            raise UserError(f"corpus is not a file: {path}")
        self.stats = stats = ReadStats()
        if self.limit == 0:
            return
        seen = SeenIds()
        columns: tuple[int, int, int] = (0, 1, 2)  # positions of id, text, title
        first_record = True
        with _open_binary(path) as raw:
            source = _numbered_lines(raw, path, stats)
            pending: deque[_Line] = deque()

            def next_line() -> _Line | None:
                return pending.popleft() if pending else next(source, None)

            while (item := next_line()) is not None:
                lineno, text, bad = item
                if bad is not None:
                    self._malformed(lineno, bad)
                    continue
                if not text.strip():
                    continue
                fields, problem = self._parse_record(item, next_line, pending)
                if problem is not None:
                    self._malformed(lineno, problem)
                    continue
                if first_record:
                    first_record = False
                    header = _header_columns(fields)
                    if header is not None:
                        columns = header
                        stats.header = True
                        continue
                if len(fields) != 3 and len(fields) and self._spanned > 1:
                    # a multi-line join that is no valid row: only its first line is
                    # bad, the lines after it are parsed on their own again
                    pending.extendleft(reversed(self._joined[1:]))
                    self._malformed(lineno, "unterminated quoted field")
                    continue
                if len(fields) != 3:
                    self._malformed(
                        lineno,
                        f"wrong column count: {len(fields)} (expected 3: id, text, title)",
                    )
                    continue
                pid, text, title = (fields[i] for i in columns)
                if not pid.strip():
                    self._malformed(lineno, "empty id")
                    continue
                if not text.strip():
                    self._malformed(lineno, f"empty text for id {pid!r}")
                    continue
                if not seen.add(pid):
                    self._malformed(lineno, f"duplicate id {pid!r}")
                    continue
                stats.rows += 1
                yield CorpusRow(pid, title, text, lineno)
                if self.limit is not None and stats.rows >= self.limit:
                    return
        if stats.skipped:
            log.warning("%s: %s", path, stats.summary())

    def _parse_record(
        self,
        first: _Line,
        next_line: Callable[[], _Line | None],
        pending: deque[_Line],
    ) -> tuple[list[str], str | None]:
        """Parse the record starting at ``first``; join lines only while a quote is open."""
        lines = [first]
        while True:
            try:
                rows = list(csv.reader([ln.text for ln in lines], delimiter="\t", strict=True))
            except csv.Error as exc:
                if str(exc) == "unexpected end of data" and len(lines) < self.max_record_lines:
                    more = next_line()
                    if more is not None and more.bad is None:
                        lines.append(more)
                        continue
                    if more is not None:
                        pending.appendleft(more)
                    reason = "unterminated quoted field"
                elif len(lines) > 1 or str(exc) == "unexpected end of data":
                    # the quote opened on the first line closes nowhere sensible
                    reason = "unterminated quoted field"
                elif "field larger than field limit" in str(exc):
                    reason = f"field longer than {csv.field_size_limit():,} characters"
                else:
                    reason = f"bad quoting ({exc})"
                # Give back every line after the first: each is parsed on its own again.
                pending.extendleft(reversed(lines[1:]))
                return [], reason
            if len(rows) != 1:  # cannot happen with one open record, but never lose rows
                pending.extendleft(reversed(lines[1:]))
                return [], "bad quoting (record spans lines)"
            self._spanned, self._joined = len(lines), lines
            return rows[0], None

    def _malformed(self, lineno: int, reason: str) -> None:
        message = f"line {lineno}: {reason}"
        if self.on_error == "stop":
            raise UserError(f"{self.path}: {message} (use --on-error skip to skip such rows)")
        self.stats.skipped += 1
        if self.stats.first_error is None:
            self.stats.first_error = message
        log.debug("%s: skipped %s", self.path, message)


def read_corpus(
    path: str | Path, on_error: OnError = "skip", *, limit: int | None = None
) -> Iterator[CorpusRow]:
    """Shorthand for ``iter(CorpusReader(path, on_error, limit=limit))``."""
    return iter(CorpusReader(path, on_error, limit=limit))


class _Line(NamedTuple):
    number: int
    text: str
    bad: str | None  # why the line could not be decoded


def _open_binary(path: Path) -> IO[bytes]:
    """Open plain or gzip by content (magic bytes), not by file name."""
    try:
        with path.open("rb") as probe:
            magic = probe.read(2)
        if magic == _GZIP_MAGIC:
            return gzip.open(path, "rb")
        return path.open("rb")
    except OSError as exc:
        raise UserError(f"cannot open corpus {path}: {exc.strerror or exc}") from exc


def _numbered_lines(raw: IO[bytes], path: Path, stats: ReadStats) -> Iterator[_Line]:
    """Decode lines one by one, so bad UTF-8 is pinned to its line; gzip damage is fatal."""
    lineno = 0
    try:
        for chunk in raw:
            lineno += 1
            stats.lines = lineno
            try:
                text = chunk.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                bad = chunk[exc.start : exc.start + 1].hex()
                yield _Line(lineno, "", f"invalid UTF-8 (byte 0x{bad} at byte {exc.start + 1})")
                continue
            yield _Line(lineno, text, None)
    except EOFError as exc:
        raise UserError(
            f"truncated gzip file {path}: it ends inside line {lineno + 1} "
            f"(after {lineno:,} complete lines); download it again"
        ) from exc
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise UserError(f"corrupt gzip file {path} after line {lineno:,}: {exc}") from exc
    except OSError as exc:
        raise UserError(f"cannot read corpus {path} after line {lineno:,}: {exc}") from exc


def _header_columns(fields: list[str]) -> tuple[int, int, int] | None:
    """Column positions of id, text, title if ``fields`` is a header row, else None."""
    names = [f.strip().lower() for f in fields]
    if len(names) != 3 or sorted(names) != sorted(COLUMNS):
        return None
    return names.index("id"), names.index("text"), names.index("title")
