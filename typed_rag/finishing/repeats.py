"""Sentences a small model says again (``method.drop_repeats``).

The 1.5B generator sometimes falls into a loop and writes the same sentence over and
over ("- [1] 6 days", "- [2] 6 days", ... twenty times; "The father died from pneumonia
just before Christmas 1952." thirteen times). A reader gains nothing from the copies, and
every copy that cites a passage counts once more in the citation measures.
"""

from __future__ import annotations

import re
from collections import Counter

from typed_rag.finishing.sentences import NOT_ABBREVIATION
from typed_rag.messages import CITATION_GROUP

# A long sentence is never worth saying twice; a short one said this often is a loop.
LONG_WORDS = 8
LOOP_TIMES = 3

# A sentence ends at "." or "!" before a space and a capital, digit or mark, unless the "."
# closes an initial or a title ("George W. Bush", "Dr. Kay"). Not at "?": a question inside
# a line is as often part of a title ("Why Can't Elephants Jump? Why Are ...").
_SENTENCE_END = re.compile(rf"{NOT_ABBREVIATION}(?<=[.!])[ \t]+(?=[A-Z0-9\"'(*\[-])")
# A heading, or a line (list item) that is all bold: the answer's layout, said again on
# purpose (a sub-question named in a list, then as the heading of its part).
_LAYOUT = re.compile(
    r"[ \t]*(?:#{1,6}.*|(?:(?:\d{1,2}[.)]|[-*\u2022])[ \t]+)?\*\*[^*]+\*\*:?[ \t]*)"
)
_MARKUP = re.compile(r"^[ \t]*(?:#{1,6}|\d{1,2}[.)]|[-*\u2022])?[ \t]*")
_NOT_WORD = re.compile(r"\W+")


def _said(sentence: str) -> str:
    """What a sentence says, for telling copies apart: without its citation groups, list
    marker, markup, case and punctuation."""
    text = _MARKUP.sub("", CITATION_GROUP.sub(" ", sentence)).replace("**", " ")
    return _NOT_WORD.sub(" ", text).strip().lower()


def _repeated(said: str, times: int) -> bool:
    words = len(said.split())
    return words >= 2 and (words >= LONG_WORDS or times >= LOOP_TIMES)


def drop_repeats(answer: str) -> str:
    """``answer`` with each repeated sentence said once, where it first appears: a sentence
    of ``LONG_WORDS`` words or more written again, or a shorter one (two words at least)
    written ``LOOP_TIMES`` times or more. A line left with nothing but its list marker goes
    too; headings, all-bold lines and the layout of the rest stay as written."""
    lines = answer.split("\n")
    sentences = [[line] if _LAYOUT.fullmatch(line) else _SENTENCE_END.split(line) for line in lines]
    counts = Counter(s for pieces in sentences for p in pieces if (s := _said(p)))
    if not any(_repeated(s, n) for s, n in counts.items() if n > 1):
        return answer
    seen: set[str] = set()
    kept_lines = []
    for line, pieces in zip(lines, sentences, strict=True):
        kept: list[str] = []
        marker = ""  # the list marker of a dropped first sentence, for the next one kept
        for piece in pieces:
            said = _said(piece)
            if said in seen and _repeated(said, counts[said]) and not _LAYOUT.fullmatch(piece):
                if not kept:
                    marker = _MARKUP.match(piece).group(0)  # type: ignore[union-attr]
                continue
            seen.add(said)
            kept.append(marker + piece.lstrip() if marker and not kept else piece)
        if kept != pieces:
            line = " ".join(kept)
            if not _said(line):
                continue  # the line held only copies (and its list marker)
        kept_lines.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept_lines)).strip()
