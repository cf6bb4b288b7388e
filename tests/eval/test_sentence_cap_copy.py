"""The sentence-cap copy leaves a run as ``method.factoid_sentences`` would have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.sentence_cap_copy import sentence_cap_copy


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_copy_cuts_only_factoid_route_typed_answers_and_drops_their_verdicts(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    long = "It is the crust [1]. The draft answer is correct [2]."
    passages = [{"citation": 1}, {"citation": 2}]

    def row(method: str, qid: str, route: str) -> dict:
        result = {"answer": long, "type": route, "passages": passages, "citations": [1, 2]}
        return {"method": method, "question_id": qid, "answer": long, "result": result}

    answers = [
        row("typed-rag", "q1", "FACTOID"),
        row("typed-rag", "q2", "REASON"),
        row("rag", "q1", "FACTOID"),
        {**row("typed-rag", "q3", "FACTOID"), "answer": "Short [1]."},
    ]
    answers[3]["result"]["answer"] = "Short [1]."
    _write(run / "answers.jsonl", answers)
    _write(run / "scores.jsonl", [{**a, "rank": 1} for a in answers])
    (run / "run.json").write_text(json.dumps({"fingerprint": {"method": {}}}))

    assert sentence_cap_copy(run, tmp_path / "copy", 1) == 1

    copied = _read(tmp_path / "copy/answers.jsonl")
    assert copied[0]["answer"] == copied[0]["result"]["answer"] == "It is the crust [1]."
    assert copied[0]["result"]["shortened"] and copied[0]["result"]["citations"] == [1]
    assert [a["answer"] for a in copied[1:]] == [long, long, "Short [1]."]
    kept = [(s["method"], s["question_id"]) for s in _read(tmp_path / "copy/scores.jsonl")]
    assert kept == [("typed-rag", "q2"), ("rag", "q1"), ("typed-rag", "q3")]
    manifest = json.loads((tmp_path / "copy/run.json").read_text())
    assert manifest["fingerprint"]["method"]["factoid_sentences"] == 1
    assert _read(run / "answers.jsonl")[0]["answer"] == long  # the source is untouched
    with pytest.raises(SystemExit, match="exists"):
        sentence_cap_copy(run, tmp_path / "copy", 1)
