"""Parsing the coverage judge's JSON replies: sub-question decompositions, verdicts, scores.

Tolerant of fences and chatter around the JSON; a reply that cannot be read is a
failure status (``no-json``, ``bad-shape``, ``incomplete``), never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from eval.judging.resample import Parsed
from typed_rag.json_reply import extract_json

KINDS: tuple[str, ...] = ("core", "background", "follow_up")
MAX_PER_KIND = 5

NO_JSON = "no-json"
BAD_SHAPE = "bad-shape"
INCOMPLETE = "incomplete"


@dataclass
class Decomposition:
    """Sub-questions of one question, by kind."""

    core: list[str] = field(default_factory=list)
    background: list[str] = field(default_factory=list)
    follow_up: list[str] = field(default_factory=list)

    def of(self, kind: str) -> list[str]:
        return getattr(self, kind)

    def numbered(self) -> list[tuple[int, str, str]]:
        """(id, kind, text) with ids 1.. over all kinds, core first."""
        out = []
        for kind in KINDS:
            for text in self.of(kind):
                out.append((len(out) + 1, kind, text))
        return out

    def to_dict(self) -> dict[str, list[str]]:
        return {k: list(self.of(k)) for k in KINDS}

    @classmethod
    def from_dict(cls, value: dict[str, list[str]]) -> Decomposition:
        return cls(**{k: list(value.get(k, [])) for k in KINDS})


def _clean_list(value: Any) -> list[str] | None:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return None
    out: list[str] = []
    for item in value:
        if not isinstance(item, str):
            return None
        item = item.strip()
        if item and item.lower() not in {o.lower() for o in out}:
            out.append(item)
    return out[:MAX_PER_KIND]


def parse_decomposition(text: str) -> Parsed[Decomposition]:
    """Accepts ``follow_up``/``follow-up``/``followup`` keys; at least one core sub-question."""
    try:
        obj = extract_json(text)
    except ValueError:
        return Parsed(None, NO_JSON)
    if not isinstance(obj, dict):
        return Parsed(None, BAD_SHAPE)
    norm = {re.sub(r"[^a-z]", "", str(k).lower()): v for k, v in obj.items()}
    parts = {k: _clean_list(norm.get(k.replace("_", ""))) for k in KINDS}
    if any(v is None for v in parts.values()):
        return Parsed(None, BAD_SHAPE)
    if not parts["core"]:
        return Parsed(None, INCOMPLETE)
    return Parsed(Decomposition(**parts))  # type: ignore[arg-type]


def _verdict_rows(obj: Any, list_key: str) -> list[Any] | None:
    if isinstance(obj, dict):
        obj = obj.get(list_key)
    return obj if isinstance(obj, list) else None


def parse_coverage(text: str, n: int) -> Parsed[list[bool]]:
    """``{"verdicts": [{"id", "covered"}]}`` (or a bare list of them / of booleans) for ids 1..n."""
    try:
        rows = _verdict_rows(extract_json(text), "verdicts")
    except ValueError:
        return Parsed(None, NO_JSON)
    if rows is None:
        return Parsed(None, BAD_SHAPE)
    if rows and all(isinstance(r, bool) for r in rows):
        return Parsed(list(rows)) if len(rows) == n else Parsed(None, INCOMPLETE)
    found: dict[int, bool] = {}
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("covered"), bool):
            return Parsed(None, BAD_SHAPE)
        rid = row.get("id")
        if isinstance(rid, bool) or not isinstance(rid, int) or not 1 <= rid <= n:
            return Parsed(None, BAD_SHAPE)
        found[rid] = row["covered"]
    if len(found) != n:
        return Parsed(None, INCOMPLETE)
    return Parsed([found[i] for i in range(1, n + 1)])


def parse_answerability(text: str, n: int) -> Parsed[list[int]]:
    """``{"scores": [{"id", "score" 0..5}]}`` for ids 1..n."""
    try:
        rows = _verdict_rows(extract_json(text), "scores")
    except ValueError:
        return Parsed(None, NO_JSON)
    if rows is None:
        return Parsed(None, BAD_SHAPE)
    found: dict[int, int] = {}
    for row in rows:
        if not isinstance(row, dict):
            return Parsed(None, BAD_SHAPE)
        rid, score = row.get("id"), row.get("score")
        if isinstance(rid, bool) or not isinstance(rid, int) or not 1 <= rid <= n:
            return Parsed(None, BAD_SHAPE)
        if isinstance(score, bool) or not isinstance(score, int) or not 0 <= score <= 5:
            return Parsed(None, BAD_SHAPE)
        found[rid] = score
    if len(found) != n:
        return Parsed(None, INCOMPLETE)
    return Parsed([found[i] for i in range(1, n + 1)])
