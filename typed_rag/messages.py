"""Chat messages and the numbered-passage convention that every prompt shares.

Each prompt builder returns chat messages (a system and a user message); the
engine applies the model's chat template. Passages reach the model as numbered
text (``[n] Title`` then the passage) and answers are asked to cite ``[n]``.
The numbers are the ones kept in ``Result.passages``, so a citation in any
answer (sub-answer, perspective or final) points at the same passage.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

Messages = list[dict[str, str]]


class Numbered(Protocol):
    """A passage with the citation number it is shown under (e.g. ``CitedPassage``)."""

    citation: int
    title: str
    text: str


ANALYST_SYSTEM = (
    "You are a query analyst. You study a question of a known type and rewrite it into the "
    "pieces a search engine needs, so the final answer matches what the asker wants. "
    "You reply with JSON only."
)


def chat(system: str, user: str) -> Messages:
    """A system and a user message."""
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def format_passages(passages: Sequence[Numbered]) -> str:
    """``[n] Title`` followed by the passage text, one block per passage."""
    return "\n\n".join(f"[{p.citation}] {p.title}\n{p.text}" for p in passages)


# "[2]", and the lists small models write: "[2, 3]", "[2; 3]".
# A group glued to a word is an index in copied code or a footnote of the page, not a citation:
# "char name[80];" keeps its [80] (it was stripped as a citation of an unshown passage, and the
# line then cited [2]). Over 26k citations in the committed answers the model wrote 2 glued.
CITATION_GROUP = re.compile(r"(?<!\w)\[(\d{1,3}(?:\s*[,;]\s*\d{1,3})*)\]")


def cited_numbers(text: str) -> list[int]:
    """The citation numbers an answer uses, in order of first use."""
    seen: list[int] = []
    for match in CITATION_GROUP.finditer(text):
        for digits in re.findall(r"\d+", match.group(1)):
            n = int(digits)
            if n not in seen:
                seen.append(n)
    return seen


# The instruction lines of the answer prompts, as runs of words (``typed_rag.pipelines.prompting``
# registers each line with :func:`instruction`). A small model sometimes copies one into its
# answer as if it were content ("- Before writing, work out the core questions of the
# question: ..."); the scaffolding guard drops a sentence sharing a run with them
# (:mod:`typed_rag.finishing.scaffolding`). Eight words in a row: no answer states "the points
# any complete answer must address (not background".
COPIED_WORDS = 8
INSTRUCTION_RUNS: set[tuple[str, ...]] = set()


def word_runs(text: str) -> set[tuple[str, ...]]:
    """Every :data:`COPIED_WORDS` consecutive lower-case words of ``text``, "sub-questions"
    read as "questions" (the guard rewrites the one into the other, so a copy is found
    before and after the rewrite)."""
    words = re.findall(r"[a-z0-9]+", re.sub(r"\bsub-?(?=quer|question)", "", text.lower()))
    return {tuple(words[i : i + COPIED_WORDS]) for i in range(len(words) - COPIED_WORDS + 1)}


def instruction(text: str) -> str:
    """``text``, registered as an instruction line of the answer prompts."""
    INSTRUCTION_RUNS.update(word_runs(text))
    return text


# The section headings of the final answer prompts (``### Question`` ...). A small model
# sometimes copies them, with what follows, into its answer (``method.drop_echo``).
PROMPT_HEADINGS = (
    "Question",
    "Original question",
    "References",
    "Question-answer pairs",
    "Draft answer from memory",
    "Facts found",
    "How to write the answer",
    "Comparison type",
    "Items to compare",
    "Debate topic",
    "Responses",
    "Perspectives",
    "Answer",
)
