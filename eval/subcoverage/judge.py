"""Does a text cover a sub-question, and where does an answer start to address it?

The verdict is read from the judge's next-token distribution after ``[[``
over ``yes`` / ``no`` (one forward pass, no sampling: deterministic, as the
paper's judgements should be, and nothing to parse). The llama.cpp engine
tokenises the prompt plus prefix, then each choice on its own, and needs
each choice to be one token: bare ``yes`` / ``no`` after ``[[`` are, and this
is the form LINKAGE's relevance gate already uses. For an answer that covers
a sub-question, one generation copies the fragment that answers it, which
:func:`addressing_position` locates in the answer (Metric #6).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from eval.judging.resample import Judge, Outcome, Parsed, generate_until_parsed
from eval.subcoverage.decompose import BAD_SHAPE, NO_JSON
from eval.subcoverage.prompts import VERDICT_PREFIX, fragment_messages, verdict_messages
from typed_rag.engines.base import ChoiceRequest
from typed_rag.json_reply import extract_json

CHOICES: tuple[str, str] = ("yes", "no")
FRAGMENT_SCHEMA = {
    "title": "coverage_fragment",
    "type": "object",
    "properties": {"fragment": {"type": "string"}},
    "required": ["fragment"],
}
# A fragment not found verbatim is placed where its words overlap the answer most,
# if at least this share of its words is there.
MIN_OVERLAP = 0.5
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Cell:
    """One judgement: a text (an answer or one retrieved chunk) against one sub-question."""

    text: str
    sub_question: str


def verdict_request(text: str, sub_question: str) -> ChoiceRequest:
    return ChoiceRequest(verdict_messages(text, sub_question), VERDICT_PREFIX, CHOICES)


def p_yes(logprobs: dict[str, float]) -> float:
    """P(yes) renormalised over yes and no; 0.5 when the judge gives both no mass."""
    yes, no = (logprobs.get(c, -math.inf) for c in CHOICES)
    top = max(yes, no)
    if top == -math.inf:
        return 0.5
    a, b = math.exp(yes - top), math.exp(no - top)
    return a / (a + b)


def parse_fragment(text: str) -> Parsed[str]:
    """``{"fragment": "..."}``; "None" (or empty) is the judge saying nothing answers: ``""``."""
    try:
        value = extract_json(text)
    except ValueError:
        return Parsed(None, NO_JSON)
    if isinstance(value, dict):
        value = value.get("fragment")
    if value is None:
        return Parsed("")
    if not isinstance(value, str):
        return Parsed(None, BAD_SHAPE)
    value = value.strip().strip('"').strip()
    return Parsed("" if value.lower() in {"", "none", "null"} else value)


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def addressing_position(answer: str, fragment: str) -> float | None:
    """Where the answer starts to address a sub-question, as a share of its words:
    the fragment's first word is the k-th of n words -> k / n (the 20th word of a
    100-word answer is 0.2). Exact match of the fragment's words first, then of its
    first five, then the window sharing most words (at least :data:`MIN_OVERLAP`);
    None when it cannot be placed."""
    text, frag = words(answer), words(fragment)
    if not text or not frag:
        return None
    start = _find(text, frag)
    if start is None and len(frag) > 5:
        start = _find(text, frag[:5])
    if start is None:
        start = _best_window(text, frag)
    return None if start is None else (start + 1) / len(text)


def _find(text: list[str], frag: list[str]) -> int | None:
    m = len(frag)
    for i in range(len(text) - m + 1):
        if text[i : i + m] == frag:
            return i
    return None


def _best_window(text: list[str], frag: list[str]) -> int | None:
    want = Counter(frag)
    best, where = 0, None
    for i in range(len(text)):
        window = text[i : i + len(frag)]
        if window[0] not in want:  # a window starts at a word of the fragment
            continue
        got = sum((Counter(window) & want).values())
        if got > best:
            best, where = got, i
    return where if best >= MIN_OVERLAP * len(frag) else None


class CoverageJudge(Judge):
    """Yes/no coverage verdicts (batched choice scoring) and answer fragments (generation)."""

    async def verdicts(self, cells: Sequence[Cell]) -> list[float]:
        """P(yes) of each cell, in order; callers sort cells by text to share prefixes."""
        if not cells:
            return []
        results = await self.engine.score_choices(
            [verdict_request(c.text, c.sub_question) for c in cells]
        )
        return [p_yes(r.logprobs) for r in results]

    async def fragments(self, cells: Sequence[Cell]) -> list[Outcome[str]]:
        requests = [
            self.chat(fragment_messages(c.text, c.sub_question), FRAGMENT_SCHEMA) for c in cells
        ]
        return await generate_until_parsed(
            self.engine, requests, lambda _i, t: parse_fragment(t), self.max_resamples, self.seed
        )
