"""The compliance judge: did an answer cover its include topics and skip its excludes?

A judge LLM (the scorer engine) says, per include topic, whether the answer
covers it, and per exclude topic, whether it discusses it. Parsing is strict
(one boolean per topic, ids 1..n once each); verdicts that never parse are
counted, never guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from eval.answer_coverage.judge import COVERAGE_MAX_TOKENS
from eval.answer_coverage.parse import BAD_SHAPE, NO_JSON
from eval.constraints.dataset import SYSTEM_PROMPT
from eval.constraints.topics import as_sentence
from eval.judging.resample import Judge, Outcome, Parsed, generate_until_parsed
from typed_rag.config import Settings
from typed_rag.engines.base import Engine
from typed_rag.json_reply import extract_json

# Parse failure reasons of the judge (besides NO_JSON and BAD_SHAPE).
LENGTH_MISMATCH = "length-mismatch"
EMPTY_ANSWER = "empty-answer"


def judge_schema(n_include: int, n_exclude: int) -> dict[str, Any]:
    """The verdict shape, with list lengths fixed to this item's topic counts."""

    def rows(flag: str, n: int) -> dict[str, Any]:
        return {
            "type": "array",
            "minItems": n,
            "maxItems": n,
            "items": {
                "type": "object",
                # the order committed verdicts were decoded in (llama.cpp sorted keys until
                # the key-order fix): the verdict before the id
                "properties": {flag: {"type": "boolean"}, "id": {"type": "integer"}},
                "required": ["id", flag],
            },
        }

    return {
        "title": "constraint_judgement",
        "type": "object",
        "properties": {
            "exclude": rows("discussed", n_exclude),
            "include": rows("covered", n_include),
        },
        "required": ["include", "exclude"],
    }


def judge_messages(
    question: str, include: Sequence[str], exclude: Sequence[str], answer: str
) -> list[dict[str, str]]:
    inc = "\n".join(f"{i}. {t}" for i, t in enumerate(include, start=1))
    exc = "\n".join(f"{i}. {t}" for i, t in enumerate(exclude, start=1))
    user = (
        "A user asked the question below and told the assistant which topics to include and "
        "which to leave out. Read the answer and judge each topic.\n"
        '- include topics: "covered" is true only if the answer gives real content about the '
        "topic (a passing mention or a promise to cover it does not count);\n"
        '- exclude topics: "discussed" is true if the answer says anything substantive about '
        "the topic; a short remark that the topic is being left out is not discussing it.\n"
        "Reply with one JSON object, one entry per numbered topic: "
        '{"include": [{"id": 1, "covered": true}], "exclude": [{"id": 1, "discussed": false}]}.'
        f"\n\nQuestion: {as_sentence(question)}\n\nTopics to include:\n{inc}\n\n"
        f"Topics to leave out:\n{exc}\n\nAnswer: {answer.strip()}"
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def _flags(rows: Any, flag: str, n: int) -> list[bool] | str:
    """Booleans for ids 1..n from ``[{"id", flag}]`` (ids optional, then by position), or a reason."""
    if not isinstance(rows, list):
        return BAD_SHAPE
    if len(rows) != n:
        return LENGTH_MISMATCH
    if all(isinstance(r, bool) for r in rows):
        return list(rows)
    if not all(isinstance(r, dict) and isinstance(r.get(flag), bool) for r in rows):
        return BAD_SHAPE
    ids = [r.get("id") for r in rows]
    if all(i is None for i in ids):
        return [r[flag] for r in rows]
    if any(isinstance(i, bool) or not isinstance(i, int) for i in ids) or sorted(ids) != list(
        range(1, n + 1)
    ):
        return BAD_SHAPE
    by_id = {r["id"]: r[flag] for r in rows}
    return [by_id[i] for i in range(1, n + 1)]


@dataclass(frozen=True)
class Verdict:
    covered: list[bool]  # per include topic
    discussed: list[bool]  # per exclude topic


def parse_judgement(text: str, n_include: int, n_exclude: int) -> Parsed[Verdict]:
    """Strict: both lists present, exactly one boolean per topic, ids (if given) 1..n once each."""
    try:
        obj = extract_json(text)
    except ValueError:
        return Parsed(None, NO_JSON)
    if not isinstance(obj, dict):
        return Parsed(None, BAD_SHAPE)
    covered = _flags(obj.get("include"), "covered", n_include)
    discussed = _flags(obj.get("exclude"), "discussed", n_exclude)
    for got in (covered, discussed):
        if isinstance(got, str):
            return Parsed(None, got)
    return Parsed(Verdict(covered=covered, discussed=discussed))  # type: ignore[arg-type]


@dataclass
class ComplianceItem:
    key: str
    question: str
    include: list[str]
    exclude: list[str]
    answer: str


@dataclass
class ComplianceVerdict:
    key: str
    status: str
    covered: list[bool] | None = None
    discussed: list[bool] | None = None
    attempts: int = 0
    outputs: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def ok(self) -> bool:
        return self.covered is not None and self.discussed is not None


class ComplianceJudge(Judge):
    """Judges a batch of answers against their include/exclude topics on one engine."""

    def __init__(self, engine: Engine, *, max_tokens: int = 256, **sampling: Any) -> None:
        super().__init__(engine, max_tokens=max_tokens, **sampling)

    @classmethod
    def from_settings(
        cls, engine: Engine, settings: Settings, scorer_settings: Settings | None = None
    ) -> ComplianceJudge:
        return cls(
            engine,
            max_tokens=COVERAGE_MAX_TOKENS,
            **cls.sampling_from(settings, scorer_settings),
        )

    async def judge(self, items: Sequence[ComplianceItem]) -> list[ComplianceVerdict]:
        """One batch for all items with an answer; an empty answer covers and discusses nothing."""
        asked = [i for i, it in enumerate(items) if it.answer.strip()]
        requests = [
            self.chat(
                judge_messages(
                    items[i].question, items[i].include, items[i].exclude, items[i].answer
                ),
                judge_schema(len(items[i].include), len(items[i].exclude)),
            )
            for i in asked
        ]
        outcomes: list[Outcome[Verdict]] = await generate_until_parsed(
            self.engine,
            requests,
            lambda j, text: parse_judgement(
                text, len(items[asked[j]].include), len(items[asked[j]].exclude)
            ),
            self.max_resamples,
            self.seed,
        )
        by_index = dict(zip(asked, outcomes, strict=True))
        out = []
        for i, it in enumerate(items):
            o = by_index.get(i)
            if o is None:
                out.append(
                    ComplianceVerdict(
                        it.key,
                        EMPTY_ANSWER,
                        covered=[False] * len(it.include),
                        discussed=[False] * len(it.exclude),
                    )
                )
                continue
            v = o.value if o.ok else None
            out.append(
                ComplianceVerdict(
                    it.key,
                    o.status,
                    covered=list(v.covered) if v else None,
                    discussed=list(v.discussed) if v else None,
                    attempts=o.attempts,
                    outputs=o.outputs,
                    prompt_tokens=o.prompt_tokens,
                    completion_tokens=o.completion_tokens,
                )
            )
        return out


def compliance(covered: Sequence[bool], discussed: Sequence[bool]) -> dict[str, float]:
    """Per answer: share of include topics covered, share of exclude topics avoided, and 1.0
    only when every include is covered and no exclude is discussed."""
    inc = sum(covered) / len(covered) if covered else 1.0
    exc = 1.0 - (sum(discussed) / len(discussed) if discussed else 0.0)
    return {
        "include_covered": inc,
        "exclude_avoided": exc,
        "both_ok": float(all(covered) and not any(discussed)),
    }
