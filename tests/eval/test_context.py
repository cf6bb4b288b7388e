"""CRUX context evaluation: each metric on hand-computed cases, and the cached judging run."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from eval.context import metrics as m
from eval.context.analysis import question_rows, summarise
from eval.context.judge import CruxJudge, grade_request, parse_sub_questions
from eval.context.run import ContextQuestion, ContextRun
from typed_rag.engines.base import ChatRequest, ChoiceRequest
from typed_rag.engines.fake import FakeEngine


def test_answerable_sub_questions_are_those_some_pool_passage_answers() -> None:
    pool = [[5, 0, 2], [3, 1, 0]]  # sub-question 2 never reaches 3: filtered out
    assert m.answerable(pool) == [0]
    assert m.answerable(pool, threshold=2) == [0, 2]


def test_coverage_is_the_share_of_answerable_sub_questions_the_context_answers() -> None:
    keep = [0, 1, 3]
    assert m.coverage([[4, 0, 5, 0], [0, 0, 0, 3]], keep) == pytest.approx(2 / 3)
    assert m.coverage([[0, 0, 5, 0]], keep) == 0.0  # 2 is not answerable: it does not count
    assert m.coverage([[5]], []) is None


def test_alpha_ndcg_by_hand() -> None:
    keep = [0, 1]
    pool = [[3, 0], [3, 3]]
    # Context order (p0, p1): 1/log2(2) + (0.5 + 1)/log2(3); ideal (p1, p0): 2 + 0.5/log2(3).
    got = m.alpha_ndcg([pool[0], pool[1]], pool, keep)
    assert got == pytest.approx((1 + 1.5 / math.log2(3)) / (2 + 0.5 / math.log2(3)))
    assert m.alpha_ndcg([pool[1], pool[0]], pool, keep) == pytest.approx(1.0)
    assert m.ideal_ranking(pool, keep, depth=2) == [1, 0]


def test_required_subset_is_greedy_set_cover_of_the_answerable() -> None:
    pool = [[5, 0, 0], [4, 4, 0], [0, 0, 3], [0, 5, 0]]
    assert m.required_subset(pool, [0, 1, 2]) == [1, 2]


def test_density_relative_to_the_oracle() -> None:
    # 1 of 2 answerable in 100 tokens vs the oracle's 2 in 50: sqrt(0.01 / 0.04).
    assert m.density([[5, 0]], 100, [0, 1], 50) == pytest.approx(0.5)
    assert m.density([[5, 5]], 50, [0, 1], 50) == pytest.approx(1.0)
    assert m.density([[0, 0]], 50, [0, 1], 50) == 0.0


def test_kendall_tau_b_with_ties() -> None:
    assert m.kendall_tau([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert m.kendall_tau([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert m.kendall_tau([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(5 / math.sqrt(30))
    assert m.kendall_tau([1, 1], [2, 3]) is None
    with pytest.raises(ValueError, match="equal lengths"):
        m.kendall_tau([1], [1, 2])


def test_relevance_metrics_by_hand() -> None:
    got = m.relevance_metrics([False, True, False, True], total_relevant=2)
    assert got["hit"] == 1.0 and got["ap"] == pytest.approx(0.5)
    ndcg = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert got["ndcg"] == pytest.approx(ndcg)


def test_sub_question_parsing_drops_duplicates_and_empties() -> None:
    got = parse_sub_questions('```json\n{"questions": ["What is A?", " What is A? ", "", 3]}\n```')
    assert got.ok and got.value == ["What is A?"]
    assert parse_sub_questions('{"questions": []}').status == "empty"
    assert parse_sub_questions("no json here").status == "no-json"


def test_grade_prompts_put_the_text_before_the_sub_question() -> None:
    """Consecutive grades of one passage share the engine's cached prompt prefix."""
    a, b = (
        grade_request("Leaves lose chlorophyll.", "Why?"),
        grade_request("Leaves lose chlorophyll.", "When?"),
    )
    common = os.path.commonprefix([a.messages[-1]["content"], b.messages[-1]["content"]])
    assert "Leaves lose chlorophyll." in common and a.choices == tuple("012345")


SUBS = ["Why does chlorophyll break down?", "Which pigments show in autumn?", "Who is Bob?"]
PASSAGES = {
    "p1": "Chlorophyll breaks down in autumn as days shorten.",
    "p2": "Carotenoids and anthocyanins show when the green fades. Chlorophyll breaks down.",
    "p3": "Stockholm is the capital of Sweden.",
}


def judge_engine() -> FakeEngine:
    def respond(req: ChatRequest) -> str:
        return json.dumps({"questions": SUBS})

    def choose(req: ChoiceRequest) -> dict[str, float]:
        text = req.messages[-1]["content"]
        body, question = text.split("Text:\n", 1)[1].split("\n\nQuestion: ", 1)
        if "Bob" in question or "Stockholm" in body:
            return {"0": 1.0}
        hit = ("chlorophyll" in question.lower() and "Chlorophyll" in body) or (
            "pigments" in question and "Carotenoids" in body
        )
        return {"5": 0.9, "1": 0.1} if hit else {"1": 0.8, "5": 0.2}

    return FakeEngine(respond, chooser=choose)


def passage(pid: str) -> dict[str, str]:
    return {"id": pid, "title": "", "text": PASSAGES[pid]}


def question() -> ContextQuestion:
    return ContextQuestion(
        question_id="q1",
        question="Why do leaves change color in autumn?",
        reference="Chlorophyll breaks down, revealing carotenoids and anthocyanins.",
        contexts={
            "bm25": [passage("p3"), passage("p1")],
            "reranked": [passage("p2"), passage("p1")],
            "noisy": [passage("p3")],
        },
        answers={
            "bm25": "Chlorophyll breaks down.",
            "reranked": "Chlorophyll breaks down; Carotenoids show.",
            "noisy": "Stockholm.",
        },
        gold=("chlorophyll",),
    )


async def test_context_run_grades_each_cell_once_and_computes_the_table(tmp_path: Path) -> None:
    engine = judge_engine()
    run = ContextRun(tmp_path, CruxJudge(engine, temperature=0.0), batch_size=4)
    q = question()
    await run.judge_missing([q])
    # 3 unique passages + 3 answers, 3 sub-questions each; one sub-question call.
    assert len(engine.choice_calls) == 18 and len(engine.calls) == 1
    rows = {r["config"]: r for r in question_rows(run, q)}
    assert rows["bm25"]["answerable"] == 2  # "Who is Bob?" is answered by no passage
    assert rows["bm25"]["coverage"] == 0.5 and rows["reranked"]["coverage"] == 1.0
    assert rows["noisy"]["coverage"] == 0.0 and rows["noisy"]["answer_coverage"] == 0.0
    assert rows["reranked"]["answer_coverage"] == 1.0
    assert rows["reranked"]["alpha_ndcg"] == pytest.approx(1.0)
    assert rows["bm25"]["alpha_ndcg"] < rows["reranked"]["alpha_ndcg"]
    # p2 alone is the oracle; p1 adds tokens but nothing new.
    n1, n2 = (len(PASSAGES[p].split()) for p in ("p1", "p2"))
    assert rows["reranked"]["density"] == pytest.approx(math.sqrt(n2 / (n1 + n2)))
    assert rows["bm25"]["hit"] == 1.0 and rows["noisy"]["hit"] == 0.0
    table = summarise(list(rows.values()), n_boot=50)
    assert table["configs"]["reranked"]["coverage"]["mean"] == 1.0
    assert table["kendall"]["coverage"]["system_tau"] == pytest.approx(1.0)

    # Resuming judges nothing again, and the grades come back from disk.
    again = ContextRun(tmp_path, CruxJudge(judge_engine(), temperature=0.0))
    await again.judge_missing([q])
    assert again.judge.engine.choice_calls == [] and question_rows(again, q) == list(rows.values())


def test_run_questions_take_each_methods_shown_passages_and_fill_texts(tmp_path: Path) -> None:
    from eval.context.inputs import add_retrievers, run_questions, store_lookup
    from eval.data.wikinfqa import WikiNFQARecord
    from tests.core.conftest import MemoryRetriever

    rec = WikiNFQARecord(
        "nq", "q1", "Why do leaves change color?", ("poor", "best", "ok"), (1, 3, 2), gold=("x",)
    )
    other = WikiNFQARecord("nq", "q2", "Unanswered?", ("a",), (1,))
    shown = [
        {"citation": 2, "id": "p2", "title": "B"},  # text left out of a committed run
        {"citation": 1, "id": "p1", "title": "A", "text": "kept"},
    ]
    rows = [
        {"method": "rag", "question_id": "q1", "answer": "R", "result": {"passages": shown}},
        {"method": "llm", "question_id": "q1", "answer": "L", "result": {"passages": []}},
        {"method": "llm", "question_id": "q2", "answer": "L2", "result": {}},
    ]
    (tmp_path / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    class Store:
        rows = [("p0", "Z", "zero"), ("p2", "Title two", "text two")]

        def __len__(self) -> int:
            return len(self.rows)

        def get(self, doc: int) -> tuple[str, str, str]:
            return self.rows[doc]

    (q,) = run_questions(tmp_path, [rec, other], ["llm", "rag"], store_lookup(Store()))
    assert q.reference == "best" and q.answers == {"llm": "L", "rag": "R"}
    assert q.references == {}  # no grade-0 answer: no validity pair
    assert q.contexts["llm"] == []
    assert [(p["id"], p["text"]) for p in q.contexts["rag"]] == [("p1", "kept"), ("p2", "text two")]
    add_retrievers([q], {"memory": MemoryRetriever()}, k=2)
    assert len(q.contexts["memory"]) == 2 and "memory" not in q.answers
    with pytest.raises(KeyError, match="not in the index"):
        rows[0]["result"]["passages"] = [{"citation": 1, "id": "nope"}]
        (tmp_path / "answers.jsonl").write_text(
            json.dumps(rows[0]) + "\n" + json.dumps(rows[1]) + "\n"
        )
        run_questions(tmp_path, [rec], ["llm", "rag"], store_lookup(Store()))


def test_validity_references_pair_the_next_best_answer_with_a_grade_0_one() -> None:
    from eval.context.inputs import best_reference, validity_references
    from eval.data.wikinfqa import WikiNFQARecord

    def record(labels: tuple[int, ...]) -> WikiNFQARecord:
        return WikiNFQARecord("nq", "q", "Q?", tuple(f"a{i}" for i in range(len(labels))), labels)

    assert best_reference(record((2, 3, 3, 0))) == "a1"  # first of the highest grade
    assert validity_references(record((0, 3, 3, 0, 1))) == {
        "reference:3": "a2",
        "reference:0": "a0",
    }
    assert validity_references(record((1, 3, 0, 2))) == {"reference:2": "a3", "reference:0": "a2"}
    assert validity_references(record((3, 1, 2))) == {}  # no grade-0 answer
    assert validity_references(record((3, 0, 0))) == {}  # nothing graded between
    assert validity_references(record((3,))) == {}


async def test_graded_references_measure_the_judge_without_being_configurations(
    tmp_path: Path,
) -> None:
    from eval.context.analysis import evaluate
    from eval.context.report import render

    q = question()
    q.references = {"reference:0": "Stockholm.", "reference:2": "Chlorophyll breaks down."}
    engine = judge_engine()
    run = ContextRun(tmp_path, CruxJudge(engine, temperature=0.0))
    summary = await evaluate(run, [q], "fake", n_boot=50)
    assert len(engine.choice_calls) == 18 + 2 * 3  # each reference x 3 sub-questions
    assert set(summary["configs"]) == {"bm25", "reranked", "noisy"}
    validity = summary["judge_validity"]
    assert validity["n"] == 1 and validity["better_above_grade0"]["mean"] == 1.0
    assert validity["better_coverage"]["mean"] == 0.5  # 1 of the 2 answerable
    assert validity["grade0_coverage"]["mean"] == 0.0
    assert "Judge validity (1 questions)" in render(summary)
    # A judge that cannot tell them apart ties: half.
    q.references = {"reference:2": "Stockholm.", "reference:0": "Stockholm, again."}
    again = await evaluate(ContextRun(tmp_path / "b", CruxJudge(judge_engine())), [q], "fake")
    assert again["judge_validity"]["better_above_grade0"]["mean"] == 0.5


async def test_evaluate_writes_the_summary_table_and_plot(tmp_path: Path) -> None:
    from eval.context.analysis import evaluate
    from eval.context.report import write

    run = ContextRun(tmp_path, CruxJudge(judge_engine(), temperature=0.0))
    summary = await evaluate(run, [question()], "fake", n_boot=50)
    assert summary["questions"] == 1 and summary["judge"] == "fake"
    assert {r["config"] for r in summary["rows"]} == {"bm25", "reranked", "noisy"}
    files = write(tmp_path, summary)
    assert all(f.stat().st_size > 0 for f in files)
    table = (tmp_path / "report.md").read_text()
    assert "| reranked | 1 | 1.000" in table and "judge fake" in table


def test_summary_pairs_configurations_question_by_question() -> None:
    """Paired differences use only the questions both configurations have the metric for."""
    rows = [
        {"question_id": "q1", "config": "a", "coverage": 1.0, "answer_coverage": 0.5},
        {"question_id": "q2", "config": "a", "coverage": 0.5, "answer_coverage": None},
        {"question_id": "q3", "config": "a", "coverage": 0.0, "answer_coverage": 1.0},
        {"question_id": "q1", "config": "b", "coverage": 0.5, "answer_coverage": 0.0},
        {"question_id": "q2", "config": "b", "coverage": 0.5, "answer_coverage": 1.0},
    ]
    for r in rows:
        r.update({k: None for k in ("alpha_ndcg", "density", "hit", "ap", "ndcg")})
    (pair,) = summarise(rows, n_boot=50)["paired"]
    assert (pair["a"], pair["b"]) == ("a", "b")
    assert pair["coverage"]["count"] == 2 and pair["coverage"]["mean"] == pytest.approx(0.25)
    assert pair["answer_coverage"]["count"] == 1 and pair["answer_coverage"]["mean"] == 0.5
    assert pair["alpha_ndcg"] is None
    from eval.context.report import render

    table = render({"questions": 3, "judge": "fake", **summarise(rows, n_boot=50)})
    assert "| a - b | +0.250 [" in table
