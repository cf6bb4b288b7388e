"""``benchmarks.weak_retrieval``: the signals of weak retrieval and the per-bin differences."""

import pytest

from benchmarks.weak_retrieval import by_quartile, draft_support


def test_draft_support_counts_the_drafts_own_words_only() -> None:
    passages = [("Olympic flag", "Five rings: blue, yellow, black, green and red.")]
    question = "What are the colors of the Olympic flag?"
    assert draft_support(question, "The colors are blue, white and green.", passages) == (
        pytest.approx(2 / 3)  # "colors" is the question's; blue and green of blue, white, green
    )
    assert draft_support(question, "Olympic flag colors.", passages) == 0.0  # nothing new
    assert draft_support(question, "Blue and green.", []) == 0.0


def test_by_quartile_orders_bins_by_the_signal() -> None:
    rows = [{"s": float(i), "diff_llm": 0.1 if i < 4 else -0.1} for i in range(16)]
    bins = by_quartile(rows, "s")
    assert [b["n"] for b in bins] == [4, 4, 4, 4]
    assert bins[0]["range"] == [0.0, 3.0] and bins[0]["diff_llm"][0] == pytest.approx(0.1)
    assert all(b["diff_llm"][0] == pytest.approx(-0.1) for b in bins[1:])
    rows.append({"s": None, "diff_llm": 9.0})  # no passages scored: left out
    assert sum(b["n"] for b in by_quartile(rows, "s")) == 16
    assert by_quartile([{"s": None, "diff_llm": 0.0}], "s") == []  # no draft on this route
