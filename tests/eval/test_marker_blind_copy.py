"""The marker-blind copy keeps exactly the verdicts the stripping judge would reproduce."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.marker_blind_copy import marker_blind_copy


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_copy_drops_only_citing_answers_verdicts_and_marks_the_judge(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    answers = [
        {"method": "llm", "question_id": "q1", "answer": "Leaves lose chlorophyll."},
        {"method": "rag", "question_id": "q1", "answer": "Chlorophyll breaks down [2]."},
        {"method": "typed-rag", "question_id": "q1", "answer": "No markers here."},
    ]
    _write(run / "answers.jsonl", answers)
    _write(run / "scores.jsonl", [{**a, "rank": 1} for a in answers])
    fingerprint = {"judge": {"protocol": "linkage-prob-gated", "temperature": 0.0}}
    (run / "run.json").write_text(json.dumps({"fingerprint": fingerprint}))

    counts = marker_blind_copy(run, tmp_path / "copy")

    assert counts == {"rag": 1}
    kept = [json.loads(line) for line in (tmp_path / "copy/scores.jsonl").read_text().splitlines()]
    assert [(s["method"], s["question_id"]) for s in kept] == [("llm", "q1"), ("typed-rag", "q1")]
    manifest = json.loads((tmp_path / "copy/run.json").read_text())
    assert manifest["fingerprint"]["judge"]["citations"] == "strip"
    assert len((run / "scores.jsonl").read_text().splitlines()) == 3  # the source is untouched
    with pytest.raises(SystemExit, match="exists"):
        marker_blind_copy(run, tmp_path / "copy")
