"""Resumable sub-question coverage judging, cached on disk so a rerun only judges what is missing.

Per question, its sub-questions (``subquestions.jsonl``) and their kinds
(``labels.jsonl``) are written once and shared by every method. Per
(text, sub-question), the yes/no verdict is written once (``verdicts.jsonl``):
a chunk is keyed by its passage id, so a chunk several methods retrieved is
judged once; an answer by its method and a hash of its text. A verdict is stored as the judge's
P(yes); whether the cell counts as covered is decided when read, against the run's
threshold, so a recalibrated threshold needs no new verdicts. Per covered answer
cell, the fragment that answers it is written once (``fragments.jsonl``).
Failures are cached with their reason like successes: judges are
deterministic, so asking again would repeat them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from eval.store import JsonlStore
from eval.subcoverage.decompose import Decomposer, SubQuestion
from eval.subcoverage.inputs import AnswerItem, chunk_target
from eval.subcoverage.judge import Cell, CoverageJudge, addressing_position
from eval.subcoverage.metrics import AnswerCells

SUBQUESTIONS = "subquestions.jsonl"
LABELS = "labels.jsonl"
VERDICTS = "verdicts.jsonl"
FRAGMENTS = "fragments.jsonl"

Progress = Callable[[str, int, int], None]


def cell_key(row: Mapping[str, Any]) -> str:
    return f"{row['question_id']}\t{row['target']}\t{row['sub_question']}"


class SubCoverageRun:
    """One output directory of judgements; :meth:`judge_missing` asks only for what is missing."""

    def __init__(
        self,
        out_dir: Path,
        decomposer: Decomposer,
        judge: CoverageJudge,
        threshold: float,
        batch_size: int = 32,
    ) -> None:
        """``threshold``: a cell is covered when the judge's P(yes) is above it."""
        self.out_dir = Path(out_dir)
        self.threshold = threshold
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.decomposer = decomposer
        self.judge = judge
        self.batch_size = max(1, batch_size)
        by_question = lambda r: str(r["question_id"])  # noqa: E731
        self.subquestions = JsonlStore(self.out_dir / SUBQUESTIONS, key=by_question)
        self.labels = JsonlStore(self.out_dir / LABELS, key=by_question)
        self.verdicts = JsonlStore(self.out_dir / VERDICTS, key=cell_key)
        self.fragments = JsonlStore(self.out_dir / FRAGMENTS, key=cell_key)

    # ------------------------------------------------------------------ reading

    def decomposition_of(self, question_id: str) -> list[SubQuestion] | None:
        """The classified sub-questions, or None while either step is missing or failed."""
        listed, labelled = self.subquestions.get(question_id), self.labels.get(question_id)
        if not listed or listed.get("status") != "ok" or not labelled:
            return None
        if labelled.get("status") != "ok":
            return None
        texts, kinds = listed["sub_questions"], labelled["kinds"]
        return [SubQuestion(t, k) for t, k in zip(texts, kinds, strict=True)]

    def p_yes(self, question_id: str, target: str, sub_question: str) -> float | None:
        row = self.verdicts.get(f"{question_id}\t{target}\t{sub_question}")
        return None if row is None else float(row["p_yes"])

    def covered(self, question_id: str, target: str, sub_question: str) -> bool | None:
        p = self.p_yes(question_id, target, sub_question)
        return None if p is None else p > self.threshold

    def fragment(self, question_id: str, target: str, sub_question: str) -> str | None:
        row = self.fragments.get(f"{question_id}\t{target}\t{sub_question}")
        return None if row is None or row.get("status") != "ok" else str(row["fragment"])

    def cells(self, item: AnswerItem) -> AnswerCells | None:
        """The answer's judgements as metric input; None until all of them are on disk."""
        subs = self.decomposition_of(item.question_id)
        if subs is None:
            return None
        answered: list[bool] = []
        hits: list[int] = []
        positions: list[float | None] = []
        for sq in subs:
            ans = self._answer_covered(item, sq.text)
            chunk = [
                self.covered(item.question_id, chunk_target(c.id), sq.text) for c in item.chunks
            ]
            if ans is None or any(c is None for c in chunk):
                return None
            answered.append(ans)
            hits.append(sum(bool(c) for c in chunk))
            frag = self.fragment(item.question_id, item.answer_target, sq.text) if ans else None
            positions.append(addressing_position(item.answer, frag) if frag else None)
        return AnswerCells(
            kinds=[sq.kind for sq in subs],
            answered=answered,
            chunk_hits=hits,
            n_chunks=len(item.chunks),
            positions=positions,
        )

    def _answer_covered(self, item: AnswerItem, sub_question: str) -> bool | None:
        if not item.answer.strip():
            return False  # nothing to judge: an empty answer covers nothing
        return self.covered(item.question_id, item.answer_target, sub_question)

    # ------------------------------------------------------------------ judging

    async def judge_missing(
        self,
        items: Sequence[AnswerItem],
        on_progress: Progress | None = None,
        fragments: bool = True,
    ) -> None:
        """Decompose, then judge every missing verdict, then (unless ``fragments`` is
        false: Metric #6 is then left out) extract missing fragments."""
        await self._decompose(items, on_progress)
        await self.judge_verdicts(items, on_progress)
        if fragments:
            await self._fragments(items, on_progress)

    async def judge_verdicts(
        self, items: Sequence[AnswerItem], on_progress: Progress | None = None
    ) -> None:
        """Every missing yes/no verdict of ``items`` whose questions are decomposed (no
        fragments: what the judge-validity check of graded references needs)."""
        cells = self._missing_verdicts(items)
        for start in range(0, len(cells), self.batch_size):
            chunk = cells[start : start + self.batch_size]
            probs = await self.judge.verdicts([Cell(text, sq) for _, _, sq, text in chunk])
            self.verdicts.append(
                {
                    "question_id": qid,
                    "target": target,
                    "sub_question": sq,
                    "p_yes": round(p, 6),
                }
                for (qid, target, sq, _), p in zip(chunk, probs, strict=True)
            )
            if on_progress:
                on_progress("verdicts", start + len(chunk), len(cells))

    def _missing_verdicts(self, items: Sequence[AnswerItem]) -> list[tuple[str, str, str, str]]:
        """(question_id, target, sub-question, text), grouped by text so consecutive prompts
        share their prefix; each missing cell once."""
        seen: set[tuple[str, str, str]] = set()
        out = []
        for item in items:
            subs = self.decomposition_of(item.question_id) or []
            targets = [(chunk_target(c.id), c.text) for c in item.chunks]
            if item.answer.strip():
                targets.insert(0, (item.answer_target, item.answer))
            for target, text in targets:
                for sq in subs:
                    key = (item.question_id, target, sq.text)
                    if key in seen or self.p_yes(*key) is not None:
                        continue
                    seen.add(key)
                    out.append((item.question_id, target, sq.text, text))
        return out

    async def _fragments(self, items: Sequence[AnswerItem], on_progress: Progress | None) -> None:
        todo = []
        for item in items:
            for sq in self.decomposition_of(item.question_id) or []:
                key = f"{item.question_id}\t{item.answer_target}\t{sq.text}"
                if key in self.fragments or not self._answer_covered(item, sq.text):
                    continue
                todo.append((item, sq.text))
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            outcomes = await self.judge.fragments([Cell(it.answer, sq) for it, sq in chunk])
            self.fragments.append(
                {
                    "question_id": it.question_id,
                    "target": it.answer_target,
                    "sub_question": sq,
                    "status": o.status,
                    "fragment": o.value if o.ok else None,
                    "attempts": o.attempts,
                }
                for (it, sq), o in zip(chunk, outcomes, strict=True)
            )
            if on_progress:
                on_progress("fragments", start + len(chunk), len(todo))

    async def _decompose(self, items: Sequence[AnswerItem], on_progress: Progress | None) -> None:
        questions = {it.question_id: it.question for it in items}
        todo = [(q, text) for q, text in questions.items() if q not in self.subquestions]
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            outcomes = await self.decomposer.list_sub_questions([t for _, t in chunk])
            self.subquestions.append(
                {
                    "question_id": q,
                    "question": t,
                    "status": o.status,
                    "sub_questions": o.value or [],
                    "attempts": o.attempts,
                }
                for (q, t), o in zip(chunk, outcomes, strict=True)
            )
            if on_progress:
                on_progress("sub-questions", start + len(chunk), len(todo))
        todo = [
            (q, text)
            for q, text in questions.items()
            if q not in self.labels and (self.subquestions.get(q) or {}).get("status") == "ok"
        ]
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            subs = [self.subquestions.get(q)["sub_questions"] for q, _ in chunk]  # type: ignore[index]
            outcomes = await self.decomposer.classify([t for _, t in chunk], subs)
            self.labels.append(
                {
                    "question_id": q,
                    "status": o.status,
                    "kinds": o.value or [],
                    "attempts": o.attempts,
                }
                for (q, _), o in zip(chunk, outcomes, strict=True)
            )
            if on_progress:
                on_progress("labels", start + len(chunk), len(todo))
