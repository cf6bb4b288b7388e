"""The outline judge: how well an outline's sub-queries follow a conditioned question, 1-5.

The paper asks a large model for a Likert score with a rationale. Here the
judge model's next-token probabilities over the digits 1-5 are read after the
rubric (one forward pass, no sampling: deterministic and never unparseable,
as eval/context/judge.py does for CRUX); the most probable digit is the
score, and the expected value breaks ties between outlines.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from typed_rag.engines.base import ChoiceRequest, Engine
from typed_rag.qtree.prompts import judge_messages

SCORES: tuple[str, ...] = ("1", "2", "3", "4", "5")


@dataclass(frozen=True)
class OutlineScore:
    """The most probable score and the score's expectation under the judge's distribution."""

    score: int
    expected: float

    def to_dict(self) -> dict[str, float | int]:
        return {"score": self.score, "expected": round(self.expected, 4)}


def score_request(conditioned: str, queries: Sequence[str]) -> ChoiceRequest:
    return ChoiceRequest(messages=judge_messages(conditioned, queries), prefix="", choices=SCORES)


def to_score(logprobs: dict[str, float]) -> OutlineScore:
    """The argmax digit (the lower one on a tie) and the renormalised expectation."""
    lp = [logprobs.get(d, -math.inf) for d in SCORES]
    top = max(lp)
    best = lp.index(top) + 1
    if top == -math.inf:
        return OutlineScore(best, float(best))
    weights = [math.exp(v - top) for v in lp]
    expected = sum((i + 1) * w for i, w in enumerate(weights)) / sum(weights)
    return OutlineScore(best, expected)


async def judge_outlines(
    engine: Engine, items: Sequence[tuple[str, Sequence[str]]]
) -> list[OutlineScore]:
    """Scores of (conditioned question, sub-queries) pairs, in order, in one engine call."""
    if not items:
        return []
    results = await engine.score_choices([score_request(c, qs) for c, qs in items])
    return [to_score(r.logprobs) for r in results]
