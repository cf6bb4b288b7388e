"""``typed-rag qtree build`` from the command line: which questions it takes and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cli.lab.qtree
from cli.main import main
from eval.store import read_jsonl
from tests.qtree.helpers import hashed_score, qtree_responder, rule_following_outlines
from typed_rag.engines.fake import FakeEngine

CONDITIONED = {
    "question_id": "given_1", "subset": "nq", "type": "REASON",
    "question": "why do cats purr", "include": ["health"], "exclude": ["history"],
    "conditioned_question": "why do cats purr? Cover health, not history.",
    "template": "focus-not",
}  # fmt: skip


@pytest.fixture
def engines_made(monkeypatch: pytest.MonkeyPatch) -> list[FakeEngine]:
    made: list[FakeEngine] = []

    def build(_settings: object) -> FakeEngine:
        e = FakeEngine(qtree_responder(outlines=rule_following_outlines), chooser=hashed_score)
        made.append(e)
        return e

    monkeypatch.setattr(cli.lab.qtree.engines, "build_engine", build)
    return made


def test_build_takes_the_conditioned_set_first_then_wiki_nfqa(
    tmp_path: Path, nfqa_dir: Path, engines_made: list[FakeEngine], capsys: pytest.CaptureFixture
) -> None:
    set_file = tmp_path / "set.jsonl"
    set_file.write_text(json.dumps(CONDITIONED) + "\n")
    out = tmp_path / "qtree"
    argv = ["--set", f"eval.data_dir={nfqa_dir}", "qtree", "build", "--out", str(out)]
    assert (
        main(
            [
                *argv,
                "--first",
                "2",
                "--subsets",
                "nq,squad",
                "--conditioned",
                str(set_file),
                "--chunk",
                "1",
            ]
        )
        == 0
    )
    records = read_jsonl(out / "qtree.jsonl")
    assert [r["status"] for r in records] == ["ok"] * 3
    assert records[0]["question_id"] == "given_1"
    assert records[0]["conditioned_question"] == CONDITIONED["conditioned_question"]
    assert records[0]["intent"] is None  # its coverage request was given, not generated
    assert all(r["intent"] in ("include", "exclude") for r in records[1:])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 3 and summary["intents"]["given"] == 1
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--chunk", "0"], "--chunk must be at least 1"),
        (["--first", "0"], "no questions"),
        (["--first", "0", "--conditioned", "missing.jsonl"], "constraint set not found"),
    ],
)
def test_bad_build_arguments_are_one_clear_line(
    tmp_path: Path,
    engines_made: list[FakeEngine],
    capsys: pytest.CaptureFixture,
    extra: list[str],
    named: str,
) -> None:
    assert main(["qtree", "build", "--out", str(tmp_path / "q"), *extra]) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err
    assert engines_made == []
