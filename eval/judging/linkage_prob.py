"""LINKAGE with the verdict read from token probabilities (``linkage-prob``), and its gate.

The same prompt as :mod:`eval.judging.linkage`; the judge's next-token probabilities of
the verdicts give a distribution instead of one sampled verdict. The gated
protocol also asks whether the answer addresses the question at all.
:func:`build_scorer` picks the run's protocol.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from eval.judging.linkage import (
    EMPTY_CANDIDATE,
    SYSTEM_PROMPT,
    LinkageItem,
    LinkageScore,
    LinkageScorer,
    max_rank,
    scorer_messages,
)
from typed_rag.config import Settings
from typed_rag.engines.base import ChoiceRequest, Engine
from typed_rag.pipelines.support import VERDICT_PREFIX, p_yes


def verdict_distribution(logprobs: dict[str, float], worst: int) -> list[float]:
    """Probabilities of verdicts 1..worst, renormalised over those tokens."""
    raw = [math.exp(logprobs.get(str(k), -math.inf)) for k in range(1, worst + 1)]
    total = sum(raw)
    if total <= 0:
        return [1.0 / worst] * worst
    return [p / total for p in raw]


def expected_reciprocal_rank(dist: Sequence[float]) -> float:
    return sum(p / k for k, p in enumerate(dist, start=1))


def expected_percentile_rank(dist: Sequence[float], n: int) -> float:
    """MPR's per-answer term, averaged over the verdict distribution (0..100)."""
    return sum(p * (1 - (k - 1) / n) * 100 for k, p in enumerate(dist, start=1))


RELEVANCE_PROMPT = (
    "Does the answer below address the question asked: its subject and what it asks? "
    "Judge only whether it is about this question, not whether it is correct or complete. "
    'Reply "[[yes]]" or "[[no]]".'
)


def relevance_messages(question: str, candidate: str) -> list[dict[str, str]]:
    """The relevance gate's prompt: the question and the candidate, no references."""
    user = f"{RELEVANCE_PROMPT}\n\nQuestion: {question.strip()}\n\nAnswer: {candidate.strip()}"
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def relevance_request(question: str, candidate: str) -> ChoiceRequest:
    return ChoiceRequest(relevance_messages(question, candidate), VERDICT_PREFIX, ("yes", "no"))


def gate(dist: Sequence[float], relevant: float) -> tuple[list[float], int]:
    """The gated verdict: with probability 1 - ``relevant`` the answer is off-topic and last.

    Returns the mixed distribution and the discrete verdict, its mode (an exact tie
    goes to the better rank): last whenever the gate says no (``relevant < 0.5``), and
    first only when "first" outweighs "off-topic or last" together. Taking the
    mode of LINKAGE's own distribution instead let a doubtful gate (P = 0.5-0.7)
    pass an answer to another question as better than every reference.
    """
    worst = len(dist)
    mixed = [relevant * p for p in dist]
    mixed[-1] += 1 - relevant
    rank = max(range(worst), key=lambda j: mixed[j]) + 1
    return mixed, rank


class LinkageProbScorer:
    """LINKAGE with the verdict read from token probabilities instead of sampled text.

    The same prompt; the reply is fixed to start with ``[[`` and the judge's
    next-token probabilities of ``1``..``n+1`` give a distribution over
    verdicts. ``rank`` is its mode (greedy decoding constrained to a valid
    verdict), and the report averages MRR and MPR over the whole distribution,
    a continuous score with far less variance than one sampled verdict.
    Verdicts cannot be cut off or fail to parse.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        off_by_one: bool = False,
        off_topic_rule: bool = True,
        gated: bool = False,
    ) -> None:
        self.engine = engine
        self.off_by_one = off_by_one
        self.off_topic_rule = off_topic_rule
        self.gated = gated

    @classmethod
    def from_settings(cls, engine: Engine, settings: Settings) -> LinkageProbScorer:
        return cls(
            engine,
            off_by_one=settings.eval.paper_off_by_one,
            gated=settings.eval.judge_protocol == "linkage-prob-gated",
        )

    def request(self, item: LinkageItem) -> ChoiceRequest:
        worst = max_rank(len(item.references), self.off_by_one)
        messages = scorer_messages(
            item.question,
            item.references,
            item.candidate,
            off_by_one=self.off_by_one,
            off_topic_rule=self.off_topic_rule,
        )
        return ChoiceRequest(messages, VERDICT_PREFIX, tuple(str(k) for k in range(1, worst + 1)))

    async def score(self, items: Sequence[LinkageItem]) -> list[LinkageScore]:
        """Verdicts in item order. An empty candidate is ranked last without asking."""
        asked = [i for i, it in enumerate(items) if it.candidate.strip()]
        results = dict(
            zip(
                asked,
                await self.engine.score_choices([self.request(items[i]) for i in asked]),
                strict=True,
            )
        )
        relevant: dict[int, float] = {}
        if self.gated:
            gates = await self.engine.score_choices(
                [relevance_request(items[i].question, items[i].candidate) for i in asked]
            )
            relevant = {i: p_yes(g.logprobs) for i, g in zip(asked, gates, strict=True)}
        scores: list[LinkageScore] = []
        for i, item in enumerate(items):
            n = len(item.references)
            worst = max_rank(n, self.off_by_one)
            res = results.get(i)
            if res is None:
                dist = [0.0] * (worst - 1) + [1.0]
                scores.append(
                    LinkageScore(
                        item.key,
                        worst,
                        n,
                        EMPTY_CANDIDATE,
                        0,
                        [],
                        off_by_one=self.off_by_one,
                        dist=dist,
                    )
                )
                continue
            dist = verdict_distribution(res.logprobs, worst)
            rank = max(range(worst), key=lambda j: dist[j]) + 1
            if self.gated:
                dist, rank = gate(dist, relevant[i])
            scores.append(
                LinkageScore(
                    key=item.key,
                    rank=rank,
                    n=n,
                    status="ok",
                    attempts=1,
                    outputs=[f"[[{rank}]]"],
                    prompt_tokens=res.prompt_tokens,
                    latency_s=res.latency_s,
                    off_by_one=self.off_by_one,
                    dist=[round(p, 6) for p in dist],
                    relevance=round(relevant[i], 6) if self.gated else None,
                )
            )
        return scores


def build_scorer(
    engine: Engine, settings: Settings, scorer_settings: Settings | None = None
) -> LinkageScorer | LinkageProbScorer:
    """The run's LINKAGE scorer, by ``settings.eval.judge_protocol``."""
    if settings.eval.judge_protocol in ("linkage-prob", "linkage-prob-gated"):
        return LinkageProbScorer.from_settings(engine, settings)
    return LinkageScorer.from_settings(engine, settings, scorer_settings)
