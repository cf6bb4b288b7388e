"""Code-span faithfulness: does every command, option, file name, number and quoted identifier
of an answer appear in a passage it was shown?

Over documentation the wrong answers that read well are the ones that state a command the page
does not give (``git reset HEAD <file>`` where the page says ``git reset --soft HEAD^``) or a
save command for an image format the page saves differently. Such a span is checkable without a
judge: it is either in a shown passage or it is not. A span is found in the passages when its
text occurs there as it is written (whitespace collapsed; numbers as whole numbers; a call
``name()`` where the page names ``name``), so a
paraphrase in prose is never counted against an answer, only its literal technical tokens.

What counts as a span (:func:`code_spans`):
- text in backticks, ```` `like this` ```` (the answer marked it as code);
- a command-line option, ``--output`` or ``-x`` (outside backticks too);
- a file name or path with an extension, ``config.toml``, ``/etc/hosts`` (a path has a slash);
- an identifier in code style, ``snake_case``, ``dotted.name()``, ``camelCase``;
- a number of two or more digits, or with a decimal point (``512``, ``3.2``); single digits
  and the ``[n]`` citation markers are left out: they are list numbers and citations more often
  than facts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from typed_rag.messages import CITATION_GROUP

_BACKTICKS = re.compile(r"`([^`\n]{1,200})`")
_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
_PATH = re.compile(
    r"(?<![\w/.-])((?:~?/)?(?:[\w.-]+/)*[\w-]+\.[A-Za-z][A-Za-z0-9]{0,5}|(?:~?/[\w.-]+)+)(?![\w/-])"
)
_IDENT = re.compile(
    r"(?<![\w.])([A-Za-z_]\w*(?:\.\w+)*\(\)|[A-Za-z_][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|[a-z]+[A-Z]\w*)"
)
_NUMBER = re.compile(r"(?<![\w.])(\d+\.\d+|\d{2,})(?![\w.]*\w)")
# Words that end like a file name but are prose: abbreviations and a sentence's last word.
_PROSE_DOTS = {"e.g", "i.e", "etc", "vs", "cf"}


@dataclass(frozen=True)
class SpanCheck:
    """An answer's spans, and those no shown passage holds."""

    spans: tuple[str, ...]
    missing: tuple[str, ...] = field(default=())

    @property
    def faithful(self) -> bool:
        return not self.missing


def _squash(text: str) -> str:
    return " ".join(text.split())


def _is_prose(span: str) -> bool:
    """A dotted word that is an abbreviation or a sentence's end, not a file name."""
    lower = span.lower().rstrip(".")
    if lower in _PROSE_DOTS:
        return True
    stem, _, ext = span.rpartition(".")
    # "word.Next" from a missing space after a full stop: the extension is capitalised prose
    return "/" not in span and ext[:1].isupper() and not stem.isupper()


def code_spans(answer: str) -> tuple[str, ...]:
    """The answer's technical spans, in order of first appearance, each once."""
    text = CITATION_GROUP.sub(" ", answer)
    found: list[str] = []
    inline = [m.group(1).strip() for m in _BACKTICKS.finditer(text)]
    found += [s for s in inline if s]
    rest = _BACKTICKS.sub(" ", text)
    for pattern in (_OPTION, _PATH, _IDENT, _NUMBER):
        for m in pattern.finditer(rest):
            span = m.group(1)
            if pattern is _PATH and _is_prose(span):
                continue
            if pattern is _OPTION and len(span) < 3 and not span[1:].isalpha():
                continue
            found.append(span)
    seen: dict[str, None] = {}
    for span in found:
        seen.setdefault(span, None)
    return tuple(seen)


def _in_passages(span: str, haystack: str) -> bool:
    if re.fullmatch(r"\d+(?:\.\d+)?", span):
        return re.search(rf"(?<![\d.]){re.escape(span)}(?![\d]|\.\d)", haystack) is not None
    if span.endswith("()") and len(span) > 3:  # `sync()` for a page that names "sync"
        return span[:-2] in haystack
    return _squash(span) in haystack


def check_spans(answer: str, passages: Iterable[str]) -> SpanCheck:
    """The answer's spans and those that occur in none of ``passages``."""
    haystack = "\n".join(_squash(p) for p in passages)
    spans = code_spans(answer)
    return SpanCheck(spans, tuple(s for s in spans if not _in_passages(s, haystack)))


def faithful_share(checks: Sequence[SpanCheck]) -> tuple[float | None, float | None]:
    """(share of answers with spans whose every span was shown, share of all spans shown);
    None where there is nothing to count."""
    with_spans = [c for c in checks if c.spans]
    answers = sum(c.faithful for c in with_spans) / len(with_spans) if with_spans else None
    total = sum(len(c.spans) for c in checks)
    shown = total - sum(len(c.missing) for c in checks)
    return answers, (shown / total if total else None)
