"""The judge-view copy keeps exactly the verdicts the stricter judge would reproduce."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.judge_view_copy import judge_view_copy

VOUCH = "Leaves lose chlorophyll. This is supported by the references."


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _run(tmp_path: Path, judge: dict) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    answers = [
        {"method": "llm", "question_id": "q1", "answer": "Leaves lose chlorophyll."},
        {"method": "rag", "question_id": "q1", "answer": "Chlorophyll breaks down [2]."},
        {"method": "typed-rag", "question_id": "q1", "answer": VOUCH},
    ]
    _write(run / "answers.jsonl", answers)
    _write(run / "scores.jsonl", [{**a, "rank": 1} for a in answers])
    fingerprint = {"judge": {"protocol": "linkage-prob-gated", "temperature": 0.0, **judge}}
    (run / "run.json").write_text(json.dumps({"fingerprint": fingerprint}))
    return run


def _kept(copy: Path) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in (copy / "scores.jsonl").read_text().splitlines()]
    return [(s["method"], s["question_id"]) for s in rows]


def test_marker_blind_copy_drops_only_citing_answers_verdicts(tmp_path: Path) -> None:
    run = _run(tmp_path, {})
    assert judge_view_copy(run, tmp_path / "copy", ["citations"]) == {"rag": 1}
    assert _kept(tmp_path / "copy") == [("llm", "q1"), ("typed-rag", "q1")]
    manifest = json.loads((tmp_path / "copy/run.json").read_text())
    assert manifest["fingerprint"]["judge"]["citations"] == "strip"
    assert "source_talk" not in manifest["fingerprint"]["judge"]
    assert len((run / "scores.jsonl").read_text().splitlines()) == 3  # the source is untouched
    with pytest.raises(SystemExit, match="exists"):
        judge_view_copy(run, tmp_path / "copy", ["citations"])


def test_source_talk_copy_of_a_marker_blind_run_keeps_its_marker_blindness(
    tmp_path: Path,
) -> None:
    run = _run(tmp_path, {"citations": "strip"})
    assert judge_view_copy(run, tmp_path / "copy", ["source-talk"]) == {"typed-rag": 1}
    assert _kept(tmp_path / "copy") == [("llm", "q1"), ("rag", "q1")]
    judge = json.loads((tmp_path / "copy/run.json").read_text())["fingerprint"]["judge"]
    assert judge["citations"] == "strip" and judge["source_talk"] == "strip"
    with pytest.raises(SystemExit, match="unknown"):
        judge_view_copy(run, tmp_path / "other", ["vouching"])
