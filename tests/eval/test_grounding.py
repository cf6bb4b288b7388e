"""``eval grounding``: faithfulness rows of a run over a documentation devset, on known cases:
a supported answer, a contradicted one, an uncited sentence, a wrong command, and declines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.grounding import validity
from eval.grounding.measure import CONTRADICTION_PROMPT, declines
from eval.grounding.run import evaluate_grounding
from typed_rag.engines.base import ChoiceRequest
from typed_rag.engines.fake import FakeEngine

PAGE = (
    "With many concurrent writers, a client/server database engine is the better choice; "
    "SQLite allows one writer at a time. Run sqlite3 --version to see the version."
)


@pytest.mark.parametrize(
    "answer",
    [
        "The documents do not say how to configure replication.",
        "The provided passages do not mention a limit on file size [1].",
        "I could not find an answer to this in the references.",
        "There is no information about GPU support in the documentation.",
        "This is not covered in the documents.",
    ],
)
def test_declines_are_recognised(answer: str) -> None:
    assert declines(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "SQLite does not support many concurrent writers [1].",
        "Why3 does not provide a graphical editor for proofs.",
        "The option does not change the output format.",
        "Use a client/server engine for a busy website [1].",
    ],
)
def test_statements_about_the_subject_are_not_declines(answer: str) -> None:
    assert not declines(answer)


def chooser(req: ChoiceRequest) -> dict[str, float]:
    """A scripted judge: the statement is contradicted when it recommends SQLite for many
    writers, supported when it is about client/server engines or one writer; like the small
    judge, its contradiction question also says yes to a supported client/server sentence
    (which the gate by the support verdict leaves uncounted)."""
    user = req.messages[-1]["content"]
    statement = user.rsplit("Statement: ", 1)[1].lower()
    wrong = "sqlite is recommended" in statement or "client/server" in statement
    if user.startswith(CONTRADICTION_PROMPT):
        return {"yes": 0.9 if wrong else 0.1, "no": 0.1 if wrong else 0.9}
    right = "client/server" in statement or "one writer" in statement
    return {"yes": 0.8 if right else 0.2, "no": 0.2 if right else 0.8}


def answer_row(qid: str, method: str, answer: str) -> dict:
    passages = (
        [] if method == "llm" else [{"citation": 1, "id": "p1", "title": "WAL", "text": PAGE}]
    )
    return {
        "question_id": qid,
        "method": method,
        "answer": answer,
        "result": {"passages": passages},
    }


@pytest.mark.asyncio
async def test_rows_on_known_answers(tmp_path: Path) -> None:
    records = [{"id": "q1"}, {"id": "q2"}, {"id": "u1", "answerable": False}]
    answers = [
        answer_row("q1", "rag", "Use a client/server engine for many writers [1]."),
        answer_row(
            "q2", "rag", "SQLite allows one writer at a time [1]. Check `sqlite3 --version`."
        ),
        answer_row("u1", "rag", "The documents do not say."),
        answer_row("q1", "typed-rag", "SQLite is recommended for many writers [1]. It is fast."),
        answer_row("q2", "typed-rag", "Run `sqlite3 --show-writers` to see them [1]."),
        answer_row("u1", "typed-rag", "Replication is configured with a primary and replicas."),
    ]
    scores = [
        {"question_id": "q1", "method": "rag", "rank": 1},
        {"question_id": "q2", "method": "rag", "rank": 2},
        {"question_id": "q1", "method": "typed-rag", "rank": 4},
        {"question_id": "q2", "method": "typed-rag", "rank": None},  # never parsed
    ]
    engine = FakeEngine(chooser=chooser)
    kw = {"when": "before", "model": "judge", "methods": ["rag", "typed-rag"]}
    rows = await evaluate_grounding(engine, answers, records, scores, tmp_path, **kw)
    rag, typed = rows
    assert rag["n"] == 2 and rag["n_unanswerable"] == 1
    assert rag["supported_share"] == 1.0 and rag["contradiction_share"] == 0.0  # gated
    assert rag["uncited_share"] == 1 / 3  # the code-span sentence cites nothing
    assert rag["code_span_faithful_share"] == 1.0
    assert rag["unanswerable_declined_share"] == 1.0
    assert rag["mrr"] == pytest.approx(0.75)
    assert typed["supported_share"] == 0.0
    assert typed["contradiction_share"] == 0.5  # the SQLite sentence, not the option one
    assert typed["code_span_faithful_share"] == 0.0  # --show-writers is on no page
    assert typed["unanswerable_declined_share"] == 0.0
    assert typed["mrr"] == pytest.approx(0.25)
    assert len(engine.choice_calls) == 8  # 4 cited sentences, two questions each
    second = FakeEngine(chooser=chooser)
    again = await evaluate_grounding(second, answers, records, scores, tmp_path, **kw)
    assert again == rows and not second.choice_calls  # every verdict cached
    after = {**kw, "when": "after"}
    await evaluate_grounding(
        engine, answers[:3], records, scores, tmp_path, **{**after, "methods": ["rag"]}
    )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [(r["method"], r["when"]) for r in summary["rows"]] == [
        ("rag", "before"),
        ("typed-rag", "before"),
        ("rag", "after"),
    ]
    # without judges: no engine, the judge-free measures as before, the judged ones None
    bare = await evaluate_grounding(None, answers, records, scores, tmp_path / "b", **kw, judges=())
    free = ("uncited_share", "code_span_faithful_share", "unanswerable_declined_share", "mrr")
    records = [json.loads(line) for line in (tmp_path / "b/before/answers.jsonl").open()]
    assert len(records) == 6 and {r["method"] for r in records} == {"rag", "typed-rag"}
    invented = next(r for r in records if r["method"] == "typed-rag" and r["question_id"] == "q2")
    assert invented["spans_missing"] == ["sqlite3 --show-writers"]
    assert invented["rank"] is None
    declined = next(r for r in records if r["method"] == "rag" and r["question_id"] == "u1")
    assert declined["declined"] is True and declined["answerable"] is False
    for row, judged in zip(bare, rows, strict=True):
        assert row["supported_share"] is None and row["contradiction_share"] is None
        assert [row[k] for k in free] == [judged[k] for k in free] and row["judge"] is None


@pytest.mark.parametrize(
    ("sentence", "flipped"),
    [
        (
            "SQLite allows one writer at a time.",
            "It is not true that SQLite allows one writer at a time.",
        ),
        ("The option is ignored on Windows.", "The option is not ignored on Windows."),
        ("You can undo the commit.", "You can not undo the commit."),
        ("The engine does not lock readers.", "The engine does lock readers."),
        ("Readers don't block writers.", "Readers do block writers."),
    ],
)
def test_flip_negates_the_first_auxiliary(sentence: str, flipped: str) -> None:
    assert validity.flip(sentence) == flipped


@pytest.mark.asyncio
async def test_probes_and_their_rates() -> None:
    records = [
        {
            "id": "a",
            "passage_id": "p1",
            "references": [{"grade": 3, "text": "One writer is allowed. More."}],
        },
        {
            "id": "b",
            "passage_id": "p2",
            "references": [{"grade": 3, "text": "Readers see a snapshot."}],
        },
        {
            "id": "u",
            "passage_id": "p9",
            "answerable": False,
            "references": [{"grade": 3, "text": "x"}],
        },
    ]
    texts = {
        "p1": ("Locking", "One writer is allowed at a time."),
        "p2": ("WAL", "Readers see a snapshot."),
    }
    items = validity.probes(records, texts)
    assert [p.case for p in items] == [*validity.CASES, *validity.CASES]
    assert items[2].statement == "One writer is not allowed."
    assert items[3].text == "Readers see a snapshot."  # the next record's passage

    def judge(req: ChoiceRequest) -> dict[str, float]:  # words shared -> supported
        user = req.messages[-1]["content"]
        passage, statement = user.split("Passage:\n", 1)[1].split("\n\nStatement: ")
        negated = " not " in f" {statement} "
        if user.startswith(CONTRADICTION_PROMPT):
            return {"yes": 0.9, "no": 0.1} if negated else {"yes": 0.1, "no": 0.9}
        shared = statement.split()[0] in passage and not negated
        return {"yes": 0.9, "no": 0.1} if shared else {"yes": 0.1, "no": 0.9}

    rows = await validity.judge_probes(FakeEngine(chooser=judge), items, batch_size=3)
    got = validity.rates(rows)
    assert got["copied"] == {
        "n": 2, "supported": 1.0, "contradicted": 0.0, "contradicted_gated": 0.0
    }  # fmt: skip
    assert got["flipped"] == {
        "n": 2, "supported": 0.0, "contradicted": 1.0, "contradicted_gated": 1.0
    }  # fmt: skip
    assert got["wrong passage"]["n"] == 2


def test_cli_names_what_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from cli.main import main

    home = ["--set", f"home={tmp_path / 'home'}", "--set", "engine.backend=fake"]
    data = tmp_path / "devset.jsonl"
    run = [*home, "eval", "grounding", str(tmp_path / "run"), "--data", str(data)]
    assert main([*run, "--when", "before"]) == 2
    assert f"no devset at {data}" in capsys.readouterr().err
    data.write_text('{"id": "q1", "question": "Why?"}\n')
    assert main([*run, "--when", "before"]) == 2
    assert "run" in capsys.readouterr().err  # not a folder `eval run` made
    assert (
        main(
            [
                *home,
                "eval",
                "grounding-validity",
                "--data",
                str(data),
                "--collection",
                "x",
                "--n",
                "1",
            ]
        )
        == 2
    )
    assert "--n must be at least 2" in capsys.readouterr().err


def test_paired_differences_of_the_judge_free_measures() -> None:
    from eval.grounding.paired import paired

    def rec(qid: str, missing: list[str], rank: int | None, uncited: int = 0) -> dict:
        answer = " ".join(f"Sentence {i}." for i in range(2))
        return {"question_id": qid, "answer": answer, "spans_missing": missing,
                "uncited": ["x"] * uncited, "rank": rank}  # fmt: skip

    after = [rec("q1", [], 1), rec("q2", [], 2), rec("u", [], None) | {"answerable": False}]
    before = [rec("q1", ["--bad"], 2, uncited=2), rec("q2", [], 2), rec("q3", [], 1)]
    got = paired(after, before)
    assert got["questions"] == 2  # q3 only before, u unanswerable
    assert got["span_faithful"]["mean"] == 0.5  # q1 fixed, q2 unchanged
    assert got["uncited_share"]["mean"] == -0.5
    assert got["rr"]["mean"] == 0.25  # q1: 1 - 1/2, q2: 0
