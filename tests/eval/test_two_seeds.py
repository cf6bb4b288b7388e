"""``benchmarks.two_seeds``: each pair's difference under both seeds and their mean."""

import pytest

from benchmarks.two_seeds import drift, pair_rows, plot_pairs


def test_pair_rows_pair_each_seed_and_their_mean() -> None:
    subset = {"q1": "nq", "q2": "nq", "q3": "squad"}
    a = {("typed-rag", q): 0.6 for q in subset} | {("llm", q): 0.5 for q in subset}
    b = {("typed-rag", q): 0.4 for q in subset} | {("llm", q): 0.5 for q in subset}
    del b["llm", "q3"]  # not scored under seed b: left out of every row
    rows = {r["subset"]: r for r in pair_rows(a, b, subset, "typed-rag", "llm")}
    assert set(rows) == {"all", "nq"}
    assert rows["all"]["mean"]["n"] == 2
    assert rows["nq"]["seed_a"]["diff"][0] == pytest.approx(0.1)
    assert rows["nq"]["seed_b"]["diff"][0] == pytest.approx(-0.1)
    assert rows["nq"]["mean"]["diff"][0] == pytest.approx(0.0)
    assert pair_rows(a, b, subset, "typed-rag", "rag") == []  # no rag verdicts: no rows


def test_plot_pairs_writes_a_png(tmp_path) -> None:
    subset = {"q1": "nq", "q2": "squad"}
    a = {("typed-rag", q): 0.6 for q in subset} | {("llm", q): 0.5 for q in subset}
    path = plot_pairs(pair_rows(a, a, subset, "typed-rag", "llm"), tmp_path / "two-seeds.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_drift_is_seed_b_minus_seed_a_per_method() -> None:
    a = {("llm", "q1"): 0.5, ("llm", "q2"): 0.3}
    b = {("llm", "q1"): 0.7}
    assert drift(a, b) == {"llm": {"n": 1, "diff": [0.2, 0.2, 0.2]}}
