"""Judging protocols compared by the judge-validity benchmark, on one common scale.

Every protocol turns (question, graded references, candidate) into a
:class:`Judgement`: a quality in [0, 1] (higher is better), whether its
discrete verdict is the worst possible ("below every reference") or the best,
and what it cost. LINKAGE protocols (``linkage``, ``linkage-prob``) are the
ones an evaluation reports as MRR/MPR; the others exist to be measured
against them:

- ``linkage-sampled``: LINKAGE as the project first ran it (sampled at the
  generator's temperature, 64 output tokens, no off-topic rule);
- ``linkage``: the text verdict, greedy, with a paper-sized output budget;
- ``linkage-prob``: the verdict distribution from token probabilities;
- ``linkage-prob-gated``: the same, behind a relevance gate (an answer that does not
  address the question is last), the product ``linkage-prob*relevance-prob``;
- ``relevance-prob``: the gate alone (quality = P(the answer addresses the question));
- ``rubric-prob``: a 1-5 rubric against the best reference, expected score;
- ``pairwise-prob``: candidate vs each reference in both orders;
- ``A+B``: the mean quality of several protocols (an ensemble).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from eval.judging.linkage import LinkageItem, LinkageScore, LinkageScorer, max_rank
from eval.judging.linkage_prob import (
    VERDICT_PREFIX,
    LinkageProbScorer,
    expected_percentile_rank,
    gate,
    p_yes,
    relevance_request,
    verdict_distribution,
)
from eval.reports.linkage_metrics import percentile_rank
from typed_rag.engines.base import ChoiceRequest, Engine
from typed_rag.errors import UserError

PROTOCOLS: tuple[str, ...] = (
    "linkage-sampled",
    "linkage",
    "linkage-prob",
    "linkage-prob-gated",
    "relevance-prob",
    "rubric-prob",
    "pairwise-prob",
)
# The protocols that read the judge's token probabilities (Engine.score_choices).
READS_PROBABILITIES = frozenset(
    ("linkage-prob", "linkage-prob-gated", "relevance-prob", "rubric-prob", "pairwise-prob")
)


@dataclass
class Judgement:
    """One protocol's verdict on one candidate, on the common scale."""

    key: str
    quality: float | None  # None: the verdict never parsed
    worst: bool
    best: bool
    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # LINKAGE's verdict distribution (``linkage-prob``), so a gate can be applied later.
    dist: list[float] | None = None


def from_linkage(score: LinkageScore) -> Judgement:
    """A LINKAGE verdict on the common scale: its (expected) percentile rank / 100."""
    worst = max_rank(score.n, score.off_by_one)
    if score.rank is None:
        return Judgement(score.key, None, False, False, score.latency_s)
    if score.dist is not None:
        quality = expected_percentile_rank(score.dist, score.n) / 100
    else:
        quality = percentile_rank(score.rank, score.n) / 100
    return Judgement(
        score.key,
        quality,
        score.rank == worst,
        score.rank == 1,
        score.latency_s,
        score.prompt_tokens,
        score.completion_tokens,
        None if score.dist is None else list(score.dist),
    )


# ---------------------------------------------------------------- rubric

RUBRIC = (
    "Rate a candidate answer to a non-factoid question against a reference answer "
    "written by an expert.\n"
    "5: as complete and accurate as the reference, or better.\n"
    "4: correct and relevant, with small omissions.\n"
    "3: partly correct or incomplete.\n"
    "2: mostly wrong, vague or unsupported.\n"
    "1: wrong, or does not address this question.\n"
    'Judge content, not length or style. Reply with the score only, as "[[3]]".'
)


def judge_messages(instructions: str, question: str, **answers: str) -> list[dict[str, str]]:
    """Instructions, the question, then each named answer (``Reference_answer=...``)."""
    parts = [instructions, f"Question: {question.strip()}"]
    parts += [f"{name.replace('_', ' ')}: {text.strip()}" for name, text in answers.items()]
    return [
        {"role": "system", "content": "You are an impartial judge of answers."},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def rubric_messages(question: str, reference: str, candidate: str) -> list[dict[str, str]]:
    return judge_messages(RUBRIC, question, Reference_answer=reference, Candidate_answer=candidate)


async def rubric_prob(engine: Engine, items: Sequence[LinkageItem]) -> list[Judgement]:
    """Expected 1-5 score from token probabilities, against the best reference."""
    choices = tuple(str(k) for k in range(1, 6))
    requests = [
        ChoiceRequest(
            rubric_messages(it.question, it.references[0].text, it.candidate),
            VERDICT_PREFIX,
            choices,
        )
        for it in items
    ]
    out = []
    for it, res in zip(items, await engine.score_choices(requests), strict=True):
        dist = verdict_distribution(res.logprobs, 5)
        expected = sum(k * p for k, p in enumerate(dist, start=1))
        mode = max(range(5), key=lambda j: dist[j]) + 1
        out.append(
            Judgement(
                it.key, (expected - 1) / 4, mode == 1, mode == 5, res.latency_s, res.prompt_tokens
            )
        )
    return out


# ---------------------------------------------------------------- pairwise

PAIRWISE = (
    "Two answers to the same non-factoid question follow. Which one is better: more "
    "accurate, more complete and more relevant to the question? An answer that does not "
    "address the question loses. Judge content, not length or style. Reply [[A]] or [[B]]."
)


def pairwise_messages(question: str, first: str, second: str) -> list[dict[str, str]]:
    return judge_messages(PAIRWISE, question, Answer_A=first, Answer_B=second)


async def pairwise_prob(engine: Engine, items: Sequence[LinkageItem]) -> list[Judgement]:
    """P(candidate beats reference), both orders averaged, over every reference."""
    requests: list[ChoiceRequest] = []
    for it in items:
        for ref in it.references:
            requests.append(
                ChoiceRequest(
                    pairwise_messages(it.question, it.candidate, ref.text),
                    VERDICT_PREFIX,
                    ("A", "B"),
                )
            )
            requests.append(
                ChoiceRequest(
                    pairwise_messages(it.question, ref.text, it.candidate),
                    VERDICT_PREFIX,
                    ("A", "B"),
                )
            )
    results = iter(await engine.score_choices(requests))
    out = []
    for it in items:
        wins: list[float] = []
        latency = 0.0
        tokens = 0
        for _ref in it.references:
            first, second = next(results), next(results)
            p_first = verdict_ab(first.logprobs)[0]
            p_second = verdict_ab(second.logprobs)[1]
            wins.append((p_first + p_second) / 2)
            latency += first.latency_s + second.latency_s
            tokens += first.prompt_tokens + second.prompt_tokens
        beaten = sum(w > 0.5 for w in wins)
        out.append(
            Judgement(
                it.key,
                sum(wins) / len(wins),
                beaten == 0,
                beaten == len(wins),
                latency,
                tokens,
            )
        )
    return out


def verdict_ab(logprobs: dict[str, float]) -> tuple[float, float]:
    """(P(A), P(B)) renormalised over the two tokens."""
    a, b = verdict_distribution(
        {"1": logprobs.get("A", float("-inf")), "2": logprobs.get("B", float("-inf"))}, 2
    )
    return a, b


# ---------------------------------------------------------------- registry


def parse_protocol(name: str) -> list[str]:
    """``"a+b"`` (ensemble) or ``"a*b"`` (gate) -> its parts, each a known protocol."""
    parts = [p.strip() for p in name.replace("*", "+").split("+") if p.strip()]
    unknown = [p for p in parts if p not in PROTOCOLS]
    if not parts or unknown:
        raise UserError(
            f"unknown judge protocol {name!r}; expected one of {', '.join(PROTOCOLS)}, "
            "or several joined by '+'"
        )
    return parts


async def judge(
    protocol: str,
    engine: Engine,
    items: Sequence[LinkageItem],
    *,
    temperature: float = 0.0,
    seed: int = 42,
    max_resamples: int = 3,
) -> list[Judgement]:
    """Judge ``items`` with one protocol (not an ensemble: see :func:`ensemble`)."""
    if protocol == "linkage-sampled":
        scorer = LinkageScorer(
            engine,
            off_topic_rule=False,
            max_tokens=64,
            temperature=0.8,
            seed=seed,
            max_resamples=max_resamples,
        )
        return [from_linkage(s) for s in await scorer.score(items)]
    if protocol == "linkage":
        scorer = LinkageScorer(
            engine, temperature=temperature, seed=seed, max_resamples=max_resamples
        )
        return [from_linkage(s) for s in await scorer.score(items)]
    if protocol in ("linkage-prob", "linkage-prob-gated"):
        scorer = LinkageProbScorer(engine, gated=protocol == "linkage-prob-gated")
        return [from_linkage(s) for s in await scorer.score(items)]
    if protocol == "relevance-prob":
        results = await engine.score_choices(
            [relevance_request(it.question, it.candidate) for it in items]
        )
        out = []
        for it, res in zip(items, results, strict=True):
            p = p_yes(res.logprobs)
            out.append(Judgement(it.key, p, p < 0.5, False, res.latency_s, res.prompt_tokens))
        return out
    if protocol == "rubric-prob":
        return await rubric_prob(engine, items)
    if protocol == "pairwise-prob":
        return await pairwise_prob(engine, items)
    raise UserError(f"unknown judge protocol {protocol!r}")


def ensemble(parts: Sequence[Sequence[Judgement]]) -> list[Judgement]:
    """Mean quality of the parts per candidate; worst/best only where all parts agree."""
    out = []
    for group in zip(*parts, strict=True):
        qualities = [j.quality for j in group]
        quality = None if any(q is None for q in qualities) else sum(qualities) / len(qualities)  # type: ignore[arg-type]
        out.append(
            Judgement(
                group[0].key,
                quality,
                all(j.worst for j in group),
                all(j.best for j in group),
                sum(j.latency_s for j in group),
                sum(j.prompt_tokens for j in group),
                sum(j.completion_tokens for j in group),
            )
        )
    return out


def gated(linkage: Sequence[Judgement], relevance: Sequence[Judgement]) -> list[Judgement]:
    """``linkage-prob-gated`` from stored parts: quality x P(relevant), and the verdict of
    :func:`eval.judging.linkage_prob.gate` (the mode of the mixed distribution).

    A LINKAGE judgement stored without its distribution (before it was kept) gets
    the earlier rule: last when the gate says no, else LINKAGE's own verdict.
    """
    out = []
    for a, g in zip(linkage, relevance, strict=True):
        relevant = g.quality or 0.0
        if a.dist:
            _mixed, rank = gate(a.dist, relevant)
            worst, best = rank == len(a.dist), rank == 1
        else:
            worst, best = a.worst or relevant < 0.5, a.best and relevant >= 0.5
        out.append(
            Judgement(
                a.key,
                None if a.quality is None else a.quality * relevant,
                worst,
                best,
                a.latency_s + g.latency_s,
                a.prompt_tokens + g.prompt_tokens,
            )
        )
    return out
