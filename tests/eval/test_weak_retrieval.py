"""``benchmarks.weak_retrieval``: the signals of weak retrieval and the per-bin differences."""

import pytest

from benchmarks.weak_retrieval import by_gold, by_quartile, draft_support, gold_shown, plot_gold


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


def test_gold_shown_reads_passage_texts_not_titles() -> None:
    passages = [("Alcohol laws of Wisconsin", "The drinking age is 21 in the state.")]
    assert gold_shown(["21"], passages) is True
    assert gold_shown(["18"], passages) is False
    assert gold_shown(["wisconsin"], [("Wisconsin", "A state.")]) is False  # a title only
    assert gold_shown([], passages) is None  # no gold short answer: left out


def test_by_gold_splits_each_subset_by_whether_the_gold_was_shown(tmp_path) -> None:
    def row(subset, shown, diff, llm=False, typed=False):
        return {"subset": subset, "gold_shown": shown, "diff_llm": diff,
                "llm_states_gold": llm, "typed_states_gold": typed}  # fmt: skip

    rows = [
        row("nq", True, -0.2, llm=True, typed=True),
        row("nq", False, 0.1),
        row("nq", False, 0.3),
        row("squad", True, 0.4, typed=True),
        row("squad", None, 9.0),  # no gold short answer: left out
    ]
    table = by_gold(rows)
    assert list(table) == ["all", "tied three", "other three", "nq", "squad"]
    assert table["all"]["n"] == 4 and table["all"]["shown"] == 2
    assert table["all"]["with_gold"]["diff_llm"][0] == pytest.approx(0.1)
    assert table["all"]["with_gold"]["llm_states_gold"] == 1
    assert table["all"]["with_gold"]["typed_states_gold"] == 2
    assert table["tied three"] == table["nq"]  # NQ is one of the tied subsets
    assert table["nq"]["with_gold"]["diff_llm"][0] == pytest.approx(-0.2)
    assert table["nq"]["without_gold"]["diff_llm"][0] == pytest.approx(0.2)
    assert table["squad"]["without_gold"] == {
        "n": 0, "diff_llm": None, "llm_states_gold": 0, "typed_states_gold": 0,
    }  # fmt: skip
    path = plot_gold(table, tmp_path / "gold-shown.png")
    assert path.read_bytes().startswith(b"\x89PNG")
