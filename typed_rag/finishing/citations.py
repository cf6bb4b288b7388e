"""Citations that hold: which ``[n]`` of an answer point at a shown passage, and their share.

Every passage a question's run showed the model has one global number
(``Result.passages[*].citation``). A number outside that set is a citation a
user cannot check; :func:`check_citations` separates valid from invalid ones,
:func:`strip_invalid` removes the invalid ones from the text, and
:func:`citation_share` (judge-free) is the share of answers that cite at least
one shown passage, for the evaluation report. :func:`cited_sentences` splits an
answer into sentences with their citations, the unit a support judge checks.
:func:`attach_citations` cites, after the fact, the shown passage that shares
most words with a sentence the model left uncited (ALCE's "post-hoc cite"), and
drops citations whose passage shares too few of their sentence's words.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from typed_rag.finishing.sentences import NOT_ABBREVIATION
from typed_rag.finishing.subanswers import content_words, stem
from typed_rag.messages import CITATION_GROUP, Numbered, cited_numbers


@dataclass(frozen=True)
class CitationCheck:
    """The distinct citation numbers of an answer, in order of first use."""

    valid: list[int]
    invalid: list[int]


def check_citations(answer: str, shown: Collection[int]) -> CitationCheck:
    """Split the numbers ``answer`` cites into those in ``shown`` and the others."""
    numbers = cited_numbers(answer)
    return CitationCheck(
        valid=[n for n in numbers if n in shown], invalid=[n for n in numbers if n not in shown]
    )


def strip_invalid(answer: str, shown: Collection[int]) -> str:
    """``answer`` without citation numbers outside ``shown`` (``[2, 9]`` -> ``[2]``)."""

    def keep(match: re.Match[str]) -> str:
        numbers = [int(n) for n in re.findall(r"\d+", match.group(2))]
        valid = [n for n in numbers if n in shown]
        return f"{match.group(1)}[{', '.join(str(n) for n in valid)}]" if valid else ""

    return _SPACED_GROUP.sub(keep, answer)


_SPACED_GROUP = re.compile(r"([ \t]*)" + CITATION_GROUP.pattern)


_ONLY_CITATIONS = re.compile(r"(\[[\d,; ]+\]\s*)+[.!?]?")
_SENTENCE = re.compile(rf"{NOT_ABBREVIATION}(?<=[.!?])\s+(?=[A-Z0-9\"'(*\[-])")
_LIST_MARKER = re.compile(r"(?:\d{1,2}[.)]|[-*•])")


def _is_fence(line: str) -> bool:
    """A line that opens or closes a fenced code block."""
    return line.lstrip().startswith("```")


def cited_sentences(answer: str) -> list[tuple[str, list[int]]]:
    """The answer's sentences (or list items) that cite something, with their numbers."""
    return [(s, nums) for s in split_sentences(answer) if (nums := cited_numbers(s))]


def split_sentences(answer: str) -> list[str]:
    """The answer's sentences and list items, each with its citations.

    A citation written just after the full stop (``... rises. [2]``) belongs to
    the sentence before it; a list marker (``1.``) to the sentence after it. A fenced code
    block holds no sentences: ``char name[2];`` is code, not a claim citing passage 2.
    """
    merged: list[str] = []
    in_fence = False
    for line in answer.splitlines():
        if _is_fence(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        pieces = [p.strip() for p in _SENTENCE.split(line) if p and p.strip()]
        marker = ""
        for piece in pieces:
            if _LIST_MARKER.fullmatch(piece):
                marker += piece + " "
            elif merged and not marker and _ONLY_CITATIONS.fullmatch(piece):
                merged[-1] += " " + piece
            else:
                merged.append(marker + piece)
                marker = ""
    return merged


# A sentence's citation holds lexically when the cited passage shares at least this many
# of its content words, and at least ``min_share`` of them (``method.cite_min_share``).
POST_CITE_MIN_WORDS = 3
POST_CITE_MIN_SHARE = 0.3
_SPLIT_KEEP = re.compile(rf"({NOT_ABBREVIATION}(?<=[.!?])[ \t]+)")
_TRAILING_PUNCT = re.compile(r"([.!?:;]*)([\s\"')*]*)$")
# One or more adjacent citation groups ("[2]", "[2][3]").
_GROUPS = f"(?:{CITATION_GROUP.pattern})+"
# The same, also apart by spaces or commas ("[1] [3]", "[1], [4]").
_RUN = re.compile(rf"{CITATION_GROUP.pattern}(?:[ \t]*[,;]?[ \t]*{CITATION_GROUP.pattern})*")
# "... rises. [2] Next ..." (or at the line's end): the group after a full stop cites the
# sentence before it.
_AFTER_END = re.compile(
    r"([.!?])([\"')*]*)[ \t]+(" + _GROUPS + r")(?=[ \t]+\S|[ \t]*$)", re.MULTILINE
)
# The same group again right after itself ("dried [1] [1].", from a group moved in).
_REPEATED = re.compile(rf"(?P<group>{CITATION_GROUP.pattern})(?:[ \t]*(?P=group))+")
# A list marker or bold opening before a sentence's first word.
_LEAD = re.compile(rf"\s*(?:{_LIST_MARKER.pattern}\s+)?(?:\*\*)?\s*")
# A line of code copied outside a fence (a statement, a brace, a comment): never post-cited,
# "void print(PERSON const *p) [2];" is broken code, not a cited claim.
_CODE_LINE = re.compile(r".*[;{}][ \t]*$|[ \t]*(?://|/\*|#include\b)")
# A line that only points at passages: "- **Reference:** [1]", "Sources: [2][3]", "[1]".
_LABEL_LINE = re.compile(
    r"\s*(?:[-*\u2022]\s*)?(?:\*\*)?(?:(?:references?|citations?|sources?)\b[\s:*]*)?"
    + _GROUPS
    + r"[\s.]*",
    re.IGNORECASE,
)


def _into_sentence_before(m: re.Match[str]) -> str:
    """``. [2]`` -> `` [2].`` for :data:`_AFTER_END`, unless the full stop ends a list
    marker ("1. [3] ...")."""
    line_start = m.string.rfind("\n", 0, m.start()) + 1
    if re.fullmatch(r"\s*\d{1,2}", m.string[line_start : m.start()]):
        return m.group(0)
    return f" {m.group(3)}{m.group(1)}{m.group(2)}"


def _own_groups(sentence: str) -> re.Match[str] | None:
    """The sentence's one run of adjacent citation groups ("[2]", "[1][3]", "[1], [4]")
    when it opens or ends the sentence, the groups post-citing checks; None when it has
    none, several runs, or one inside its wording ("according to [2]", "sources [1] and
    [3]"), which is the model's and stays."""
    runs = list(_RUN.finditer(sentence))
    if len(runs) != 1:
        return None
    run = runs[0]
    trailing = not re.search(r"\w", sentence[run.end() :])
    lead = _LEAD.match(sentence)
    leading = lead is not None and lead.end() == run.start()
    return run if trailing or leading else None


@dataclass(frozen=True)
class Recited:
    """An answer after :func:`attach_citations`: the numbers it added and dropped, in order."""

    answer: str
    added: list[int]
    dropped: list[int]


def attach_citations(
    answer: str,
    passages: Sequence[Numbered],
    min_share: float = POST_CITE_MIN_SHARE,
    floor_share: float | None = None,
) -> Recited:
    """Cite by content-word overlap (ALCE's post-hoc citing), layout kept as written.

    An uncited sentence gets the ``[n]`` of the shown passage sharing most of its
    content words, when that passage shares ``min_share`` of them. A sentence ending
    or opening with one citation group, or one run of them ("[1][3]"), whose shown
    passages all fall below that loses it (and gets the best passage instead, when one qualifies), so re-citing an answer at a higher
    ``min_share`` gives what citing it there in the first place would have: on the
    committed runs, this overlap share was what separated the citations the support
    judge upheld. Groups naming only passages never shown are left to
    :func:`strip_invalid`. Two layouts of the small model are read as it meant them: a
    group after a full stop ("rises. [2] Next") moves into the sentence it cites
    ("rises [2]. Next"), and a line that only points at passages ("- **Reference:** [1]")
    (or "[1]" alone) is removed, since it states nothing a reader could check, unless the
    paragraph above it cites nothing: then its groups cite that paragraph's last sentence.
    A group repeated right after itself ("dried [1] [1].") is written once.

    With ``floor_share``, an answer left citing no shown passage cites its one best
    match, the sentence and passage sharing the largest share of its words, when that
    share reaches the floor: a strict ``min_share`` then keeps weak matches out of
    answers that have strong ones without leaving the others with no source at all.
    """
    bags = {p.citation: {stem(w) for w in content_words(f"{p.title} {p.text}")} for p in passages}
    added: list[int] = []
    dropped: list[int] = []

    def holds(words: set[str], number: int, share: float = min_share) -> bool:
        overlap = len(words & bags[number])
        return overlap >= POST_CITE_MIN_WORDS and overlap >= share * len(words)

    def cite(sentence: str, number: int | str) -> str:
        """``sentence`` citing ``number`` (or a run of groups) before its end punctuation."""
        m = _TRAILING_PUNCT.search(sentence)
        assert m is not None  # the pattern matches the empty end of any string
        groups = number if isinstance(number, str) else f"[{number}]"
        return f"{sentence[: m.start()]} {groups}{m.group(1)}{m.group(2)}"

    answer = _REPEATED.sub(r"\g<group>", _AFTER_END.sub(_into_sentence_before, answer))
    lines: list[list[str]] = []
    for line in answer.split("\n"):
        if not _LABEL_LINE.fullmatch(line):
            lines.append(_SPLIT_KEEP.split(line))
            continue
        written = [pieces for pieces in lines if "".join(pieces).strip()]
        if written and not CITATION_GROUP.search("".join(written[-1])):
            # The references under a paragraph that cites nothing are its citations.
            groups = "".join(m.group(0) for m in CITATION_GROUP.finditer(line))
            last = written[-1]
            i = max(j for j in range(0, len(last), 2) if last[j].strip())
            last[i] = cite(last[i], groups)
        else:
            dropped += cited_numbers(line)
    # The best uncited match: (share, line, piece, number), for ``floor_share``.
    best: tuple[float, int, int, int] | None = None
    in_fence = False
    for li, pieces in enumerate(lines):
        if _is_fence("".join(pieces)):
            in_fence = not in_fence
            continue
        if in_fence:  # a citation inside a code block would break the code
            continue
        for i in range(0, len(pieces), 2):  # odd indices are the kept separators
            sentence = pieces[i]
            words = {stem(w) for w in content_words(sentence)}
            if len(words) < POST_CITE_MIN_WORDS or not bags or _CODE_LINE.match(sentence):
                continue
            if CITATION_GROUP.search(sentence):
                group = _own_groups(sentence)
                if group is None:
                    continue
                cited = cited_numbers(group.group(0))
                if any(holds(words, n) for n in cited if n in bags) or not (set(cited) & set(bags)):
                    continue
                head, tail = sentence[: group.start()], sentence[group.end() :]
                trailing = not re.search(r"\w", tail)
                sentence = head.rstrip() + tail if trailing else head + tail.lstrip()
                dropped += cited
                pieces[i] = sentence
            # The passage sharing most words that holds (by words alone, the first or none).
            ranked = sorted(bags, key=lambda n: -len(words & bags[n]))
            number = next((n for n in ranked if holds(words, n)), None)
            if number is not None:
                pieces[i] = cite(sentence, number)
                added.append(number)
                continue
            if floor_share is None:
                continue
            number = next((n for n in ranked if holds(words, n, floor_share)), None)
            if number is not None:
                share = len(words & bags[number]) / len(words)
                if best is None or share > best[0]:
                    best = (share, li, i, number)
    text = "\n".join("".join(pieces) for pieces in lines)
    if best is not None and not set(cited_numbers(text)) & set(bags):
        _, li, i, number = best
        lines[li][i] = cite(lines[li][i], number)
        added.append(number)
        text = "\n".join("".join(pieces) for pieces in lines)
    return Recited(text, added, dropped)


def without_citations(answer: str) -> str:
    """``answer`` with every ``[n]`` group removed and no space left before punctuation."""
    return re.sub(r"[ \t]+([.,;:!?])", r"\1", strip_invalid(answer, ())).strip()


def _valid_citations(result: Any) -> list[int]:
    """The citations of a Result (or its JSON dict) that point at one of its passages.

    Computed from the answer and passages, so traces written before
    ``Result.citations`` existed count the same way.
    """
    data: Mapping[str, Any] = result.model_dump() if hasattr(result, "model_dump") else result
    shown = {int(p["citation"]) for p in data.get("passages") or []}
    return check_citations(str(data.get("answer") or ""), shown).valid


def citation_share(results: Iterable[Any]) -> float | None:
    """Share of answers citing at least one shown passage (None for no answers).

    Takes Results or their JSON dicts (``answers.jsonl``'s ``result``); judge-free.
    """
    flags = [bool(_valid_citations(r)) for r in results if r is not None]
    return sum(flags) / len(flags) if flags else None
