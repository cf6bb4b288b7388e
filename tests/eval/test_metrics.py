"""MRR/MPR on hand-computed cases, and the bootstrap interval's determinism."""

from __future__ import annotations

import math

import pytest

from eval.reports.linkage_metrics import (
    bootstrap_ci,
    estimate,
    mpr,
    mrr,
    percentile_rank,
    reciprocal_rank,
    summarize,
)


def test_reciprocal_and_percentile_rank_by_hand() -> None:
    assert reciprocal_rank(1) == 1.0
    assert reciprocal_rank(4) == 0.25
    # 4 references: rank 1 -> 100, rank 3 -> (1 - 2/4) * 100 = 50, rank 5 (worse than all) -> 0
    assert percentile_rank(1, 4) == 100.0
    assert percentile_rank(3, 4) == 50.0
    assert percentile_rank(5, 4) == 0.0
    # 3 references, rank 2 -> (1 - 1/3) * 100
    assert percentile_rank(2, 3) == pytest.approx(66.6667, abs=1e-3)


def test_mrr_and_mpr_of_a_small_set() -> None:
    ranks, ns = [1, 2, 4, 5], [4, 4, 3, 4]
    assert mrr(ranks) == pytest.approx((1 + 0.5 + 0.25 + 0.2) / 4)
    expected = (100 + 75 + (1 - 3 / 3) * 100 + 0) / 4
    assert mpr(ranks, ns) == pytest.approx(expected)
    assert math.isnan(mrr([]))


@pytest.mark.parametrize("bad", [0, -1])
def test_invalid_ranks_raise(bad: int) -> None:
    with pytest.raises(ValueError):
        reciprocal_rank(bad)
    with pytest.raises(ValueError):
        percentile_rank(bad, 3)


def test_bootstrap_ci_is_deterministic_and_brackets_the_mean() -> None:
    values = [1.0, 0.5, 0.25, 1.0, 0.2, 0.333, 1.0, 0.5] * 10
    a = bootstrap_ci(values, n_boot=500, seed=7)
    b = bootstrap_ci(values, n_boot=500, seed=7)
    c = bootstrap_ci(values, n_boot=500, seed=8)
    assert a == b
    assert a != c
    mean = sum(values) / len(values)
    assert a[0] < mean < a[1]
    # a constant sample has a zero-width interval
    assert bootstrap_ci([0.5] * 20, n_boot=100) == (0.5, 0.5)


def test_summarize_returns_both_metrics_with_counts() -> None:
    s = summarize([1, 3], [2, 2], n_boot=200, seed=1)
    assert s["mrr"].mean == pytest.approx((1 + 1 / 3) / 2)
    assert s["mpr"].mean == pytest.approx((100 + 0) / 2)
    assert s["mrr"].count == 2
    assert estimate([], n_boot=10).count == 0
