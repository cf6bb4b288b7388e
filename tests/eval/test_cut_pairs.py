"""``benchmarks.cut_pairs``: a finishing cut measured on the distinct answers it changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.cut_pairs import changed_pairs, judge_command, summarize


def _write(path: Path, rows: list[dict]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "answers.jsonl").write_text("".join(json.dumps(r["a"]) + "\n" for r in rows))
    (path / "scores.jsonl").write_text("".join(json.dumps(r["s"]) + "\n" for r in rows if r["s"]))


def _row(qid: str, answer: str, dist: list[float] | None, cut: bool = False) -> dict:
    result = {"type": "FACTOID", **({"uncopied": True} if cut else {})}
    a = {"method": "typed-rag", "question_id": qid, "answer": answer, "result": result}
    s = {"method": "typed-rag", "question_id": qid, "status": "ok", "n": 4, "dist": dist}
    return {"a": a, "s": s if dist else None}


def test_changed_answers_are_paired_once_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    worst, best = [0, 0, 0, 0, 1.0], [1.0, 0, 0, 0, 0]  # rank 5 / rank 1 of 5
    # the committed runs, as generated
    _write(Path("results/a/run"), [_row("q1", "L.\n\n[1] copy", worst), _row("q2", "X", best)])
    _write(Path("results/b/run"), [_row("q1", "L.\n\n[1] copy", worst)])
    # their replays: q1 cut and judged again; q2 unchanged
    runs = tmp_path / "folder/runs"
    _write(runs / "a__run", [_row("q1", "L.", best, cut=True), _row("q2", "X", best)])
    _write(runs / "b__run", [_row("q1", "L.", best, cut=True)])  # the same answer: once

    records = changed_pairs(tmp_path / "folder", "uncopied")

    assert [(r["run"], r["question_id"]) for r in records] == [("a__run", "q1")]
    assert records[0]["mrr"][0] < records[0]["mrr"][1]
    assert summarize(records)["better"] == 1
    assert changed_pairs(tmp_path / "folder", "unechoed") == []  # another cut's flag


def test_judge_command_is_the_runs_own_with_its_spliced_route(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    argv = ["/venv/bin/typed-rag", "--set", "eval.route=labels-factoid", "--set", "a=1"]
    argv += ["eval", "run", "--methods", "llm,rag,typed-rag", "--first", "9", "--out", "old"]
    manifest = {
        "invocations": [{"argv": ["typed-rag", "eval", "report", "old"]}, {"argv": argv}],
        "fingerprint": {"route": "labels-classifier"},
    }
    (run / "run.json").write_text(json.dumps(manifest))

    cmd = judge_command(run, Path("folder/runs/x"), ["method.drop_repeats=true"])

    assert cmd == [
        "typed-rag", "--set", "a=1", "--set", "eval.route=labels-classifier",
        "--set", "method.drop_repeats=true", "eval", "run", "--methods", "typed-rag",
        "--first", "9", "--out", "folder/runs/x", "--stored-only", "--no-progress",
    ]  # fmt: skip
    # a run without a route in its fingerprint keeps the one its command named
    (run / "run.json").write_text(json.dumps({**manifest, "fingerprint": {}}))
    assert "eval.route=labels-factoid" in judge_command(run, Path("r"), [])
