"""`typed-rag eval label|run|report` end to end with stand-ins; the report's tables and PNG."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import eval.judging.resample as resample
import eval.reports.report as report_module
import typed_rag.classifier
import typed_rag.engines
import typed_rag.system
from cli.main import main
from eval.reports.report import build_report, write_report
from eval.settings import load_lab_settings
from tests.eval.conftest import KeywordClassifier, StandInAnswerer, linkage_responder
from typed_rag.engines.fake import FakeEngine

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def judge(req):
    """LINKAGE verdicts by method, plus coverage JSON for schema requests."""
    from tests.eval.test_coverage import judge_responder

    if req.json_schema is not None:
        return judge_responder(req)
    return linkage_responder({"typed-rag": 1, "rag": 2, "llm": 3})(req)


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch) -> dict:
    made: dict = {"answerers": [], "engines": [], "engine_settings": []}

    class FakeTypedRAG:
        @classmethod
        def from_settings(cls, settings):
            a = StandInAnswerer(empty_for="bake bread")
            made["answerers"].append(a)
            return a

    def build_engine(settings):
        made["engine_settings"].append(settings)
        e = FakeEngine(judge)
        made["engines"].append(e)
        return e

    monkeypatch.setattr(typed_rag.system, "TypedRAG", FakeTypedRAG, raising=False)
    monkeypatch.setattr(typed_rag.engines, "build_engine", build_engine, raising=False)
    monkeypatch.setattr(
        typed_rag.classifier, "build_classifier", lambda s: KeywordClassifier(), raising=False
    )
    return made


def base_args(tmp_path: Path, nfqa_dir: Path) -> list[str]:
    return [
        "--set",
        f"home={tmp_path / 'home'}",
        "--set",
        "engine.backend=fake",
        "--set",
        f"eval.data_dir={nfqa_dir}",
    ]


def test_label_command_prints_distribution(
    tmp_path: Path, nfqa_dir: Path, stand_ins: dict, capsys: pytest.CaptureFixture
) -> None:
    rc = main([*base_args(tmp_path, nfqa_dir), "eval", "label", "--subsets", "nq,squad"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "| REASON | 3 |" in out and "| paper |" in out.splitlines()[0].replace("paper %", "")
    assert (tmp_path / "home" / "eval" / "wikinfqa-labels.json").is_file()


def test_run_then_report(
    tmp_path: Path, nfqa_dir: Path, stand_ins: dict, capsys: pytest.CaptureFixture
) -> None:
    run_dir = tmp_path / "run"
    args = [
        *base_args(tmp_path, nfqa_dir),
        "--set",
        "eval.judge_protocol=linkage-prob",  # the scripted verdicts, without the relevance gate
        "eval",
        "run",
        "--subsets",
        "nq,squad",
        "--methods",
        "llm,rag,typed-rag",
        "--out",
        str(run_dir),
        "--scorer-model",
        "judge-model",
        "--coverage",
        "--no-progress",
    ]
    assert main(args) == 0
    # the scorer got its own settings; the generator kept the fake backend's default model
    (scorer_settings,) = stand_ins["engine_settings"]
    assert scorer_settings.engine.model == "judge-model"
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["scorer"]["name"] == "fake:judge-model"
    assert manifest["generator"]["backend"] == "fake"
    assert manifest["git"]["commit"] is None or len(manifest["git"]["commit"]) == 40
    assert (run_dir / "labels.json").is_file()

    md = (run_dir / "report.md").read_text()
    assert "Scorer: `fake:judge-model`" in md
    assert "- Judge: protocol `linkage-prob`, temperature 0.0; reads each answer as written" in md
    assert "| method | NQ | SQuAD | all [95% CI] | n |" in md
    # typed-rag is always [[1]] except the empty answer (nq_1, 2 references -> rank 3):
    # NQ MRR (4 + 1/3) / 5, MPR (4 x 100 + 0) / 5; SQuAD all rank 1.
    assert "| Typed-RAG | 0.8667 | 1.0000 | 0.9259 [" in md
    assert "| Typed-RAG | 80.00 | 100.00 | 88.89 [" in md
    assert "| LLM | 0.3333 | 0.3333 | 0.3333 [0.3333, 0.3333] | 9 |" in md
    assert "| Reason | 3 |" in md
    assert "![MPR by type](mpr_by_type.png)" in md
    assert "## Sub-question coverage" in md
    png = run_dir / "mpr_by_type.png"
    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 5000

    rep = json.loads((run_dir / "report.json").read_text())
    # the stand-in gave an empty answer to "how to bake bread": ranked last without asking
    assert rep["failures"]["rag"]["empty_candidates"] == 1
    rag_all = rep["table"]["rag"]["all"]["mpr"]
    # rag: 8 answers at [[2]] and 1 empty answer at n+1 (nq_1 has 2 references -> rank 3)
    n2 = [json.loads(x) for x in (run_dir / "scores.jsonl").read_text().splitlines()]
    rag_rows = [r for r in n2 if r["method"] == "rag"]
    expected = sum((1 - (r["rank"] - 1) / r["n"]) * 100 for r in rag_rows) / 9
    assert rag_all["mean"] == pytest.approx(expected)
    cov = rep["coverage"]["rag"]
    assert cov["ok"] == 9 and cov["context"]["mean"] == pytest.approx(0.5)
    assert rep["coverage"]["llm"]["context"]["count"] == 0  # no passages in llm mode
    assert rep["cost"]["llm"]["prompt_tokens"] == 900 and rep["cost"]["llm"]["questions"] == 9

    capsys.readouterr()
    assert main([*base_args(tmp_path, nfqa_dir), "eval", "report", str(run_dir)]) == 0
    assert "Typed-RAG" in capsys.readouterr().out

    # resuming with another scorer would mix incomparable scores: refused, exit 2
    args[args.index("judge-model")] = "other-judge"
    assert main(args) == 2
    assert "different settings" in capsys.readouterr().err


def test_off_by_one_run_and_unparsed_policy(
    tmp_path: Path, nfqa_dir: Path, stand_ins: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a scorer that answers n+1 for everything: out of range in the paper's variant
    def build_engine(settings):
        def respond(req):
            return "[[5]]" if "four references" in req.messages[-1]["content"] else "[[2]]"

        return FakeEngine(respond)

    monkeypatch.setattr(typed_rag.engines, "build_engine", build_engine)
    monkeypatch.setattr(resample, "MAX_RESAMPLES", 1)
    run_dir = tmp_path / "obo"
    args = [
        *base_args(tmp_path, nfqa_dir),
        "--set",
        "eval.judge_protocol=linkage",
        "eval",
        "run",
        "--subsets",
        "nq",
        "--methods",
        "rag",
        "--out",
        str(run_dir),
        "--paper-off-by-one",
        "--no-progress",
    ]
    assert main(args) == 0
    rows = [json.loads(x) for x in (run_dir / "scores.jsonl").read_text().splitlines()]
    four = [r for r in rows if r["n"] == 4 and r["status"] != "empty-candidate"]
    assert four and all(r["rank"] is None and r["attempts"] == 2 for r in four)
    md = (run_dir / "report.md").read_text()
    assert "paper prompt ([[n]] = worse than all" in md
    s = load_lab_settings(None)  # an unparsed verdict is excluded and counted
    assert build_report(run_dir, s)["failures"]["rag"]["never_parsed"] == len(four)
    excl = build_report(run_dir, s)["table"]["rag"]["all"]["mpr"]["count"]
    monkeypatch.setattr(report_module, "UNPARSED", "worst")
    worst = build_report(run_dir, s)
    assert worst["table"]["rag"]["all"]["mpr"]["count"] == excl + len(four)


def test_cli_errors_are_clear(
    tmp_path: Path, nfqa_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main([*base_args(tmp_path, nfqa_dir), "eval", "report", str(tmp_path / "nothing")]) == 2
    assert "not a run directory" in capsys.readouterr().err
    args = [
        *base_args(tmp_path, nfqa_dir),
        "eval",
        "run",
        "--out",
        str(tmp_path / "r"),
        "--methods",
        "hyde",
    ]
    assert main(args) == 2
    assert "unknown method" in capsys.readouterr().err
    args = [
        *base_args(tmp_path, nfqa_dir),
        "eval",
        "run",
        "--out",
        str(tmp_path / "r"),
        "--scorer-backend",
        "gpt5",
    ]
    assert main(args) == 2
    assert "invalid scorer setting backend" in capsys.readouterr().err
    # The default judge reads token probabilities: a scorer that cannot give them is refused.
    args[args.index("gpt5")] = "openai"
    assert main(args) == 2
    assert "reads token probabilities" in capsys.readouterr().err


def test_report_of_a_run_in_progress_is_strict_json(tmp_path: Path, nfqa_dir: Path) -> None:
    """Answers stored, nothing scored yet: the report still renders, with nulls not NaN."""
    from eval.runs.manifest import write_manifest
    from eval.store import JsonlStore

    settings = load_lab_settings(None)
    run_dir = tmp_path / "live"
    write_manifest(
        run_dir,
        settings,
        settings,
        methods=["rag"],
        subsets=["nq"],
        question_ids=["nq_0"],
        options={},
    )
    JsonlStore(run_dir / "answers.jsonl").append(
        [{"method": "rag", "question_id": "nq_0", "subset": "nq", "answer": "x", "wall_s": 2.0}]
    )
    files = write_report(run_dir, settings)

    def no_nan(value: str) -> None:
        raise AssertionError(f"non-strict JSON constant {value}")

    rep = json.loads(files.json.read_text(), parse_constant=no_nan)
    assert rep["table"]["rag"]["all"]["mrr"]["mean"] is None
    assert rep["cost"]["rag"]["questions_per_min"] == pytest.approx(30.0)
    assert files.figure is None
    assert "| RAG | - | 0 |" in files.markdown.read_text()


def test_scorer_settings_come_from_their_own_toml(tmp_path: Path) -> None:
    import argparse

    from cli.lab.eval_shared import scorer_settings_for

    toml = tmp_path / "scorer.toml"
    toml.write_text(
        '[engine]\nbackend = "openai"\nmodel = "judge"\nbase_url = "http://h/v1"\n'
        "[sampling]\ntemperature = 0.0\n"
    )
    generator = load_lab_settings(None, **{"engine.backend": "fake"})
    ns = argparse.Namespace(
        scorer_config=toml, scorer_backend=None, scorer_model="judge-2", scorer_base_url=None
    )
    scorer = scorer_settings_for(generator, ns)
    assert (scorer.engine.backend, scorer.engine.model) == ("openai", "judge-2")
    assert scorer.sampling.temperature == 0.0
    assert generator.engine.backend == "fake"  # the generator's settings are untouched


def test_eval_run_stored_only_judges_the_stored_answers_and_answers_nothing(
    tmp_path: Path, nfqa_dir: Path, stand_ins: dict, capsys
) -> None:
    """A replayed run (some answers copied in, none judged) is judged without answering the
    selected questions it lacks; with nothing stored, it says so instead of answering."""
    first, replay = tmp_path / "first", tmp_path / "replay"
    run = [*base_args(tmp_path, nfqa_dir), "eval", "run", "--subsets", "nq", "--no-progress"]
    assert main([*run, "--methods", "rag", "--out", str(first)]) == 0
    rows = [json.loads(line) for line in (first / "answers.jsonl").read_text().splitlines()]
    replay.mkdir()
    (replay / "answers.jsonl").write_text(json.dumps(rows[0]) + "\n")

    assert main([*run, "--methods", "rag", "--out", str(replay), "--stored-only"]) == 0
    answers = (replay / "answers.jsonl").read_text().splitlines()
    scores = (replay / "scores.jsonl").read_text().splitlines()
    assert len(answers) == 1 and len(rows) > 1  # the rest of the selection was not answered
    assert [json.loads(s)["question_id"] for s in scores] == [rows[0]["question_id"]]

    assert main([*run, "--methods", "llm", "--out", str(replay), "--stored-only"]) == 2
    assert "--stored-only" in capsys.readouterr().err


def test_eval_context_judges_a_run_on_disk(
    tmp_path: Path, nfqa_dir: Path, stand_ins: dict, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """`eval context` reads the run's shown passages and answers, grades them with the
    judge engine, writes summary.json / report.md, and a rerun judges nothing again."""
    run_dir = tmp_path / "run"
    common = [*base_args(tmp_path, nfqa_dir), "--set", "eval.judge_protocol=linkage-prob"]
    run = ["eval", "run", "--subsets", "nq", "--methods", "llm,rag", "--no-progress"]
    assert main([*common, *run, "--out", str(run_dir)]) == 0

    engines: list[FakeEngine] = []

    def crux_engine(settings):
        engine = FakeEngine(
            lambda req: '{"questions": ["Why does chlorophyll break down?", "Who is Bob?"]}',
            chooser=lambda req: (
                {"4": 1.0}
                if "Chlorophyll" in req.messages[-1]["content"]
                and "chlorophyll" in req.messages[-1]["content"].split("Question: ")[-1]
                else {"0": 1.0}
            ),
        )
        engines.append(engine)
        return engine

    monkeypatch.setattr(typed_rag.engines, "build_engine", crux_engine, raising=False)
    out = tmp_path / "context"
    args = [*common, "eval", "context", str(run_dir), "--methods", "llm,rag", "--out", str(out)]
    assert main([*args, "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["questions"] == 5 and summary["judge"].startswith("fake")
    assert summary["configs"]["rag"]["coverage"]["mean"] == 1.0  # the shown passage answers
    assert summary["configs"]["llm"]["coverage"]["mean"] == 0.0  # an empty context answers nothing
    assert (out / "report.md").read_text().startswith("# CRUX context evaluation (5 questions")
    assert engines[0].choice_calls
    assert main([*args, "--no-progress"]) == 0
    assert engines[1].choice_calls == [] and engines[1].calls == []  # all cached


def test_eval_coverage_judges_arms_of_other_runs_beside_the_run(
    tmp_path: Path, nfqa_dir: Path, stand_ins: dict, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """`eval coverage RUN --also NAME=RUN2:METHOD` judges the other run's answers as method
    NAME on the questions both runs answered, so arms compare by win rate in one summary."""
    common = base_args(tmp_path, nfqa_dir)
    run = ["eval", "run", "--subsets", "nq", "--no-progress"]
    assert main([*common, *run, "--methods", "llm,rag", "--out", str(tmp_path / "a")]) == 0
    assert main([*common, *run, "--methods", "rag", "--out", str(tmp_path / "b")]) == 0

    def judge(req):
        title = (req.json_schema or {}).get("title")
        if title == "sub_question_list":
            return '{"sub_questions": ["Why does chlorophyll break down?", "Who is Bob?"]}'
        if title == "sub_question_labels":
            return '{"labels": [{"id": 1, "type": "core"}, {"id": 2, "type": "follow_up"}]}'
        return '{"fragment": "None"}'

    def chooser(req):
        text = req.messages[-1]["content"]
        return (
            {"yes": 0.9, "no": 0.1} if "hlorophyll" in text.split("Question:")[0] else {"no": 1.0}
        )

    monkeypatch.setattr(
        typed_rag.engines, "build_engine", lambda s: FakeEngine(judge, chooser=chooser)
    )
    out = tmp_path / "coverage"
    args = [*common, "eval", "coverage", str(tmp_path / "a"), "--methods", "rag", "--out", str(out)]
    assert main([*args, "--also", f"arm-b={tmp_path / 'b'}:rag", "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["methods"] == ["rag", "arm-b"] and summary["questions"] == 5
    assert {(w["a"], w["b"]) for w in summary["win_rates"]["overall"]} == {("rag", "arm-b")}
    assert summary["metrics"]["arm-b"]["overall"]["n"] == 5
    assert summary["metrics"]["rag"]["overall"]["metric2"] is not None  # chunks judged

    quick = tmp_path / "answers-only"
    also = ["--also", f"arm-b={tmp_path / 'b'}:rag", "--answers-only", "--no-progress"]
    assert main([*args[:-1], str(quick), *also]) == 0
    summary = json.loads((quick / "summary.json").read_text())
    assert summary["metrics"]["rag"]["overall"]["metric2"] is None  # no chunk judged
    assert summary["judgements"]["fragments"] == 0 and summary["questions"] == 5
    assert summary["metrics"]["rag"]["overall"]["rating"] is not None

    capsys.readouterr()
    assert main([*args, "--also", f"rag={tmp_path / 'b'}:rag"]) == 2
    assert "already a method" in capsys.readouterr().err
    assert main([*args, "--also", f"x={tmp_path / 'nowhere'}:rag"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main([*args, "--also", "x-without-a-method"]) == 2
    assert "NAME=RUN_DIR:METHOD" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("judge", "reads"),
    [
        ({"citations": "strip"}, "without its `[n]` markers"),
        ({"citations": "strip", "source_talk": "strip"}, "without its `[n]` markers and vouching"),
        ({"source_talk": "strip"}, "without its vouching sentences"),
    ],
)
def test_the_report_says_what_the_judge_read(judge: dict, reads: str) -> None:
    from eval.reports.markdown import judge_line

    line = judge_line({"protocol": "linkage-prob-gated", "temperature": 0.0, **judge})
    assert line.startswith("- Judge: protocol `linkage-prob-gated`") and reads in line
