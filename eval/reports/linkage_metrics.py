"""LINKAGE metrics: mean reciprocal rank and mean percentile rank, with bootstrap CIs.

A candidate ranked ``k`` among ``n`` references (``k = 1`` beats them all,
``k = n + 1`` loses to them all) scores ``1/k`` (MRR) and
``(1 - (k - 1)/n) * 100`` (MPR). Benchmarks of a few hundred questions give
noisy means, so every mean comes with a percentile bootstrap 95% interval
from a fixed seed: the same run always reports the same interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

N_BOOT = 1000  # bootstrap resamples of a reported 95% interval: stable to about 0.001 here
SEED = 42  # the resampling seed: the same run always reports the same interval


def reciprocal_rank(rank: int) -> float:
    if rank < 1:
        raise ValueError(f"rank must be >= 1, got {rank}")
    return 1.0 / rank


def percentile_rank(rank: int, n: int) -> float:
    """``(1 - (rank-1)/n) * 100``: 100 for rank 1, 0 for rank n+1."""
    if n < 1:
        raise ValueError(f"number of references must be >= 1, got {n}")
    if rank < 1:
        raise ValueError(f"rank must be >= 1, got {rank}")
    return (1.0 - (rank - 1) / n) * 100.0


def mrr(ranks: Sequence[int]) -> float:
    if not ranks:
        return float("nan")
    return float(np.mean([reciprocal_rank(k) for k in ranks]))


def mpr(ranks: Sequence[int], ns: Sequence[int]) -> float:
    if len(ranks) != len(ns):
        raise ValueError("ranks and ns differ in length")
    if not ranks:
        return float("nan")
    return float(np.mean([percentile_rank(k, n) for k, n in zip(ranks, ns, strict=True)]))


@dataclass(frozen=True)
class Estimate:
    """A mean with its bootstrap interval over ``count`` questions."""

    mean: float
    low: float
    high: float
    count: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)

    def rounded(self, digits: int = 4) -> list[float]:
        """``[mean, low, high]`` rounded, the form the summaries under ``results/`` keep."""
        return [round(self.mean, digits), round(self.low, digits), round(self.high, digits)]


def bootstrap_ci(
    values: Sequence[float], n_boot: int = 1000, seed: int = 42, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean; (nan, nan) for no values."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return float("nan"), float("nan")
    if arr.size == 1 or n_boot <= 0:
        return float(arr.mean()), float(arr.mean())
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    # Chunked so 21M-question-sized inputs would not allocate n_boot x N at once.
    step = max(1, 2_000_000 // arr.size)
    for start in range(0, n_boot, step):
        stop = min(n_boot, start + step)
        idx = rng.integers(0, arr.size, size=(stop - start, arr.size))
        means[start:stop] = arr[idx].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)


def estimate(values: Sequence[float], n_boot: int = 1000, seed: int = 42) -> Estimate:
    arr = np.asarray(values, dtype=float)
    mean = float(arr.mean()) if arr.size else float("nan")
    low, high = bootstrap_ci(arr, n_boot=n_boot, seed=seed)
    return Estimate(mean=mean, low=low, high=high, count=int(arr.size))


def ordered(better: float, worse: float) -> float:
    """1 when a judge scores a pair of known order (better, worse) in that order, 0.5 when
    it ties them, else 0: a judge-validity ordering rate is its mean over pairs."""
    return 1.0 if better > worse else 0.5 if better == worse else 0.0


def summarize(
    ranks: Sequence[int], ns: Sequence[int], n_boot: int = 1000, seed: int = 42
) -> dict[str, Estimate]:
    """MRR and MPR (each with its 95% CI) of one group of scored answers."""
    rr = [reciprocal_rank(k) for k in ranks]
    pr = [percentile_rank(k, n) for k, n in zip(ranks, ns, strict=True)]
    return {"mrr": estimate(rr, n_boot, seed), "mpr": estimate(pr, n_boot, seed)}


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho with average ranks for ties; nan when undefined."""
    if len(x) < 3 or len(x) != len(y):
        return float("nan")

    def ranks(v: Sequence[float]) -> np.ndarray:
        arr = np.asarray(v, dtype=float)
        order = arr.argsort(kind="mergesort")
        r = np.empty(len(arr))
        r[order] = np.arange(len(arr))
        for value in np.unique(arr):
            idx = arr == value
            r[idx] = r[idx].mean()
        return r

    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def paired_difference(
    a: Sequence[float], b: Sequence[float], n_boot: int = 1000, seed: int = 42
) -> Estimate:
    """Mean of the per-question differences ``a - b`` with a paired bootstrap 95% CI.

    Resampling questions (not answers) keeps each question's two scores together,
    so the interval reflects method differences, not question difficulty.
    """
    if len(a) != len(b):
        raise ValueError("paired scores differ in length")
    return estimate([x - y for x, y in zip(a, b, strict=True)], n_boot=n_boot, seed=seed)
