"""The CRUX judge: sub-questions for a question, and 0-5 answerability grades of a text.

Sub-questions are written from the question and its best graded Wiki-NFQA
answer, which stands in for CRUX's human-written oracle summary. A grade is
the judge's most probable digit after the rubric (one forward pass, no
sampling: deterministic, as the paper's temperature-0 judgements), and the
passage comes before the sub-question in the prompt so that consecutive grades
of one passage share their prompt prefix in the engine's cache.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eval.judging.resample import Judge, Outcome, Parsed, generate_until_parsed
from typed_rag.engines.base import ChoiceRequest
from typed_rag.json_reply import extract_json

MAX_SUB_QUESTIONS = 8
MAX_TEXT_CHARS = 1500
DIGITS: tuple[str, ...] = tuple(str(g) for g in range(6))

SUB_QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "questions": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "maxItems": MAX_SUB_QUESTIONS,
        }
    },
    "required": ["questions"],
}

GRADE_SYSTEM = "You grade how well a text answers a question. Reply with a single digit."
RUBRIC = (
    "Read the text, then rate how well it answers the question, using only what the text "
    "says (not your own knowledge):\n"
    "5 = it answers the question fully and directly\n"
    "4 = it answers the question, with small gaps\n"
    "3 = it gives the main point of the answer\n"
    "2 = it has related information, but not the answer\n"
    "1 = it is on the topic, but says nothing that answers\n"
    "0 = it is unrelated to the question"
)


def sub_question_messages(question: str, reference: str) -> list[dict[str, str]]:
    """Ask for the knowledge a complete answer needs, one short question per piece."""
    user = (
        "Below are a question and a good answer to it. Write short, self-contained questions, "
        "each asking for one distinct piece of information that a complete answer to the "
        f"question needs (at most {MAX_SUB_QUESTIONS}; no yes/no questions, no two asking the "
        'same). Reply with one JSON object: {"questions": [...]}.\n\n'
        f"Question: {question.strip()}\n\nGood answer: {reference.strip()}"
    )
    return [
        {"role": "system", "content": "You write evaluation questions. Reply in JSON only."},
        {"role": "user", "content": user},
    ]


def grade_request(text: str, sub_question: str) -> ChoiceRequest:
    user = (
        f"{RUBRIC}\n\nText:\n{text.strip()[:MAX_TEXT_CHARS]}\n\n"
        f"Question: {sub_question.strip()}\n\nRating (0-5):"
    )
    messages = [{"role": "system", "content": GRADE_SYSTEM}, {"role": "user", "content": user}]
    return ChoiceRequest(messages=messages, prefix="", choices=DIGITS)


def parse_sub_questions(text: str) -> Parsed[list[str]]:
    """``{"questions": [...]}``: non-empty strings, duplicates dropped, at most the maximum."""
    try:
        value = extract_json(text)
    except ValueError:
        return Parsed(None, "no-json")
    items = value.get("questions") if isinstance(value, dict) else value
    if not isinstance(items, list):
        return Parsed(None, "bad-shape")
    out = list(dict.fromkeys(q.strip() for q in items if isinstance(q, str) and q.strip()))
    return Parsed(out[:MAX_SUB_QUESTIONS]) if out else Parsed(None, "empty")


@dataclass(frozen=True)
class GradeItem:
    """One cell of the answerability matrix: a text (passage or answer) and a sub-question."""

    text: str
    sub_question: str


class CruxJudge(Judge):
    """Writes sub-questions (JSON, resampled until parsed) and grades texts against them."""

    async def sub_questions(
        self, questions: Sequence[str], references: Sequence[str]
    ) -> list[Outcome[list[str]]]:
        requests = [
            self.chat(sub_question_messages(q, ref), SUB_QUESTION_SCHEMA)
            for q, ref in zip(questions, references, strict=True)
        ]
        return await generate_until_parsed(
            self.engine,
            requests,
            lambda _i, text: parse_sub_questions(text),
            self.max_resamples,
            self.seed,
        )

    async def grade(self, items: Sequence[GradeItem]) -> list[int]:
        """The most probable grade of each item, in order."""
        if not items:
            return []
        results = await self.engine.score_choices(
            [grade_request(it.text, it.sub_question) for it in items]
        )
        return [int(max(DIGITS, key=lambda d: r.logprobs.get(d, -math.inf))) for r in results]
