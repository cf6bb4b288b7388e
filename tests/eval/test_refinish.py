"""``eval refinish`` and ``eval splice --changed``: stored answers re-finished by the
scaffolding guard, the leak share before and after, the changed answers' verdicts left to
judge, and the run moved to them with the rows it replaced set aside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.runs.refinish import LEAK, leak_shares, refinish, splice_changed
from typed_rag.errors import UserError

LEAKY = "According to the references provided, salt lost its market after 1812 [1]."
CLEAN = "Salt lost its market after 1812 [1]."
# An older line escapes non-ASCII; a rewrite must keep it as written.
UNTOUCHED = (
    '{"method": "rag", "question_id": "q2", "answer": "Vicu\\u00f1a won [2].", "result": {}}'
)


def _row(method: str, qid: str, answer: str) -> dict:
    passages = [{"citation": 1, "id": "p1", "title": "Salt", "text": "", "score": 1.0}]
    return {
        "method": method,
        "question_id": qid,
        "answer": answer,
        "result": {"answer": answer, "passages": passages, "citations": [1]},
    }


def _score(method: str, qid: str, rank: int) -> dict:
    return {"method": method, "question_id": qid, "rank": rank, "n": 3, "status": "ok"}


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"fingerprint": {"seed": 42}, "methods": ["rag"]}))
    _write(
        run / "answers.jsonl",
        [
            json.dumps(_row("typed-rag", "q1", LEAKY)),
            UNTOUCHED,
            json.dumps(_row("llm", "q1", LEAKY)),
        ],
    )
    _write(
        run / "scores.jsonl",
        [
            json.dumps(_score(m, q, 2))
            for m, q in (("typed-rag", "q1"), ("rag", "q2"), ("llm", "q1"))
        ],
    )
    return run


def test_leak_shares_count_by_the_pattern() -> None:
    rows = [
        _row("rag", "a", LEAKY),
        _row("rag", "b", CLEAN),
        _row("rag", "c", "Response 2 says so."),
    ]
    assert leak_shares(rows, ["rag"])["rag"] == {"answers": 3, "leaking": 2, "share": 2 / 3}
    assert not LEAK.search(CLEAN)


def test_refinish_guards_the_chosen_methods_and_leaves_their_verdicts_to_judge(
    run_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "copy"
    report = refinish(run_dir, out, ["rag", "typed-rag"])
    assert report["before"]["typed-rag"]["leaking"] == 1
    assert report["after"]["typed-rag"]["leaking"] == 0
    assert [(c["method"], c["question_id"]) for c in report["changed"]] == [("typed-rag", "q1")]
    lines = (out / "answers.jsonl").read_text(encoding="utf-8").splitlines()
    guarded = json.loads(lines[0])
    assert guarded["answer"] == CLEAN == guarded["result"]["answer"]
    assert guarded["result"]["unscaffolded"] and guarded["result"]["citations"] == [1]
    assert lines[1] == UNTOUCHED  # byte for byte
    assert json.loads(lines[2])["answer"] == LEAKY  # llm was not asked for
    scored = [json.loads(s) for s in (out / "scores.jsonl").read_text().splitlines()]
    assert [(s["method"], s["question_id"]) for s in scored] == [("rag", "q2"), ("llm", "q1")]
    assert json.loads((out / "run.json").read_text())["refinished_from"] == str(run_dir)
    with pytest.raises(UserError, match="exists"):
        refinish(run_dir, out, ["rag"])


def test_passages_stored_without_their_text_are_looked_up(run_dir: Path, tmp_path: Path) -> None:
    """A run made with eval.store_passage_text off (the headline) keeps passage ids only: the
    texts come from the index, once, and the copy stores the passages as the run did."""
    row = _row("typed-rag", "q1", LEAKY)
    del row["result"]["passages"][0]["text"]
    _write(run_dir / "answers.jsonl", [json.dumps(row)])
    with pytest.raises(UserError, match="stored without their text"):
        refinish(run_dir, tmp_path / "bare", ["typed-rag"])
    asked: list[list[str]] = []

    def lookup(ids: list[str]) -> dict[str, tuple[str, str]]:
        asked.append(list(ids))
        return {"p1": ("Salt", "Salt lost its market after 1812.")}

    report = refinish(run_dir, tmp_path / "copy", ["typed-rag"], lookup)
    assert asked == [["p1"]] and len(report["changed"]) == 1
    (guarded,) = [json.loads(x) for x in (tmp_path / "copy" / "answers.jsonl").open()]
    assert guarded["answer"] == CLEAN
    assert "text" not in guarded["result"]["passages"][0]


def test_splice_changed_needs_every_changed_answer_judged(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "copy"
    refinish(run_dir, out, ["typed-rag"])
    with pytest.raises(UserError, match="no verdict"):
        splice_changed(run_dir, out, ["typed-rag"], "scaffolding guard")
    with (out / "scores.jsonl").open("a") as f:
        f.write(json.dumps(_score("typed-rag", "q1", 1)) + "\n")
    before = (run_dir / "answers.jsonl").read_text().splitlines()
    record = splice_changed(run_dir, out, ["typed-rag"], "scaffolding guard")
    assert record["answers_taken"] == 1 and record["reason"] == "scaffolding guard"
    after = (run_dir / "answers.jsonl").read_text().splitlines()
    assert json.loads(after[0])["answer"] == CLEAN and after[1:] == before[1:]
    scores = [json.loads(s) for s in (run_dir / "scores.jsonl").read_text().splitlines()]
    assert scores[0]["rank"] == 1 and [s["rank"] for s in scores[1:]] == [2, 2]
    aside = run_dir / record["rows_before"]
    assert aside == run_dir / "spliced" / "1"
    assert json.loads((aside / "answers.jsonl").read_text())["answer"] == LEAKY
    assert json.loads((aside / "scores.jsonl").read_text())["rank"] == 2
    assert json.loads((run_dir / "run.json").read_text())["splices"][-1]["from"] == str(out)
    with pytest.raises(UserError, match="differs"):
        splice_changed(run_dir, out, ["typed-rag"], "again")


def test_splice_changed_refuses_a_copy_made_with_other_settings(
    run_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "copy"
    refinish(run_dir, out, ["typed-rag"])
    (out / "run.json").write_text(json.dumps({"fingerprint": {"seed": 43}}))
    with pytest.raises(UserError, match="other settings"):
        splice_changed(run_dir, out, ["typed-rag"], "scaffolding guard")
