"""Resumable CRUX judging over questions and retrieval configurations, cached on disk.

Each question's sub-questions are written once (``subquestions.jsonl``); each
(passage, sub-question) and (final answer, sub-question) grade once
(``grades.jsonl``). A passage is graded by id, so a passage retrieved by several
configurations is judged once and the matrix is reused when a configuration
is added; rerunning only grades what is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval.context.judge import CruxJudge, GradeItem
from eval.store import JsonlStore

SUBQUESTIONS = "subquestions.jsonl"
GRADES = "grades.jsonl"


@dataclass
class ContextQuestion:
    """One question, the contexts each configuration retrieved for it, and their answers."""

    question_id: str
    question: str
    reference: str  # the best graded answer: the sub-questions' source
    contexts: dict[str, list[dict[str, Any]]]  # config -> ranked passages (id, title, text)
    answers: dict[str, str] = field(default_factory=dict)  # config -> final answer, if any
    gold: tuple[str, ...] = ()
    # "reference:GRADE" -> a graded Wiki-NFQA answer, graded like an answer for the judge's
    # validity check (not a configuration)
    references: dict[str, str] = field(default_factory=dict)


def reference_name(grade: int) -> str:
    """The key of a graded reference in :attr:`ContextQuestion.references`."""
    return f"reference:{grade}"


def passage_target(passage: Mapping[str, Any]) -> str:
    return f"passage:{passage['id']}"


def answer_target(config: str) -> str:
    return f"answer:{config}"


def passage_text(passage: Mapping[str, Any]) -> str:
    title = str(passage.get("title") or "").strip()
    return f"{title}\n{passage.get('text', '')}" if title else str(passage.get("text", ""))


def pool_of(q: ContextQuestion) -> dict[str, dict[str, Any]]:
    """Every passage of the question's pool once, by target, in first-seen order."""
    pool: dict[str, dict[str, Any]] = {}
    for passages in q.contexts.values():
        for p in passages:
            pool.setdefault(passage_target(p), p)
    return pool


def _grade_key(row: Mapping[str, Any]) -> str:
    return f"{row['question_id']}\t{row['target']}\t{row['sub_question']}"


class ContextRun:
    """One output directory of CRUX judgements; :meth:`judge_missing` does only what is missing."""

    def __init__(self, out_dir: Path, judge: CruxJudge, batch_size: int = 32) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.judge = judge
        self.batch_size = max(1, batch_size)
        self.subquestions = JsonlStore(
            self.out_dir / SUBQUESTIONS, key=lambda r: str(r["question_id"])
        )
        self.grades = JsonlStore(self.out_dir / GRADES, key=_grade_key)

    def sub_questions_of(self, question_id: str) -> list[str] | None:
        row = self.subquestions.get(question_id)
        return list(row["sub_questions"]) if row and row.get("status") == "ok" else None

    def grade_of(self, question_id: str, target: str, sub_question: str) -> int | None:
        row = self.grades.get(f"{question_id}\t{target}\t{sub_question}")
        return None if row is None else int(row["grade"])

    async def judge_missing(
        self,
        questions: Sequence[ContextQuestion],
        on_progress: Callable[[str, int, int], None] | None = None,
    ) -> None:
        """Write missing sub-questions, then grade every missing matrix cell."""
        await self._sub_questions(questions, on_progress)
        cells = [
            (q.question_id, target, sq, text)
            for q in questions
            for target, text in self._targets(q)
            for sq in self.sub_questions_of(q.question_id) or []
            if self.grade_of(q.question_id, target, sq) is None
        ]
        for start in range(0, len(cells), self.batch_size):
            chunk = cells[start : start + self.batch_size]
            grades = await self.judge.grade([GradeItem(text, sq) for _, _, sq, text in chunk])
            self.grades.append(
                [
                    {"question_id": qid, "target": target, "sub_question": sq, "grade": g}
                    for (qid, target, sq, _), g in zip(chunk, grades, strict=True)
                ]
            )
            if on_progress:
                on_progress("grade", start + len(chunk), len(cells))

    @staticmethod
    def _targets(q: ContextQuestion) -> list[tuple[str, str]]:
        """Every passage of the pool once (in first-seen order), then every answer, then the
        graded references."""
        passages = [(t, passage_text(p)) for t, p in pool_of(q).items()]
        answers = [(answer_target(c), a) for c, a in (q.answers | q.references).items()]
        return passages + [(t, a) for t, a in answers if a.strip()]

    async def _sub_questions(
        self,
        questions: Sequence[ContextQuestion],
        on_progress: Callable[[str, int, int], None] | None,
    ) -> None:
        todo = [q for q in questions if q.question_id not in self.subquestions]
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            outcomes = await self.judge.sub_questions(
                [q.question for q in chunk], [q.reference for q in chunk]
            )
            self.subquestions.append(
                [
                    {
                        "question_id": q.question_id,
                        "question": q.question,
                        "status": o.status,
                        "sub_questions": o.value or [],
                        "attempts": o.attempts,
                    }
                    for q, o in zip(chunk, outcomes, strict=True)
                ]
            )
            if on_progress:
                on_progress("sub-questions", start + len(chunk), len(todo))
