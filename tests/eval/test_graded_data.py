"""`eval run --data FILE.jsonl`: a user's own graded questions, checked line by line and
evaluated end to end like Wiki-NFQA, whose runs keep their manifest unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import typed_rag.classifier
import typed_rag.engines
import typed_rag.system
from cli.main import main
from eval.data.graded import file_sha256, load_graded
from eval.data.wikinfqa import WikiNFQARecord
from eval.judging.linkage import build_references
from tests.eval.conftest import KeywordClassifier, StandInAnswerer, linkage_responder
from typed_rag.engines.fake import FakeEngine
from typed_rag.errors import UserError


def _refs(*grades: int, tag: str = "") -> list[dict[str, Any]]:
    return [{"grade": g, "text": f"{tag} answer {i} of grade {g}"} for i, g in enumerate(grades)]


ROWS: list[dict[str, Any]] = [
    {
        "id": "q1",
        "question": "why do cats purr",
        "subset": "pets",
        "type": "reason",
        "references": _refs(3, 3, 2, 1, 0, 0, tag="q1"),
    },
    {
        "id": "q2",
        "question": "why do dogs bark at night",
        "subset": "pets",
        "references": _refs(3, 0, tag="q2"),
    },
    {
        "id": "q3",
        "question": "how to repot a cactus",
        "type": "INSTRUCTION",
        "references": _refs(2, 1, 1, tag="q3"),
    },
]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows),
        encoding="utf-8",
    )
    return path


@pytest.fixture
def graded(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "mine.jsonl", ROWS)


def test_lines_become_wikinfqa_records_with_the_same_reference_draw(graded: Path) -> None:
    data = load_graded(graded)
    assert [r.question_id for r in data.records] == ["q1", "q2", "q3"]
    q1, q2, q3 = data.records
    assert (q1.subset, q2.subset, q3.subset) == ("pets", "pets", "custom")
    assert q1.labels == (3, 3, 2, 1, 0, 0) and q1.answers[0] == "q1 answer 0 of grade 3"
    assert q3.line == 3 and q3.gold == ()
    assert data.types == {"q1": "REASON", "q3": "INSTRUCTION"}
    assert data.source()["sha256"] == file_sha256(graded) and len(data.sha256) == 64
    # LINKAGE draws exactly as from the Wiki-NFQA record with these answers and grades
    twin = WikiNFQARecord("nq", "q1", "why do cats purr", q1.answers, q1.labels)
    for seed in (7, 8, 9):
        refs = build_references(q1, seed)
        assert refs == build_references(twin, seed)
        assert [r.label for r in refs] == [3, 2, 1, 0]  # one per grade, best first
    assert [r.label for r in build_references(q3, 7)] == [2, 1]
    labels = data.given_labels()
    assert set(labels) == {"q1", "q3"} and labels["q1"].subset == "pets"
    assert labels["q3"].type == "INSTRUCTION" and labels["q3"].confident


BAD_LINES = [
    ('{"id": "b", "question": "x", "references": [', "not valid JSON"),
    ('["a", "list"]', "not a JSON object"),
    ({"question": "x", "references": _refs(3, 0)}, "missing or empty id"),
    ({"id": "b", "references": _refs(3, 0)}, "missing or empty question"),
    ({"id": "b", "question": "x"}, "missing references"),
    ({"id": "b", "question": "x", "references": []}, "references must be a non-empty list"),
    ({"id": "b", "question": "x", "references": _refs(3, 4)}, "references[1].grade=4"),
    (
        {"id": "b", "question": "x", "references": [{"grade": "3", "text": "a"}]},
        "references[0].grade='3' is not an integer in 0..3",
    ),
    ({"id": "b", "question": "x", "references": _refs(2, 2)}, "only 1 distinct grade(s)"),
    (
        {"id": "b", "question": "x", "references": [*_refs(3), {"grade": 0, "text": " "}]},
        "references[1].text is missing or empty",
    ),
    (
        {"id": "b", "question": "x", "type": "OPINION", "references": _refs(3, 0)},
        "unknown question type 'OPINION'",
    ),
    (
        {"id": "b", "question": "x", "subset": "a|b", "references": _refs(3, 0)},
        "subset='a|b' is not a name",
    ),
    ({"id": "q1", "question": "x", "references": _refs(3, 0)}, "duplicate id (first on line 1)"),
]


@pytest.mark.parametrize(("line", "reason"), BAD_LINES)
def test_a_bad_line_is_named_by_file_line_and_reason(
    tmp_path: Path, line: Any, reason: str
) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [ROWS[0], line, ROWS[2]])
    with pytest.raises(UserError) as err:
        load_graded(path)
    message = str(err.value)
    assert f"{path}:2:" in message and reason in message and "1 bad line(s)" in message
    # skipping keeps the good lines only
    assert [r.question_id for r in load_graded(path, on_error="skip").records] == ["q1", "q3"]


def test_every_bad_line_is_listed_and_subsets_are_checked(tmp_path: Path, graded: Path) -> None:
    path = write_jsonl(tmp_path / "two.jsonl", [ROWS[0], "{", "", "[]"])
    with pytest.raises(UserError, match=r"2 bad line\(s\)") as err:
        load_graded(path)
    assert f"{path}:2: not valid JSON" in str(err.value)
    assert f"{path}:4: not a JSON object" in str(err.value)
    with pytest.raises(UserError, match="not found"):
        load_graded(tmp_path / "absent.jsonl")
    assert [r.question_id for r in load_graded(graded, "custom").records] == ["q3"]
    assert load_graded(graded, "custom").types == {"q3": "INSTRUCTION"}
    with pytest.raises(UserError, match="subset.s. nq not in .*it has: custom, pets"):
        load_graded(graded, "pets,nq")


# ---------------------------------------------------------------------- end to end


class FakeTypedRAG:
    """``TypedRAG.from_settings`` giving a stand-in answerer, kept in ``made``."""

    made: list[StandInAnswerer] = []

    @classmethod
    def from_settings(cls, settings: Any) -> StandInAnswerer:
        cls.made.append(StandInAnswerer())
        return cls.made[-1]


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """A stand-in answerer, a fake LINKAGE judge (typed-rag [[1]], rag [[2]], llm [[3]])
    and the keyword classifier for questions the file gives no type."""
    made: dict[str, list[Any]] = {"answerers": [], "classified": []}

    class CountingClassifier(KeywordClassifier):
        def predict_proba(self, questions: Any) -> list[list[float]]:
            made["classified"].extend(questions)
            return super().predict_proba(questions)

    judge = linkage_responder({"typed-rag": 1, "rag": 2, "llm": 3})
    monkeypatch.setattr(typed_rag.system, "TypedRAG", FakeTypedRAG, raising=False)
    FakeTypedRAG.made = made["answerers"]
    monkeypatch.setattr(typed_rag.engines, "build_engine", lambda s: FakeEngine(judge))
    monkeypatch.setattr(typed_rag.classifier, "build_classifier", lambda s: CountingClassifier())
    return made


def settings_args(tmp_path: Path) -> list[str]:
    return [
        *("--set", f"home={tmp_path / 'home'}"),
        *("--set", "engine.backend=fake"),
        *("--set", f"eval.data_dir={tmp_path / 'no-wiki-nfqa-here'}"),
        *("--set", "eval.judge_protocol=linkage-prob"),  # the scripted verdicts, no gate
    ]


def test_eval_run_on_a_graded_file_then_report_and_compare(
    tmp_path: Path, graded: Path, stand_ins: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    # Wiki-NFQA's stored labels would type q2 DEBATE: a graded file's run must not read them.
    labels = tmp_path / "home" / "eval" / "wikinfqa-labels.json"
    labels.parent.mkdir(parents=True)
    row = {"question_id": "q2", "subset": "nq", "type": "DEBATE"}
    labels.write_text(json.dumps({"labels": [row]}))
    common = settings_args(tmp_path)
    run = [*common, "eval", "run", "--data", str(graded), "--no-progress"]
    a, b = tmp_path / "a", tmp_path / "b"
    assert main([*run, "--out", str(a)]) == 0
    assert stand_ins["classified"] == ["why do dogs bark at night"]  # only q2 has no type
    assert main([*run, "--methods", "rag", "--out", str(b)]) == 0

    manifest = json.loads((a / "run.json").read_text())
    assert manifest["data"] == {"path": str(graded.resolve()), "sha256": file_sha256(graded)}
    assert manifest["fingerprint"]["data"] == {"sha256": file_sha256(graded)}
    assert manifest["subsets"] == ["custom", "pets"]
    scores = [json.loads(x) for x in (a / "scores.jsonl").read_text().splitlines()]
    assert len(scores) == 9
    routed = {r["question_id"]: (r["subset"], r["type"]) for r in scores}
    assert routed == {
        "q1": ("pets", "REASON"),
        "q2": ("pets", "REASON"),
        "q3": ("custom", "INSTRUCTION"),
    }
    assert {r["n"] for r in scores if r["question_id"] == "q1"} == {4}  # one per grade

    capsys.readouterr()
    assert main([*common, "eval", "report", str(a)]) == 0
    md = capsys.readouterr().out
    assert f"# Evaluation on `{graded.name}`" in md and f"sha256 `{file_sha256(graded)}`" in md
    assert "| method | custom | pets | all [95% CI] | n |" in md
    assert "| Typed-RAG | 1.0000 | 1.0000 | 1.0000 [" in md
    # llm is [[3]]: MPR 50 with q1's 4 references, 0 with q2's and q3's 2 (rank n+1)
    assert "| LLM | 0.00 | 25.00 | 16.67 [" in md
    rep = json.loads((a / "report.json").read_text())
    assert rep["subsets"] == ["custom", "pets"] and rep["data"]["path"] == str(graded.resolve())

    assert main(["eval", "compare", f"{a}:rag", f"{b}:rag"]) == 0
    assert "3 paired questions" in capsys.readouterr().out
    assert main(["eval", "compare", f"{a}:typed-rag", f"{a}:rag"]) == 0  # as the docs show
    assert "+0.500" in capsys.readouterr().out  # [[1]] against [[2]] on every question

    # another file's references: resuming into the run is refused, as comparing with it is
    other = write_jsonl(tmp_path / "other.jsonl", ROWS[:2])
    assert main([*common, "eval", "run", "--data", str(other), "--out", str(a)]) == 2
    assert "data.sha256" in capsys.readouterr().err
    c = tmp_path / "c"
    assert main([*common, "eval", "run", "--data", str(other), "--out", str(c)]) == 0
    capsys.readouterr()
    assert main(["eval", "compare", f"{a}:rag", f"{c}:rag"]) == 2
    assert "data:" in capsys.readouterr().err


def test_a_bad_file_is_exit_2_with_the_line_and_no_traceback(
    tmp_path: Path, stand_ins: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write_jsonl(
        tmp_path / "bad.jsonl", [ROWS[0], {"id": "x", "question": "y", "references": _refs(3, 5)}]
    )
    run = [*settings_args(tmp_path), "eval", "run", "--out", str(tmp_path / "r")]
    assert main([*run, "--data", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2: id 'x': references[1].grade=5 is not an integer in 0..3" in err
    assert "Traceback" not in err and not (tmp_path / "r" / "run.json").exists()
    assert main([*run, "--data", str(bad), "--data-dir", str(tmp_path)]) == 2
    assert "give one" in capsys.readouterr().err
    # labels of a graded file never overwrite Wiki-NFQA's default labels file
    assert main([*settings_args(tmp_path), "eval", "label", "--data", str(bad)]) == 2
    assert "needs --out FILE" in capsys.readouterr().err


def test_a_wikinfqa_run_manifest_has_no_data_entry(
    tmp_path: Path, nfqa_dir: Path, stand_ins: dict
) -> None:
    args = [*settings_args(tmp_path), "--set", f"eval.data_dir={nfqa_dir}"]
    run_dir = tmp_path / "wiki"
    cmd = ["eval", "run", "--subsets", "nq", "--methods", "rag", "--no-progress"]
    assert main([*args, *cmd, "--out", str(run_dir)]) == 0
    manifest = json.loads((run_dir / "run.json").read_text())
    assert "data" not in manifest and "data" not in manifest["fingerprint"]
    assert manifest["subsets"] == ["nq"]
    assert "data" not in json.loads((run_dir / "report.json").read_text())
    assert (run_dir / "report.md").read_text().startswith("# Wiki-NFQA evaluation")


def test_judge_validity_takes_a_graded_file(
    tmp_path: Path, graded: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The judges on the fake engine; q1 alone has answers beyond its references (a spare
    grade 3 and grade 0), which judge validity needs."""
    monkeypatch.setattr(typed_rag.classifier, "build_classifier", lambda s: KeywordClassifier())
    monkeypatch.setattr(typed_rag.system, "TypedRAG", FakeTypedRAG, raising=False)
    common = settings_args(tmp_path)
    out = tmp_path / "judge"
    args = ["eval", "judge-validity", "--data", str(graded), "--out", str(out), "--no-progress"]
    assert main([*common, *args, "--questions", "3", "--pool", "2"]) == 0
    (row,) = json.loads((out / "summary.json").read_text())
    assert row["protocol"] == "linkage-prob" and row["n"] == 1
    judged = [json.loads(x)["key"] for x in (out / "judgements.jsonl").open()]
    assert {k.split("/")[0] for k in judged} == {"q1"}
    assert {"q1/graded/3", "q1/graded/0"} <= set(judged)
    # and a graded file without spare answers says why
    few = write_jsonl(tmp_path / "few.jsonl", ROWS[1:])
    assert main([*common, *args[:3], str(few), "--out", str(tmp_path / "j2")]) == 2
    assert "needs a spare grade-3 answer" in capsys.readouterr().err


def test_coverage_of_a_graded_run_finds_its_file(
    tmp_path: Path, graded: Path, monkeypatch: pytest.MonkeyPatch, stand_ins: dict
) -> None:
    common = settings_args(tmp_path)
    run_dir = tmp_path / "run"
    run = ["eval", "run", "--data", str(graded), "--methods", "llm", "--no-progress"]
    assert main([*common, *run, "--out", str(run_dir)]) == 0
    monkeypatch.setattr(typed_rag.engines, "build_engine", lambda s: FakeEngine(_coverage_judge))
    cov = tmp_path / "coverage"
    cmd = ["eval", "coverage", str(run_dir), "--methods", "llm", "--answers-only"]
    assert main([*common, *cmd, "--out", str(cov), "--no-progress"]) == 0
    assert json.loads((cov / "summary.json").read_text())["questions"] == 3


def _coverage_judge(req: Any) -> str:
    title = (req.json_schema or {}).get("title")
    if title == "sub_question_list":
        return '{"sub_questions": ["Why?"]}'
    if title == "sub_question_labels":
        return '{"labels": [{"id": 1, "type": "core"}]}'
    return '{"fragment": "None"}'


def test_an_unanswerable_question_needs_no_references_and_is_answered_not_ranked(
    tmp_path: Path, stand_ins: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = {"id": "u1", "question": "how do I start a proof session", "answerable": False}
    data = write_jsonl(tmp_path / "mine.jsonl", [*ROWS, outside])
    common = settings_args(tmp_path)
    out = tmp_path / "run"
    argv = [*common, "eval", "run", "--data", str(data), "--methods", "rag", "--out", str(out)]
    assert main([*argv, "--no-progress"]) == 0
    answered = {
        json.loads(x)["question_id"] for x in (out / "answers.jsonl").read_text().splitlines()
    }
    scored = {json.loads(x)["question_id"] for x in (out / "scores.jsonl").read_text().splitlines()}
    assert answered == {"q1", "q2", "q3", "u1"} and scored == {"q1", "q2", "q3"}
    assert main([*common, "eval", "report", str(out)]) == 0
    # eval grounding measures several runs together, but a question once per method
    twice = [*common, "eval", "grounding", str(out), str(out), "--data", str(data)]
    assert main([*twice, "--when", "after", "--methods", "rag", "--judges", "none"]) == 2
    assert "answer some question twice" in capsys.readouterr().err
    # an answerable question still needs its references
    bad = write_jsonl(tmp_path / "bad.jsonl", [{**outside, "answerable": True}])
    assert main([*common, "eval", "run", "--data", str(bad), "--out", str(tmp_path / "b")]) == 2
