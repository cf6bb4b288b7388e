"""What sub-question coverage judges: an evaluation run's answers and the chunks each method saw."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Passage (title, text) by id, for runs committed without texts (eval.store_passage_text=false).
Lookup = Callable[[Sequence[str]], Mapping[str, tuple[str, str]]]


@dataclass
class Chunk:
    id: str
    text: str  # the title, then the passage text: what the generator was shown


@dataclass
class AnswerItem:
    """One row of answers.jsonl: a method's answer to a question and the chunks it retrieved."""

    method: str
    question_id: str
    question: str
    type: str
    answer: str
    chunks: list[Chunk] = field(default_factory=list)
    missing_texts: int = 0  # retrieved chunks with no text, left out

    @property
    def answer_target(self) -> str:
        """Keyed by the answer's text too, so a regenerated answer is judged afresh."""
        digest = hashlib.sha1(self.answer.encode("utf-8")).hexdigest()[:12]
        return f"answer:{self.method}:{digest}"


def chunk_target(chunk_id: str) -> str:
    return f"passage:{chunk_id}"


def chunk_text(title: str, text: str) -> str:
    title = (title or "").strip()
    return f"{title}\n{text}" if title else text


def answer_items(
    rows: Iterable[Mapping[str, Any]],
    lookup: Lookup | None = None,
    methods: Sequence[str] | None = None,
) -> list[AnswerItem]:
    """Answer rows (optionally only ``methods``) as items, with the passages shown to the
    generator in citation order; texts a run left out are looked up by id when ``lookup``
    is given, else those chunks are left out and counted."""
    chosen = [r for r in rows if methods is None or r.get("method") in methods]
    missing = sorted(
        {
            str(p["id"])
            for r in chosen
            for p in _passages(r)
            if not p.get("text") and p.get("id") is not None
        }
    )
    found: Mapping[str, tuple[str, str]] = lookup(missing) if lookup and missing else {}
    items = []
    for row in chosen:
        item = AnswerItem(
            method=str(row["method"]),
            question_id=str(row["question_id"]),
            question=str(row.get("question") or ""),
            type=str(row.get("type") or "UNKNOWN"),
            answer=str(row.get("answer") or ""),
        )
        seen: set[str] = set()
        for p in _passages(row):
            pid = str(p.get("id"))
            if pid in seen:
                continue
            seen.add(pid)
            title, text = str(p.get("title") or ""), p.get("text")
            if not text and pid in found:
                title, text = found[pid]
            if not text:
                item.missing_texts += 1
                continue
            item.chunks.append(Chunk(pid, chunk_text(title, str(text))))
        items.append(item)
    return items


REFERENCE = "reference"  # the method name of a graded reference: "reference:3"


def reference_items(
    records: Iterable[Any], types: Mapping[str, str], grades: Sequence[int] = (3, 0)
) -> list[AnswerItem]:
    """Each question's first Wiki-NFQA answer of each of ``grades`` as an answer with no
    chunks (``records``: WikiNFQARecord), for the judge-validity check: a coverage judge
    worth reading finds more of the core sub-questions in a grade-3 answer than in a grade-0
    one. ``types`` gives each question's type (as the run's rows)."""
    items = []
    for record in records:
        for grade in grades:
            graded = zip(record.answers, record.labels, strict=True)
            text = next((a for a, g in graded if g == grade), None)
            if text:
                items.append(
                    AnswerItem(
                        method=f"{REFERENCE}:{grade}",
                        question_id=record.question_id,
                        question=record.question,
                        type=types.get(record.question_id, "UNKNOWN"),
                        answer=text,
                    )
                )
    return items


def _passages(row: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    passages = (row.get("result") or {}).get("passages") or []
    return sorted(passages, key=lambda p: int(p.get("citation") or 0))
