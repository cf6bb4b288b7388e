"""The prompt-lookup replay: drafts come from the first earlier occurrence of the text's last
n-gram, a check of d drafted tokens costs the measured evaluation of d + 1 tokens."""

from __future__ import annotations

import pytest

from benchmarks.engine_bench import NgramIndex, replay, step_cost

COSTS = {1: 1.0, 2: 1.68, 4: 2.51, 8: 5.59}


def test_draft_follows_the_first_earlier_occurrence_of_the_longest_match() -> None:
    seen = NgramIndex(max_ngram=2)
    seen.extend([1, 2, 3, 4, 5, 9, 2, 7, 1, 2])
    assert seen.draft(3) == [3, 4, 5]  # (1, 2) first ends at 2, not its own tail
    only_long = NgramIndex(max_ngram=3, min_ngram=2)
    only_long.extend([4, 2, 8, 6, 2])  # the one-token match (2,) is too short
    assert only_long.draft(3) == []


def test_step_cost_interpolates_between_measured_sizes() -> None:
    cost = step_cost(COSTS)
    assert cost(2) == 1.68
    assert cost(3) == pytest.approx((1.68 + 2.51) / 2)
    assert cost(16) == pytest.approx(5.59 * 2)


def test_replay_counts_accepted_tokens_and_pays_for_each_check() -> None:
    # no match for the first token (1 step at cost 1), then [2, 3, 4] drafted and all
    # taken with the model's own 5 (cost of 4 tokens), then [1, 2, 3] drafted, 9 decoded
    r = replay([1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 9], (1, 2), 3, step_cost(COSTS))
    assert r == {"tokens": 6, "steps": 3, "cost": pytest.approx(6.02), "drafted": 6,
                 "accepted": 3}  # fmt: skip
