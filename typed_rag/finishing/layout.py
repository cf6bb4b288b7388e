"""The answer's layout after every removal of finishing: what the cuts leave, tidied.

The cuts of finishing remove sentences and list items one at a time (the verification, the
scaffolding guard, the echo and copy cuts), so what they leave can read as broken markdown: a
list that starts at "2." or skips from "1." to "3.", and a DEBATE answer's bold sub-questions
("**What are the advantages of X?**") whose content was all removed, left standing alone.
:func:`tidy_layout` runs once, after the last removal (:func:`~typed_rag.finishing.finish.
last_checks`). First, what is not a claim carries no citation (:func:`uncite_non_claims`): a
heading ("### Reasons to avoid destructors [3]"), a lead-in whose content is what follows
("... as follows [1]:"), a code comment copied outside a fence; a heading naming only sources
("### Reference") goes. Then a line repeating an earlier one goes (:func:`drop_repeated_lines`),
so do question headings nothing follows (:func:`drop_empty_questions`), and each ordered list
is numbered consecutively (:func:`renumber_lists`). Fenced code blocks are never touched.
Deterministic, no model call.
"""

from __future__ import annotations

import re

from typed_rag.finishing.verify import FENCE
from typed_rag.messages import CITATION_GROUP

_LIST = r"(?:(?:[-*+•]|\d{1,3}[.)])[ \t]+)"
_CITES = r"(?:[ \t]*\[[\d,; ]+\])*"
# A line that opens with a question in bold: "**What is X?**", "1. **How does Y work [2]?**",
# "- **Why?** Because ..." (``rest``: what follows it on the line).
_QUESTION = re.compile(
    rf"^(?P<indent>[ \t]*)(?:#{{1,6}}[ \t]+)?{_LIST}?(?:#{{1,6}}[ \t]+)?"
    rf"\*\*[^*\n]*\?{_CITES}[ \t]*\*\*(?P<rest>.*)$"
)
# A markdown heading that is a question: "### What is X?"
_HEADING_QUESTION = re.compile(rf"^(?P<indent>[ \t]*)#{{1,6}}[ \t]+[^\n]*\?{_CITES}[ \t]*:?[ \t]*$")
# Nothing after the bold question but a colon or citations.
_NOTHING = re.compile(rf"[ \t]*:?{_CITES}[ \t:]*")
# A line that only heads what follows: a markdown heading, or bold text alone ("**Answer**:").
_HEADING = re.compile(
    rf"^[ \t]*(?:#{{1,6}}[ \t]+\S.*|{_LIST}?\*\*[^*\n]+\*\*[ \t]*:?{_CITES}[ \t]*)$"
)
# An ordered list item: "3. ...", "  2) ...".
_ITEM = re.compile(r"^(?P<indent>[ \t]*)(?P<num>\d{1,3})(?P<delim>[.)])(?=[ \t]+\S)")


# A code comment copied outside a fence: "// Copy the elements [3]".
_COMMENT = re.compile(r"^[ \t]*(?://|/\*)")
# What is left of a label line once its citations are gone: "5. **Reference**:".
_SOURCE_LABEL = re.compile(
    rf"[ \t]*(?:#{{1,6}}[ \t]+)?{_LIST}?(?:\*\*)?[ \t]*(?:references?|sources?|citations?|passages?)?[ \t]*"
    r"(?:\*\*)?[ \t:.]*",
    re.IGNORECASE,
)
_SPACED_CITATION = re.compile(rf"[ \t]*{CITATION_GROUP.pattern}")
# A lead-in whose content is what follows it: "... can be used as follows [1]:".
_LEAD_IN = re.compile(
    rf"(?:as follows|the following|these steps|the steps below|below){_CITES}[ \t]*:[*\s]*$",
    re.IGNORECASE,
)


def _width(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())


def _fenced(lines: list[str]) -> list[bool]:
    """Per line, whether it opens, closes or sits inside a fenced code block."""
    out: list[bool] = []
    inside = False
    for line in lines:
        fence = line.lstrip().startswith(FENCE)
        out.append(inside or fence)
        inside ^= fence
    return out


def _question_only(line: str) -> bool:
    m = _QUESTION.match(line)
    return bool((m and _NOTHING.fullmatch(m["rest"])) or _HEADING_QUESTION.match(line))


def drop_empty_questions(answer: str) -> str:
    """``answer`` without the lines that are only a question heading (a question in bold,
    list-marked or not, or a markdown heading ending in "?") with no content under it: the
    next non-blank line is another heading (a question in bold, with or without text after
    it, a markdown heading, a bold label alone) at its depth or above, or the answer ends.
    A plain list item that asks a question ("1. Is X needed?") is content and stays; so does
    everything when every line would go."""
    lines = answer.split("\n")
    fenced = _fenced(lines)
    gone: set[int] = set()
    for i, line in enumerate(lines):
        if fenced[i] or not _question_only(line):
            continue
        j = next((k for k in range(i + 1, len(lines)) if lines[k].strip()), None)
        if j is not None:
            nxt = lines[j]
            deeper = _width(nxt) > _width(line)
            heading = not fenced[j] and bool(_QUESTION.match(nxt) or _HEADING.match(nxt))
            if deeper or not heading:
                continue
        gone.add(i)
        # the blank lines after it go with it, unless it sat right under a line of text
        if i == 0 or not lines[i - 1].strip() or j is None:
            gone.update(range(i + 1, j if j is not None else len(lines)))
    kept = [line for i, line in enumerate(lines) if i not in gone]
    if not gone or not any(line.strip() for line in kept):
        return answer
    return "\n".join(kept).strip()


def renumber_lists(answer: str) -> str:
    """``answer`` with each ordered list numbered consecutively.

    A list is the run of items at one depth whose numbers rise as written; text between
    items (a paragraph, a nested list, a code block) does not end it, a number no higher
    than the one before (a new list) or a line less indented than its items does. A list
    numbers on from its first number, from 1 when that is above 1 (its first item was
    removed). Fenced code blocks are never touched.
    """
    lines = answer.split("\n")
    fenced = _fenced(lines)
    lists: dict[int, tuple[int, int]] = {}  # depth -> (the number written, the number given)
    for i, line in enumerate(lines):
        if fenced[i] or not line.strip():
            continue
        width = _width(line)
        for depth in [d for d in lists if d > width]:
            del lists[depth]
        m = _ITEM.match(line)
        if not m:
            continue
        written = int(m["num"])
        last = lists.get(width)
        given = last[1] + 1 if last and written > last[0] else min(written, 1)
        lists[width] = (written, given)
        if given != written:
            lines[i] = f"{m['indent']}{given}{m['delim']}{line[m.end() :]}"
    return "\n".join(lines)


def uncite_non_claims(answer: str) -> str:
    """``answer`` with no citations on its headings (a markdown heading, a bold line alone),
    its lead-ins ("... as follows [1]:", whose content is what follows) or code comments
    outside fences, and without the headings that name only sources
    ("### Reference", "5. **Reference [5]**:"; what stands under them stays). Citations in
    sentences, bold labels followed by text ("**Options**: ... [1]") and fenced code stay."""
    lines = answer.split("\n")
    fenced = _fenced(lines)
    kept: list[str] = []
    for i, line in enumerate(lines):
        heading = not fenced[i] and bool(_HEADING.match(line))
        bare = _SPACED_CITATION.sub("", line)
        if heading and _SOURCE_LABEL.fullmatch(bare):
            continue
        cited = not fenced[i] and bool(CITATION_GROUP.search(line))
        pointer = heading or _COMMENT.match(line) or _LEAD_IN.search(line)
        kept.append(bare if cited and pointer else line)
    if not any(line.strip() for line in kept):
        return answer
    return "\n".join(kept)


_MARKER = re.compile(rf"^[ \t]*{_LIST}")


def _gist(line: str) -> str:
    """A line's words without its list marker and citations, lowercased: what a repeat of
    it shares."""
    text = _SPACED_CITATION.sub("", _MARKER.sub("", line))
    return " ".join(re.findall(r"\w+", text.lower()))


def drop_repeated_lines(answer: str, min_words: int = 4) -> str:
    """``answer`` without the lines (list items, paragraphs) that repeat an earlier line's
    words, list marker and citations aside: the small model sometimes writes one list item
    three times over. Short lines (a label, "}") and fenced code stay."""
    lines = answer.split("\n")
    fenced = _fenced(lines)
    seen: set[str] = set()
    kept: list[str] = []
    for i, line in enumerate(lines):
        gist = "" if fenced[i] else _gist(line)
        if len(gist.split()) >= min_words:
            if gist in seen:
                continue
            seen.add(gist)
        kept.append(line)
    return "\n".join(kept)


def tidy_layout(answer: str) -> str:
    """``answer`` after the removals of finishing: headings uncited, repeated lines and
    empty question headings dropped, then the ordered lists renumbered."""
    return renumber_lists(drop_empty_questions(drop_repeated_lines(uncite_non_claims(answer))))
