"""``eval compare``: one method across two run directories, paired per question."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from eval.reports.compare import compare_runs, parse_pool
from typed_rag.errors import UserError

FP = {"scorer": {"model": "judge"}, "judge": {"protocol": "linkage"}, "reference_seed": 7}


def _run(folder: Path, ranks: dict[str, int], method: str = "rag", **fingerprint) -> Path:
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"fingerprint": {**FP, **fingerprint}}))
    rows = [
        {"method": method, "question_id": q, "subset": "nq", "type": "REASON", "rank": r, "n": 4}
        for q, r in ranks.items()
    ]
    rows.append({"method": "llm", "question_id": "q1", "subset": "nq", "type": "REASON",
                 "rank": 4, "n": 4})  # fmt: skip
    (folder / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_compare_pairs_the_questions_both_runs_scored(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", {"q1": 1, "q2": 1, "q3": 2})
    b = _run(tmp_path / "b", {"q1": 2, "q2": 1, "q4": 1})
    result = compare_runs(f"{a}:rag", f"{b}:rag", n_boot=200)
    assert result["questions"] == 2 and result["unpaired"] == 2
    by_group = {r["subset"]: r for r in result["rows"]}
    assert set(by_group) == {"all", "nq", "REASON", "typed"}
    assert by_group["all"]["n"] == 2
    assert by_group["all"]["mrr_diff"] == pytest.approx((1.0 - 0.5 + 0.0) / 2)  # q1, q2


def test_compare_refuses_runs_scored_differently(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", {"q1": 1})
    b = _run(tmp_path / "b", {"q1": 2}, judge={"protocol": "pairwise"})
    with pytest.raises(UserError, match="scored differently: judge"):
        compare_runs(f"{a}:rag", f"{b}:rag")
    # A setting added after one run was made counts only where it left its default.
    plan = {"temperature": 0.8, "plan_retries": 2}
    later = {**plan, "sub_answer_max_tokens": 512}
    c, d, e = (
        _run(tmp_path / n, {"q1": 1}, scorer_sampling=s)
        for n, s in (("c", plan), ("d", later), ("e", {**later, "sub_answer_max_tokens": 64}))
    )
    assert compare_runs(f"{c}:rag", f"{d}:rag", n_boot=10)["questions"] == 1
    with pytest.raises(UserError, match="scored differently: scorer_sampling"):
        compare_runs(f"{c}:rag", f"{e}:rag")
    # perspective_max_tokens was merged into sub_answer_max_tokens: a run that recorded it
    # equal compares with one made since; one that recorded its own value does not.
    merged = {**later, "perspective_max_tokens": 512}
    f, g = (
        _run(tmp_path / n, {"q1": 1}, scorer_sampling=s)
        for n, s in (("f", merged), ("g", {**merged, "perspective_max_tokens": 64}))
    )
    assert compare_runs(f"{d}:rag", f"{f}:rag", n_boot=10)["questions"] == 1
    with pytest.raises(UserError, match="scored differently: scorer_sampling"):
        compare_runs(f"{d}:rag", f"{g}:rag")
    with pytest.raises(UserError, match="no scored answers of method 'typed-rag'"):
        compare_runs(f"{a}:typed-rag", f"{a}:rag")
    with pytest.raises(UserError, match="RUN_DIR:METHOD"):
        parse_pool("results/run")


def test_eval_compare_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _run(tmp_path / "a", {"q1": 1, "q2": 2})
    b = _run(tmp_path / "b", {"q1": 2, "q2": 2})
    out = tmp_path / "cmp.json"
    assert main(["eval", "compare", f"{a}:rag", f"{b}:rag", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2 paired questions" in printed and "+0.250" in printed
    assert json.loads(out.read_text())["questions"] == 2
    assert main(["eval", "compare", f"{a}:rag", str(b)]) == 2
    assert "RUN_DIR:METHOD" in capsys.readouterr().err


def _answers(folder: Path, calls: dict[str, list[tuple[int, int]]], wall: dict[str, float]) -> None:
    rows = [
        {"method": "rag", "question_id": q, "wall_s": wall[q],
         "result": {"calls": [{"prompt_tokens": p, "completion_tokens": c} for p, c in cs]}}
        for q, cs in calls.items()
    ]  # fmt: skip
    (folder / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_compare_reports_what_the_paired_answers_cost(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", {"q1": 1, "q2": 1, "q3": 2})
    b = _run(tmp_path / "b", {"q1": 2, "q2": 1, "q3": 1})
    assert compare_runs(f"{a}:rag", f"{b}:rag", n_boot=10)["cost"] is None  # verdicts only
    # q3 has no answer in b, so costs pair on q1 and q2 alone.
    _answers(a, {"q1": [(100, 10), (300, 30)], "q2": [(50, 5)], "q3": [(9, 9)] * 5},
             {"q1": 20.0, "q2": 10.0, "q3": 99.0})  # fmt: skip
    _answers(b, {"q1": [(100, 20)], "q2": [(50, 5)]}, {"q1": 10.0, "q2": 10.0})
    cost = compare_runs(f"{a}:rag", f"{b}:rag", n_boot=10)["cost"]
    assert cost["questions"] == 2
    assert cost["a"] == {"calls": 1.5, "prompt_tokens": 225.0, "completion_tokens": 22.5,
                         "seconds": 15.0}  # fmt: skip
    assert cost["b"] == {"calls": 1.0, "prompt_tokens": 75.0, "completion_tokens": 12.5,
                         "seconds": 10.0}  # fmt: skip
    assert cost["seconds_ratio"] == 1.5  # median of 2.0 and 1.0


def _texts(folder: Path, answers: dict[str, str]) -> None:
    rows = [{"method": "rag", "question_id": q, "answer": t} for q, t in answers.items()]
    (folder / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_compare_changed_only_pairs_the_questions_whose_answers_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _run(tmp_path / "a", {"q1": 1, "q2": 1, "q3": 1})
    b = _run(tmp_path / "b", {"q1": 2, "q2": 4, "q3": 4})
    with pytest.raises(UserError, match="no answers to compare"):
        compare_runs(f"{a}:rag", f"{b}:rag", n_boot=10, changed_only=True)
    _texts(a, {"q1": "Paris.", "q2": "Lyon [1].", "q3": "Nice."})
    _texts(b, {"q1": "Paris. ", "q2": "Lyon.", "q3": "Nice."})  # only q2 differs
    whole = compare_runs(f"{a}:rag", f"{b}:rag", n_boot=10)
    changed = compare_runs(f"{a}:rag", f"{b}:rag", n_boot=10, changed_only=True)
    assert whole["questions"] == 3 and changed["questions"] == 1
    assert {r["subset"]: r for r in changed["rows"]}["all"]["mrr_diff"] == pytest.approx(0.75)
    assert main(["eval", "compare", f"{a}:rag", f"{b}:rag", "--changed-only"]) == 0
    assert "1 paired questions whose answers differ" in capsys.readouterr().out
    _texts(b, {"q1": "Paris.", "q2": "Lyon [1].", "q3": "Nice."})  # now nothing changed
    assert main(["eval", "compare", f"{a}:rag", f"{b}:rag", "--changed-only"]) == 2
    assert "no scored question has a changed answer" in capsys.readouterr().err


def test_a_side_may_pool_runs_answered_apart(tmp_path: Path) -> None:
    a1, a2 = _run(tmp_path / "a1", {"q1": 1}), _run(tmp_path / "a2", {"q2": 1, "q3": 1})
    b1, b2 = _run(tmp_path / "b1", {"q1": 2, "q2": 2}), _run(tmp_path / "b2", {"q3": 4})
    result = compare_runs(f"{a1},{a2}:rag", f"{b1},{b2}:rag", n_boot=10)
    assert result["questions"] == 3
    by_group = {r["subset"]: r for r in result["rows"]}
    assert by_group["all"]["mrr_diff"] == pytest.approx((0.5 + 0.5 + 0.75) / 3, abs=1e-4)
    assert parse_pool(f"{a1},{a2}:rag") == ([a1, a2], "rag")
    rescored = (a2 / "scores.jsonl").read_text().splitlines()[0]  # q2 judged again in a2
    with (a2 / "scores.jsonl").open("a") as f:
        f.write(rescored.replace('"rank": 1', '"rank": 2') + "\n")
    assert compare_runs(f"{a1},{a2}:rag", f"{b1},{b2}:rag", n_boot=10)["questions"] == 3
    with pytest.raises(UserError, match="must not overlap"):
        compare_runs(f"{a1},{b1}:rag", f"{b2}:rag", n_boot=10)  # q1 in both a1 and b1
    c = _run(tmp_path / "c", {"q4": 1}, judge={"protocol": "pairwise"})
    with pytest.raises(UserError, match="scored differently: judge"):
        compare_runs(f"{a1},{c}:rag", f"{b1}:rag", n_boot=10)
