"""Fixtures for the eval tests: a small Wiki-NFQA folder, a stand-in answerer, a keyword classifier."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from eval.data.wikinfqa import FILE_NAME
from eval.settings import LabSettings
from typed_rag.classifier.base import TypeClassifier, TypePrediction
from typed_rag.config import Settings
from typed_rag.engines.base import ChatRequest
from typed_rag.request import AnswerRequest
from typed_rag.result import CitedPassage, LLMCall, Result
from typed_rag.types import LABELS, QuestionType

QUESTIONS = {
    "nq": [
        "why do leaves change color in autumn",
        "how to bake bread at home",
        "what is the difference between coffee and tea",
        "is nuclear power good or bad",
        "why did the roman empire fall",
    ],
    "squad": [
        "why is sleep important for memory",
        "what was it like to go backpacking in europe",
        "how does photosynthesis work",
        "python vs java which is better",
    ],
}


@pytest.fixture
def settings(settings: Settings) -> LabSettings:
    """The root fixture's settings as the lab gets them (with the ``eval`` section)."""
    return LabSettings.model_validate(settings.model_dump())


def make_record(subset: str, i: int, question: str) -> dict[str, Any]:
    answers = [f"{subset}-{i} answer {j}: {question}" for j in range(8)]
    labels = [0, 3, 1, 2, 0, 1, 3, 2] if i % 2 == 0 else [0, 3, 0, 3, 0, 0, 3, 0]
    return {
        "question_id": f"{subset}_{i}",
        "question_text": question,
        "num_answers": len(answers),
        "answer_dict": {
            "ground_truth": {"answer1": answers[0]},
            "gpt-4o": {"answer1": answers[1]},
            "other": {f"answer{j}": a for j, a in enumerate(answers[2:], start=1)},
        },
        "answer_list": answers,
        "answer_label": labels,
    }


def write_subset(root: Path, subset: str, rows: Sequence[dict[str, Any] | str]) -> Path:
    path = root / subset / FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


@pytest.fixture
def nfqa_dir(tmp_path: Path) -> Path:
    """Two subsets (9 questions) in the Wiki-NFQA layout; the other four subsets are absent."""
    root = tmp_path / "wiki-nfqa"
    for subset, qs in QUESTIONS.items():
        write_subset(root, subset, [make_record(subset, i, q) for i, q in enumerate(qs)])
    return root


class StandInAnswerer:
    """The TypedRAG contract's answer/answer_many, recording every question it was asked.

    ``fail_after`` makes every call after that many answered questions raise,
    which is what a crashed generator looks like to the runner.
    """

    def __init__(self, fail_after: int | None = None, empty_for: str | None = None) -> None:
        self.fail_after = fail_after
        self.empty_for = empty_for
        self.asked: list[tuple[str, str]] = []
        self.forced: list[str | None] = []
        self.batches: list[int] = []
        self.started = self.closed = 0
        self.profile: str | None = None

    def with_method_profile(self, profile: str) -> StandInAnswerer:
        """A view answering as that method profile, recording into the same lists."""
        view = copy.copy(self)
        view.profile = profile
        return view

    async def classify(self, questions: Sequence[str]) -> list[TypePrediction | None]:
        """FACTOID (confident) for questions starting "what", REASON (confident) for "why",
        INSTRUCTION (unsure) for "how to", else no prediction."""
        rules = (
            ("what", QuestionType.FACTOID, True),
            ("why", QuestionType.REASON, True),
            ("how to", QuestionType.INSTRUCTION, False),
        )
        return [
            next(
                (
                    TypePrediction(t, {t.value: 0.9 if sure else 0.3}, confident=sure)
                    for start, t, sure in rules
                    if q.lower().startswith(start)
                ),
                None,
            )
            for q in questions
        ]

    async def start(self) -> None:
        self.started += 1

    async def close(self) -> None:
        self.closed += 1

    def _one(self, question: str, mode: str, force_type: str | None = None) -> Result:
        if self.fail_after is not None and len(self.asked) >= self.fail_after:
            raise RuntimeError("generator crashed")
        self.asked.append((mode, question))
        self.forced.append(force_type)
        label = f"{mode}@{self.profile}" if self.profile else mode
        answer = (
            "" if self.empty_for and self.empty_for in question else f"{label} answer to {question}"
        )
        passages = (
            []
            if mode == "llm"
            else [
                CitedPassage(
                    citation=1,
                    id="p1",
                    title="Autumn leaf color",
                    text="Chlorophyll breaks down.",
                    score=3.2,
                )
            ]
        )
        return Result(
            question=question,
            mode=mode,
            type=force_type or "EVIDENCE-BASED",
            type_source="forced" if force_type else "classifier",
            answer=answer,
            passages=passages,
            calls=[LLMCall(step="answer", round=1, prompt_tokens=100, completion_tokens=20)],
        )

    async def answer(
        self,
        question: AnswerRequest | str,
        mode: str | None = None,
        force_type: str | None = None,
        **_: Any,
    ) -> Result:
        if isinstance(question, AnswerRequest):
            question, mode, force_type = question.question, question.mode, question.force_type
        return self._one(question, mode or "typed-rag", force_type)

    async def answer_many(
        self,
        questions: Sequence[AnswerRequest | str],
        mode: str | None = None,
        force_type: Sequence[str | None] | None = None,
        **_: Any,
    ) -> list[Result]:
        self.batches.append(len(questions))
        forced = list(force_type) if force_type else [None] * len(questions)
        return [
            await self.answer(q, mode=mode, force_type=f)
            for q, f in zip(questions, forced, strict=True)
        ]


def linkage_responder(rank_for: dict[str, int] | None = None, default: int = 2):
    """A scorer that answers [[k]]: k from ``rank_for`` by candidate prefix (method), else default."""

    def respond(req: ChatRequest) -> str:
        text = req.messages[-1]["content"]
        candidate = text.rsplit("Candidate answer:", 1)[-1].strip()
        for prefix, k in (rank_for or {}).items():
            if candidate.startswith(prefix):
                return f"[[{k}]]"
        return f"[[{default}]]"

    return respond


class KeywordClassifier(TypeClassifier):
    """Deterministic stand-in: picks a type from words in the question."""

    name = "keywords"
    RULES = (
        ("difference", QuestionType.COMPARISON),
        (" vs ", QuestionType.COMPARISON),
        ("how to", QuestionType.INSTRUCTION),
        ("how does", QuestionType.INSTRUCTION),
        ("why", QuestionType.REASON),
        ("good or bad", QuestionType.DEBATE),
        ("like to", QuestionType.EXPERIENCE),
    )

    def predict_proba(self, questions: Sequence[str]) -> list[list[float]]:
        out = []
        for q in questions:
            kind = next(
                (t for w, t in self.RULES if re.search(re.escape(w), q)),
                QuestionType.EVIDENCE_BASED,
            )
            probs = [0.02] * len(LABELS)
            probs[LABELS.index(kind)] = 1.0 - 0.02 * (len(LABELS) - 1)
            out.append(probs)
        return out
