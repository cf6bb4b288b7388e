"""Citation support (eval/citation_support.py, `typed-rag eval support`) on the scripted FakeEngine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import typed_rag.engines
from cli.main import main
from eval.citation_support import (
    SupportRun,
    common_rows,
    evaluate_support,
    ratio_estimate,
    sentences_of,
    statement_of,
)
from typed_rag.engines.base import ChoiceRequest
from typed_rag.engines.fake import FakeEngine

PASSAGES = {
    "p-leaf": ("Autumn", "Leaves change color because chlorophyll breaks down in autumn."),
    "p-rome": ("Rome", "The western Roman empire fell in 476 to invaders."),
    "p-bread": ("Bread", "Bread is baked from flour, water and yeast."),
}


def passage(n: int, pid: str, text: bool = False) -> dict[str, Any]:
    p: dict[str, Any] = {"citation": n, "id": pid, "title": PASSAGES[pid][0]}
    if text:
        p["text"] = PASSAGES[pid][1]
    return p


def row(method: str, qid: str, answer: str, passages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "method": method,
        "question_id": qid,
        "type": "REASON",
        "subset": "nq",
        "question": f"question {qid}",
        "answer": answer,
        "result": {"answer": answer, "passages": passages},
    }


def chooser(req: ChoiceRequest) -> dict[str, float]:
    """Supported when the statement's first word (lower-cased) is in the passage."""
    assert req.prefix == "[[" and req.choices == ("yes", "no")
    text = req.messages[-1]["content"]
    passage_text, statement = text.split("Passage:\n")[1].split("\n\nStatement: ")
    word = statement.split()[0].lower()
    return {"yes": 0.8, "no": 0.2} if word in passage_text.lower() else {"yes": 0.1, "no": 0.9}


def lookup(ids: Any) -> dict[str, tuple[str, str]]:
    return {pid: PASSAGES[pid] for pid in ids if pid in PASSAGES}


# --------------------------------------------------------------------------- splitting


def test_statement_drops_citations_list_markers_and_markup() -> None:
    assert statement_of("1. **Chlorophyll** breaks down [1, 2].") == "Chlorophyll breaks down."
    assert statement_of("- It fell [3]") == "It fell"


def test_sentences_split_into_shown_and_unshown_citations() -> None:
    answer = (
        "Chlorophyll breaks down in autumn [1]. Nobody knows why.\n"
        "1. Rome fell [2] [7].\n"
        "[1]"  # a bare citation line joins the sentence before it
    )
    r = row("typed-rag", "q1", answer, [passage(1, "p-leaf"), passage(2, "p-rome")])
    got = sentences_of(r)
    assert [s.statement for s in got] == ["Chlorophyll breaks down in autumn.", "Rome fell."]
    assert got[0].shown == {1: "p-leaf"} and got[0].unshown == []
    assert got[1].shown == {2: "p-rome", 1: "p-leaf"} and got[1].unshown == [7]


def test_common_rows_keep_questions_every_method_answered_in_run_order() -> None:
    rows = [row("rag", q, "a", []) for q in ("q1", "q2", "q3")] + [
        row("typed-rag", q, "a", []) for q in ("q3", "q1")
    ]
    got = common_rows(rows, ["rag", "typed-rag"], order=["q3", "q2", "q1"])
    assert [(r["question_id"], r["method"]) for r in got] == [
        ("q3", "rag"),
        ("q3", "typed-rag"),
        ("q1", "rag"),
        ("q1", "typed-rag"),
    ]
    assert len(common_rows(rows, ["rag", "typed-rag"], limit=1)) == 2


# --------------------------------------------------------------------------- judging


async def test_unshown_citations_are_unsupported_without_asking(tmp_path: Path) -> None:
    engine = FakeEngine(chooser=chooser)
    answers = [row("rag", "q1", "Rome fell in 476 [4].", [passage(1, "p-rome", text=True)])]
    summary = await evaluate_support(engine, answers, tmp_path, model="fake", methods=["rag"])
    assert engine.choice_calls == []
    s = summary["methods"]["rag"]
    assert s["sentences"] == 1 and s["supported"] == 0 and s["sentences_citing_unshown"] == 1
    (line,) = (tmp_path / "support.jsonl").read_text().splitlines()
    assert json.loads(line)["supported"] is False and json.loads(line)["unshown"] == [4]


async def test_a_sentence_is_supported_by_any_of_its_shown_citations(tmp_path: Path) -> None:
    engine = FakeEngine(chooser=chooser)
    answer = "Rome fell to invaders [1][2]. Bread rises [1]."
    answers = [row("rag", "q1", answer, [passage(1, "p-leaf"), passage(2, "p-rome")])]
    summary = await evaluate_support(
        engine, answers, tmp_path, model="fake", methods=["rag"], lookup=lookup
    )
    assert len(engine.choice_calls) == 3  # (Rome, leaf), (Rome, rome), (Bread, leaf)
    # The passage comes before the statement, and the citation is not part of the claim.
    content = engine.choice_calls[0].messages[-1]["content"]
    assert content.index("Passage:") < content.index("Statement:") and "[1]" not in content
    s = summary["methods"]["rag"]
    assert (s["sentences"], s["supported"]) == (2, 1) and s["share"]["mean"] == 0.5


async def test_a_second_run_asks_nothing_and_a_killed_run_resumes(tmp_path: Path) -> None:
    answers = [
        row("rag", "q1", "Rome fell [1]. Bread rises [1].", [passage(1, "p-rome")]),
        row("rag", "q2", "Bread is baked [1].", [passage(1, "p-bread")]),
    ]
    first = FakeEngine(chooser=chooser)
    run = SupportRun(tmp_path, first, "fake", batch_size=1)
    sentences = [s for a in answers for s in sentences_of(a)]
    assert len(run.pending(sentences)) == 3
    # A run killed after its first batch keeps that verdict.
    run.verdicts.append([{**run._row(sentences[0], "p-rome"), "p_yes": 0.9}])
    again = FakeEngine(chooser=chooser)
    await evaluate_support(again, answers, tmp_path, model="fake", methods=["rag"], lookup=lookup)
    assert len(again.choice_calls) == 2
    third = FakeEngine(chooser=chooser)
    summary = await evaluate_support(
        third, answers, tmp_path, model="fake", methods=["rag"], lookup=lookup
    )
    assert third.choice_calls == [] and summary["verdicts_asked"] == 0
    # Another judge model is another cache key.
    other = FakeEngine(chooser=chooser)
    await evaluate_support(other, answers, tmp_path, model="other", methods=["rag"], lookup=lookup)
    assert len(other.choice_calls) == 3


async def test_summary_numbers_and_paired_difference(tmp_path: Path) -> None:
    shown = [passage(1, "p-leaf"), passage(2, "p-rome")]
    answers = [
        # q1: rag 1 of 2 supported, typed-rag 2 of 2
        row("rag", "q1", "Rome fell [2]. Bread rises [1].", shown),
        row("typed-rag", "q1", "Rome fell [2]. Leaves change [1].", shown),
        # q2: rag cites nothing, typed-rag 0 of 1 (an unshown number)
        row("rag", "q2", "Rome fell.", shown),
        row("typed-rag", "q2", "Rome fell [9].", shown),
        # q3: both 1 of 1
        row("rag", "q3", "Leaves change [1].", shown),
        row("typed-rag", "q3", "Autumn leaves [1].", shown),
    ]
    summary = await evaluate_support(
        FakeEngine(chooser=chooser),
        answers,
        tmp_path,
        model="fake",
        methods=["rag", "typed-rag"],
        lookup=lookup,
        n_boot=200,
        meta={"run_dir": "somewhere"},
    )
    assert summary["run_dir"] == "somewhere" and summary["questions"] == 3
    rag, typed = summary["methods"]["rag"], summary["methods"]["typed-rag"]
    assert (rag["answers"], rag["answers_citing"], rag["sentences"], rag["supported"]) == (
        3,
        2,
        3,
        2,
    )
    assert (typed["answers_citing"], typed["sentences"], typed["supported"]) == (3, 4, 3)
    assert typed["share"]["mean"] == pytest.approx(0.75) and typed["share"]["count"] == 3
    assert typed["share"]["low"] <= 0.75 <= typed["share"]["high"]
    (pair,) = summary["paired"]
    # Questions where both cite: q1 (1.0 - 0.5) and q3 (1.0 - 1.0).
    assert (pair["a"], pair["b"], pair["n"]) == ("typed-rag", "rag", 2)
    assert pair["diff"] == pytest.approx(0.25)
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["methods"]["typed-rag"]["supported"] == 3
    assert len((tmp_path / "support.jsonl").read_text().splitlines()) == 7


def test_ratio_estimate_pools_sentences_and_resamples_questions() -> None:
    est = ratio_estimate([1, 0, 3], [2, 1, 3], n_boot=500)
    assert est.mean == pytest.approx(4 / 6) and est.count == 3
    assert 0 <= est.low <= est.mean <= est.high <= 1


# --------------------------------------------------------------------------- CLI


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A hand-made run directory: a manifest and two methods' answers, no passage texts."""
    d = tmp_path / "run"
    d.mkdir()
    (d / "run.json").write_text(json.dumps({"question_ids": ["q2", "q1"]}))
    shown = [passage(1, "p-leaf"), passage(2, "p-rome")]
    rows = [
        row("rag", "q1", "Rome fell [2].", shown),
        row("typed-rag", "q1", "Leaves change [1]. Bread [1].", shown),
        row("rag", "q2", "Rome fell [1].", shown),
        row("typed-rag", "q2", "Rome fell [2].", shown),
    ]
    (d / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[FakeEngine]:
    made: list[FakeEngine] = []

    def build_engine(settings: Any) -> FakeEngine:
        made.append(FakeEngine(chooser=chooser))
        return made[-1]

    monkeypatch.setattr(typed_rag.engines, "build_engine", build_engine, raising=False)
    monkeypatch.setattr("cli.lab.eval_support.index_lookup", lambda settings: lookup)
    return made


def base_args(tmp_path: Path) -> list[str]:
    return ["--set", f"home={tmp_path / 'home'}", "--set", "engine.backend=fake"]


def test_cli_judges_a_run_and_prints_a_table(
    tmp_path: Path, run_dir: Path, cli: list[FakeEngine], capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "support"
    args = [*base_args(tmp_path), "eval", "support", str(run_dir), "--out", str(out)]
    assert main([*args, "--limit", "1", "--no-progress"]) == 0  # q2 first, as in run.json
    printed = capsys.readouterr().out
    assert "typed-rag" in printed and "supported" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["questions"] == 1 and summary["run_dir"] == str(run_dir)
    assert summary["methods"]["rag"]["supported"] == 0  # [1] is the leaf passage
    assert summary["methods"]["typed-rag"]["supported"] == 1
    assert main([*args, "--no-progress"]) == 0
    assert len(cli[-1].choice_calls) == 3  # only q1's sentences are new
    assert json.loads((out / "summary.json").read_text())["methods"]["typed-rag"]["sentences"] == 3


def test_cli_errors_are_clear(
    tmp_path: Path, run_dir: Path, cli: list[FakeEngine], capsys: pytest.CaptureFixture
) -> None:
    out = ["--out", str(tmp_path / "o")]
    missing = [*base_args(tmp_path), "eval", "support", str(tmp_path / "nothing"), *out]
    assert main(missing) == 2
    err = capsys.readouterr().err
    assert "not a run directory" in err and "Traceback" not in err
    unknown = [*base_args(tmp_path), "eval", "support", str(run_dir), "--methods", "hyde", *out]
    assert main(unknown) == 2
    assert "unknown method" in capsys.readouterr().err
    absent = [*base_args(tmp_path), "eval", "support", str(run_dir), "--methods", "llm", *out]
    assert main(absent) == 2
    assert "has no answers of llm" in capsys.readouterr().err
    no_probs = [*base_args(tmp_path), "eval", "support", str(run_dir), "--scorer-backend", "openai"]
    assert main([*no_probs, *out]) == 2
    assert "token probabilities" in capsys.readouterr().err
    assert cli == []  # no engine was built for any of them


def test_pooled_difference_pairs_the_questions_and_pools_sentences() -> None:
    from eval.citation_support import pooled_difference

    a = {"q1": (1, 2), "q2": (2, 2), "q3": (3, 4)}  # 6 of 8 supported
    b = {"q1": (0, 2), "q2": (2, 2), "q3": (2, 6)}  # 4 of 10
    d = pooled_difference(a, b, n_boot=500)
    assert d["n"] == 3 and d["diff"] == pytest.approx(6 / 8 - 4 / 10)
    assert d["ci"][0] <= d["diff"] <= d["ci"][1]
    same = pooled_difference(a, a, n_boot=200)
    assert same["diff"] == 0 and same["ci"] == [0.0, 0.0]  # paired: no spread without change
    assert pooled_difference({"q1": (1, 1)}, {})["diff"] == 1.0  # uncited on one side: 0/0 counts 0
