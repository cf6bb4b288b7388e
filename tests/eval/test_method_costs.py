"""``benchmarks.method_costs``: every change tried points at committed runs that pair."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.method_costs import CHANGES, cost, measured, table
from eval.reports.compare import parse_pool

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c.setting)
def test_each_change_pairs_committed_answers(change, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    for side in (change.a, change.b):
        for run in parse_pool(side)[0]:
            assert (run / "answers.jsonl").is_file(), side
    c = cost(change.a, change.b)
    assert c is not None and c["questions"] >= 8
    dev = measured(change.dev, change.a, change.b, "all", n_boot=50)
    assert dev["n"] >= 8 and dev["mrr_ci"][0] <= dev["mrr_diff"] <= dev["mrr_ci"][1]
    row = {"name": change.name, "setting": change.setting, "verdict": change.verdict,
           "dev": dev, "check": None, "cost": c}  # fmt: skip
    assert change.setting in table([row])
