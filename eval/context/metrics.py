"""CRUX's context metrics over an answerability matrix, and the rank correlations of its analysis.

``ratings[p][s]`` is the 0-5 grade of passage ``p`` for sub-question ``s``; a
sub-question is answered by a text when its grade reaches ``threshold`` (3 in
the paper). Only *answerable* sub-questions count: those that some passage of
the question's judged pool answers (the paper filters the others out with its
oracle passages; Wiki-NFQA has no oracle, so the pool of every retrieval
configuration stands in for it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

THRESHOLD = 3
ALPHA = 0.5  # alpha-nDCG's redundancy penalty (Clarke et al.; ir_measures' default)
GAMMA = 0.5  # density's weighting factor (the paper's choice)

Ratings = Sequence[Sequence[int]]


def answered(ratings: Ratings, threshold: int = THRESHOLD) -> set[int]:
    """Sub-questions that at least one of these texts answers (max grade over texts)."""
    return {s for row in ratings for s, grade in enumerate(row) if grade >= threshold}


def answerable(pool: Ratings, threshold: int = THRESHOLD) -> list[int]:
    """The sub-questions that count: those some passage of the judged pool answers."""
    return sorted(answered(pool, threshold))


def coverage(context: Ratings, keep: Sequence[int], threshold: int = THRESHOLD) -> float | None:
    """Share of the answerable sub-questions ``keep`` that the context answers; None if none."""
    if not keep:
        return None
    return len(answered(context, threshold) & set(keep)) / len(keep)


def _dcg(ranked: Ratings, keep: Sequence[int], threshold: int, alpha: float) -> float:
    seen = dict.fromkeys(keep, 0)
    total = 0.0
    for rank, row in enumerate(ranked, start=1):
        gain = 0.0
        for s in keep:
            if row[s] >= threshold:
                gain += (1 - alpha) ** seen[s]
                seen[s] += 1
        total += gain / math.log2(rank + 1)
    return total


def ideal_ranking(
    pool: Ratings,
    keep: Sequence[int],
    depth: int,
    threshold: int = THRESHOLD,
    alpha: float = ALPHA,
) -> list[int]:
    """Greedy ideal order for alpha-nDCG: each step takes the passage with the largest
    discounted novelty gain given those already placed (the standard approximation)."""
    seen = dict.fromkeys(keep, 0)
    left = list(range(len(pool)))
    order: list[int] = []
    while left and len(order) < depth:

        def gain(p: int) -> float:
            return sum((1 - alpha) ** seen[s] for s in keep if pool[p][s] >= threshold)

        best = max(left, key=lambda p: (gain(p), -p))
        order.append(best)
        left.remove(best)
        for s in keep:
            if pool[best][s] >= threshold:
                seen[s] += 1
    return order


def alpha_ndcg(
    ranked: Ratings,
    pool: Ratings,
    keep: Sequence[int],
    depth: int | None = None,
    threshold: int = THRESHOLD,
    alpha: float = ALPHA,
) -> float | None:
    """Ranked coverage: alpha-nDCG@depth of the context, sub-questions as subtopics, against
    the greedy ideal ordering of the pool; None without answerable sub-questions."""
    if not keep:
        return None
    depth = depth or len(ranked)
    ideal = ideal_ranking(pool, keep, depth, threshold, alpha)
    best = _dcg([pool[p] for p in ideal], keep, threshold, alpha)
    return _dcg(list(ranked)[:depth], keep, threshold, alpha) / best if best > 0 else None


def required_subset(pool: Ratings, keep: Sequence[int], threshold: int = THRESHOLD) -> list[int]:
    """The paper's required passages: greedily take the passage answering the most
    still-unanswered sub-questions until none is left (the oracle context)."""
    todo = set(keep)
    chosen: list[int] = []
    while todo:
        new = {p: {s for s in todo if pool[p][s] >= threshold} for p in range(len(pool))}
        best = max(new, key=lambda p: (len(new[p]), -p), default=None)
        if best is None or not new[best]:
            break
        chosen.append(best)
        todo -= new[best]
    return chosen


def density(
    context: Ratings,
    context_tokens: int,
    keep: Sequence[int],
    oracle_tokens: int,
    threshold: int = THRESHOLD,
    gamma: float = GAMMA,
) -> float | None:
    """Answered sub-questions per token relative to the oracle context's, to the power
    ``gamma`` (diminishing returns); 1.0 is the oracle's density."""
    if not keep or context_tokens <= 0 or oracle_tokens <= 0:
        return None
    got = len(answered(context, threshold) & set(keep))
    return ((got / context_tokens) / (len(keep) / oracle_tokens)) ** gamma


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b (ties in either ranking handled); None when it is undefined."""
    if len(x) != len(y):
        raise ValueError(f"kendall_tau needs equal lengths, got {len(x)} and {len(y)}")
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    n0 = concordant + discordant
    denom = math.sqrt((n0 + ties_x) * (n0 + ties_y))
    return (concordant - discordant) / denom if denom > 0 else None


def relevance_metrics(relevant: Sequence[bool], total_relevant: int) -> dict[str, float]:
    """The relevance view beside CRUX: hit (recall of "some relevant passage"), average
    precision and binary nDCG of a ranked list, ``total_relevant`` relevant in the pool."""
    hits = [i for i, r in enumerate(relevant, start=1) if r]
    ap = (
        sum((k + 1) / rank for k, rank in enumerate(hits)) / total_relevant
        if total_relevant
        else 0.0
    )
    dcg = sum(1 / math.log2(rank + 1) for rank in hits)
    idcg = sum(1 / math.log2(r + 1) for r in range(1, min(total_relevant, len(relevant)) + 1))
    return {"hit": float(bool(hits)), "ap": ap, "ndcg": dcg / idcg if idcg else 0.0}
