"""Sub-question coverage: does an answer address what the question needs? (beyond the paper)

LINKAGE says how an answer ranks, not what it misses. Here a judge LLM
(the scorer engine) first splits each question into sub-questions of three
kinds, once per question and shared by all methods:

- core: what any answer must address to answer the question at all;
- background: context that helps a reader but was not asked for;
- follow-up: what a reader might ask next, beyond the question.

Then, per answer, it judges which sub-questions the answer covers. The
weighted score rewards core (weight 1) and background (0.5) coverage and
penalises drifting into follow-ups (-1), normalised by the best possible
(every core and background covered, no follow-up):

    weighted = (core_hits + 0.5 * background_hits - follow_up_hits) / (n_core + 0.5 * n_background)

so 1.0 is ideal and the score can go below 0. Retrieval-context coverage
asks the judge how well the retrieved passages alone can answer each core
sub-question (0-5); the share scoring at least ``answerable_threshold``
shows whether a missed core point was a retrieval or a generation failure.
All judge outputs are JSON under a schema, parsed tolerantly, resampled a
bounded number of times, and failures are counted, never guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eval.answer_coverage.parse import (
    KINDS,
    MAX_PER_KIND,
    Decomposition,
    parse_answerability,
    parse_coverage,
    parse_decomposition,
)
from eval.judging.resample import Judge, Outcome, generate_until_parsed
from typed_rag.config import Settings
from typed_rag.engines.base import ChatRequest, Engine

WEIGHTS: dict[str, float] = {"core": 1.0, "background": 0.5, "follow_up": -1.0}
MAX_PASSAGE_CHARS = 700
# The judge's output budget (decomposition, answerability, compliance): the paper's 512, so
# no JSON reply is cut off.
COVERAGE_MAX_TOKENS = 512
# A passage set "can answer" a core sub-question when the judge scores it at least this on
# 0-5: agreement with the CRUX grades 0.65 at 3, no better at 2, 4 or 5 (docs/experiments.md).
ANSWERABLE_THRESHOLD = 3

_SUBQ_LIST = {"type": "array", "items": {"type": "string"}, "maxItems": MAX_PER_KIND}
# Keys of the schemas below in the order committed results were decoded with (llama.cpp
# sorted them until the key-order fix), so resumed runs judge as they began.
DECOMPOSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "background": _SUBQ_LIST,
        "core": {**_SUBQ_LIST, "minItems": 1},
        "follow_up": _SUBQ_LIST,
    },
    "required": list(KINDS),
}
COVERAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"covered": {"type": "boolean"}, "id": {"type": "integer"}},
                "required": ["id", "covered"],
            },
        }
    },
    "required": ["verdicts"],
}
ANSWERABILITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "scores": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "score": {"type": "integer", "minimum": 0, "maximum": 5},
                },
                "required": ["id", "score"],
            },
        }
    },
    "required": ["scores"],
}

SYSTEM_PROMPT = (
    "You are a careful evaluator of answers to open-ended questions. Reply in JSON only."
)


# --------------------------------------------------------------------------- prompts


def decompose_messages(question: str) -> list[dict[str, str]]:
    user = (
        "Split the question below into short, self-contained sub-questions of three kinds:\n"
        '- "core": what any good answer must address to answer the question at all;\n'
        '- "background": context that would help a reader understand the answer, '
        "but that the question does not ask for;\n"
        '- "follow_up": questions a reader might ask next, which go beyond this question.\n'
        f"Give 1 to {MAX_PER_KIND} core and 0 to {MAX_PER_KIND} of each other kind. Reply with "
        'one JSON object: {"core": [...], "background": [...], "follow_up": [...]}.\n\n'
        f"Question: {question.strip()}"
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def coverage_messages(
    question: str, decomposition: Decomposition, answer: str
) -> list[dict[str, str]]:
    listed = "\n".join(f"{i}. {text}" for i, _, text in decomposition.numbered())
    user = (
        "Below are a question, numbered sub-questions about it, and an answer. For each "
        "sub-question, decide whether the answer addresses it with real content (a passing "
        "mention or a refusal does not count). Reply with one JSON object: "
        '{"verdicts": [{"id": 1, "covered": true}, ...]} with one entry per sub-question.\n\n'
        f"Question: {question.strip()}\n\nSub-questions:\n{listed}\n\nAnswer: {answer.strip()}"
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def answerability_messages(
    core: Sequence[str], passages: Sequence[dict[str, Any]]
) -> list[dict[str, str]]:
    shown = "\n\n".join(
        f"[{i}] {p.get('title', '')}\n{str(p.get('text', ''))[:MAX_PASSAGE_CHARS]}"
        for i, p in enumerate(passages, start=1)
    )
    listed = "\n".join(f"{i}. {q}" for i, q in enumerate(core, start=1))
    user = (
        "Using ONLY the passages below (not your own knowledge), rate for each numbered "
        "question how well the passages let someone answer it: 0 = not at all, 3 = the main "
        "point is there, 5 = fully. Reply with one JSON object: "
        '{"scores": [{"id": 1, "score": 0}, ...]} with one entry per question.\n\n'
        f"Passages:\n{shown}\n\nQuestions:\n{listed}"
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


# --------------------------------------------------------------------------- scoring


def weighted_score(covered: dict[str, list[bool]]) -> float | None:
    """Core 1, background 0.5, follow-up -1, over the best possible; None without core."""
    n_core = len(covered.get("core", []))
    if n_core == 0:
        return None
    best = n_core + WEIGHTS["background"] * len(covered.get("background", []))
    got = sum(WEIGHTS[k] * sum(covered.get(k, [])) for k in KINDS)
    return got / best


def kind_coverage(covered: dict[str, list[bool]]) -> dict[str, float | None]:
    return {k: (sum(v) / len(v) if (v := covered.get(k, [])) else None) for k in KINDS}


@dataclass
class CoverageItem:
    """One answer to judge: its question's decomposition and, for RAG, its passages."""

    key: str
    question: str
    decomposition: Decomposition
    answer: str
    passages: list[dict[str, Any]] | None = None


@dataclass
class CoverageResult:
    key: str
    status: str
    covered: dict[str, list[bool]] | None = None
    coverage: dict[str, float | None] | None = None
    weighted: float | None = None
    context_status: str | None = None  # None when the method retrieved nothing
    context_scores: list[int] | None = None
    context_coverage: float | None = None
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class CoverageJudge(Judge):
    """Runs decomposition and judging as large batches on one judge engine."""

    def __init__(
        self,
        engine: Engine,
        *,
        max_tokens: int = COVERAGE_MAX_TOKENS,
        answerable_threshold: int = ANSWERABLE_THRESHOLD,
        **sampling: Any,
    ) -> None:
        super().__init__(engine, max_tokens=max_tokens, **sampling)
        self.answerable_threshold = answerable_threshold

    @classmethod
    def from_settings(
        cls, engine: Engine, settings: Settings, scorer_settings: Settings | None = None
    ) -> CoverageJudge:
        """The judge with its sampling as :meth:`Judge.sampling_from`."""
        return cls(
            engine,
            max_tokens=COVERAGE_MAX_TOKENS,
            answerable_threshold=ANSWERABLE_THRESHOLD,
            **cls.sampling_from(settings, scorer_settings),
        )

    def _request(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> ChatRequest:
        return self.chat(messages, schema)

    async def decompose(self, questions: Sequence[str]) -> list[Outcome[Decomposition]]:
        requests = [self._request(decompose_messages(q), DECOMPOSE_SCHEMA) for q in questions]
        return await generate_until_parsed(
            self.engine,
            requests,
            lambda _i, text: parse_decomposition(text),
            self.max_resamples,
            self.seed,
        )

    async def judge(self, items: Sequence[CoverageItem]) -> list[CoverageResult]:
        """Answer coverage for every item (one batch), then context answerability (one batch)."""
        cov_requests = [
            self._request(
                coverage_messages(it.question, it.decomposition, it.answer), COVERAGE_SCHEMA
            )
            for it in items
        ]
        sizes = [len(it.decomposition.numbered()) for it in items]
        cov = await generate_until_parsed(
            self.engine,
            cov_requests,
            lambda i, text: parse_coverage(text, sizes[i]),
            self.max_resamples,
            self.seed,
        )
        ctx_index = [i for i, it in enumerate(items) if it.passages and it.decomposition.core]
        ctx_requests = [
            self._request(
                answerability_messages(items[i].decomposition.core, items[i].passages or []),
                ANSWERABILITY_SCHEMA,
            )
            for i in ctx_index
        ]
        ctx = await generate_until_parsed(
            self.engine,
            ctx_requests,
            lambda j, text: parse_answerability(text, len(items[ctx_index[j]].decomposition.core)),
            self.max_resamples,
            self.seed,
        )
        ctx_by_item = dict(zip(ctx_index, ctx, strict=True))
        return [self._result(it, cov[i], ctx_by_item.get(i)) for i, it in enumerate(items)]

    def _result(
        self,
        item: CoverageItem,
        cov: Outcome[list[bool]],
        ctx: Outcome[list[int]] | None,
    ) -> CoverageResult:
        res = CoverageResult(
            key=item.key,
            status=cov.status,
            attempts=cov.attempts + (ctx.attempts if ctx else 0),
            prompt_tokens=cov.prompt_tokens + (ctx.prompt_tokens if ctx else 0),
            completion_tokens=cov.completion_tokens + (ctx.completion_tokens if ctx else 0),
        )
        if cov.ok and cov.value is not None:
            flags = iter(cov.value)
            res.covered = {k: [next(flags) for _ in item.decomposition.of(k)] for k in KINDS}
            res.coverage = kind_coverage(res.covered)
            res.weighted = weighted_score(res.covered)
        if ctx is not None:
            res.context_status = ctx.status
            if ctx.ok and ctx.value is not None:
                res.context_scores = ctx.value
                hits = sum(s >= self.answerable_threshold for s in ctx.value)
                res.context_coverage = hits / len(ctx.value)
        return res
