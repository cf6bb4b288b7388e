"""The paper's two-step decomposition: list sub-questions, then classify each one.

Both steps are JSON under a schema, parsed tolerantly and resampled a bounded
number of times (:func:`eval.judging.resample.generate_until_parsed`); a question
whose steps never parse is recorded with the reason, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eval.judging.resample import Judge, Outcome, Parsed, generate_until_parsed
from eval.subcoverage.prompts import MAX_SUB_QUESTIONS, classify_messages, list_messages
from typed_rag.json_reply import extract_json

KINDS: tuple[str, ...] = ("core", "background", "follow_up")

NO_JSON = "no-json"
BAD_SHAPE = "bad-shape"
EMPTY = "empty"
INCOMPLETE = "incomplete"

LIST_SCHEMA: dict[str, Any] = {
    "title": "sub_question_list",
    "type": "object",
    "properties": {
        "sub_questions": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "maxItems": MAX_SUB_QUESTIONS,
        }
    },
    "required": ["sub_questions"],
}
CLASSIFY_SCHEMA: dict[str, Any] = {
    "title": "sub_question_labels",
    "type": "object",
    "properties": {
        "labels": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "type": {"type": "string", "enum": list(KINDS)},
                },
                "required": ["id", "type"],
            },
        }
    },
    "required": ["labels"],
}


@dataclass(frozen=True)
class SubQuestion:
    text: str
    kind: str  # one of KINDS


def parse_list(text: str) -> Parsed[list[str]]:
    """``{"sub_questions": [...]}`` (or a bare list): non-empty strings, case-insensitive
    duplicates dropped, at most :data:`MAX_SUB_QUESTIONS`."""
    try:
        value = extract_json(text)
    except ValueError:
        return Parsed(None, NO_JSON)
    if isinstance(value, dict):
        value = next((v for k, v in value.items() if "question" in str(k).lower()), None)
    if not isinstance(value, list):
        return Parsed(None, BAD_SHAPE)
    out: dict[str, str] = {}
    for item in value:
        if isinstance(item, str) and item.strip():
            out.setdefault(item.strip().lower(), item.strip())
    items = list(out.values())[:MAX_SUB_QUESTIONS]
    return Parsed(items) if items else Parsed(None, EMPTY)


def normalise_kind(value: Any) -> str | None:
    """ "Core", "follow-up", "Follow up sub-question", "followup" ... -> a KINDS name."""
    word = re.sub(r"[^a-z]", "", str(value).lower()).removesuffix("subquestion")
    for kind in KINDS:
        if word == kind.replace("_", ""):
            return kind
    return None


def parse_labels(text: str, n: int) -> Parsed[list[str]]:
    """``{"labels": [{"id", "type"}]}`` with every id 1..n; the first label of an id wins."""
    try:
        value = extract_json(text)
    except ValueError:
        return Parsed(None, NO_JSON)
    rows = value.get("labels") if isinstance(value, dict) else value
    if not isinstance(rows, list):
        return Parsed(None, BAD_SHAPE)
    found: dict[int, str] = {}
    for row in rows:
        if not isinstance(row, dict):
            return Parsed(None, BAD_SHAPE)
        rid, kind = row.get("id"), normalise_kind(row.get("type"))
        if isinstance(rid, str) and rid.strip().isdigit():
            rid = int(rid)
        if isinstance(rid, bool) or not isinstance(rid, int) or not 1 <= rid <= n or kind is None:
            return Parsed(None, BAD_SHAPE)
        found.setdefault(rid, kind)
    if len(found) != n:
        return Parsed(None, INCOMPLETE)
    return Parsed([found[i] for i in range(1, n + 1)])


class Decomposer(Judge):
    """Lists sub-questions for many questions in one batch, then classifies them in another."""

    async def list_sub_questions(self, questions: Sequence[str]) -> list[Outcome[list[str]]]:
        requests = [self.chat(list_messages(q), LIST_SCHEMA) for q in questions]
        return await generate_until_parsed(
            self.engine, requests, lambda _i, t: parse_list(t), self.max_resamples, self.seed
        )

    async def classify(
        self, questions: Sequence[str], sub_questions: Sequence[Sequence[str]]
    ) -> list[Outcome[list[str]]]:
        requests = [
            self.chat(classify_messages(q, subs), CLASSIFY_SCHEMA)
            for q, subs in zip(questions, sub_questions, strict=True)
        ]
        sizes = [len(s) for s in sub_questions]
        return await generate_until_parsed(
            self.engine,
            requests,
            lambda i, t: parse_labels(t, sizes[i]),
            self.max_resamples,
            self.seed,
        )
