"""The two-turn conversation set (built from Wiki-NFQA) and the judge of its rewrites."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from eval.data.wikinfqa import WikiNFQARecord
from training.conversation_set import (
    FOLLOW_UPS,
    build_conversations,
    evaluate,
    read_conversations,
    resolved,
    subject_of,
    wilson,
)
from typed_rag.engines.fake import FakeEngine, scripted_responder
from typed_rag.system import TypedRAG

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "results" / "conversations" / "wiki_nfqa_followups.jsonl"


def record(qid: str, question: str, subset: str = "nq") -> WikiNFQARecord:
    return WikiNFQARecord(subset, qid, question, ("An answer. " * 50,), (4,))


@pytest.mark.parametrize(
    ("question", "subject"),
    [
        ("what are the principles of the baptist church", "the baptist church"),
        ("What is the first purpose of air defence?", "air defence"),
        ("What is the liquid in a coconut called?", None),  # not a noun phrase
        ("What is the smallest country in the world?", None),  # "it" is the answer
        ("What are the uses of computers?", None),  # plural
        ("Why do leaves fall?", None),
        ("What was a consequence of the doubt that Greece could pay its debts?", None),
    ],
)
def test_subject_of(question: str, subject: str | None) -> None:
    assert subject_of(question) == subject


def test_build_is_deterministic_and_interleaves_subsets() -> None:
    records = [
        record("a1", "what is the history of the baptist church"),
        record("a2", "what is the purpose of a traffic circle"),
        record("b1", "What is the first purpose of air defence?", subset="squad"),
        record("a3", "why is the sky blue"),
    ]
    convs = build_conversations(records, 10)
    assert [c.source_id for c in convs] == ["a1", "b1", "a2"]
    assert convs == build_conversations(records, 10)
    first = convs[0]
    assert [t["role"] for t in first.turns] == ["user", "assistant", "user"]
    assert first.turns[0]["content"] == "What is the history of the baptist church?"
    assert len(first.turns[1]["content"]) <= 310
    assert first.follow_up == FOLLOW_UPS[0][0] and "it" in first.follow_up.lower()
    assert first.intended == "Why is the baptist church important?"
    assert convs[1].intended == "What is the history of air defence?"


def test_resolved_needs_the_subject_and_the_intent() -> None:
    (conv,) = build_conversations([record("a", "what is the purpose of a traffic circle")], 1)
    assert resolved("Why are traffic circles important?", conv)
    assert resolved("Why is the traffic circle important in road design?", conv)
    assert not resolved("Why is it important?", conv)
    assert not resolved("What is the purpose of a traffic circle?", conv)  # intent lost
    (defence,) = build_conversations([record("b", "What is the first purpose of air defence?")], 1)
    assert resolved("Why is air defense important?", defence)  # a spelling variant
    assert not resolved("Why is air force important?", defence)
    (dish,) = build_conversations(
        [record("c", "What are the ingredients of the Irish dish colcannon?")], 1
    )
    assert not resolved("Why is colcannon important?", dish)
    assert resolved("Why is colcannon important?", dish, lenient=True)
    assert not resolved("Why is it important?", dish, lenient=True)


def test_wilson_interval() -> None:
    low, high = wilson(15, 30)
    assert low == pytest.approx(0.3315, abs=1e-3) and high == pytest.approx(0.6685, abs=1e-3)
    assert wilson(0, 0) == (0.0, 0.0)


async def test_evaluate_counts_resolved_rewrites(settings) -> None:  # type: ignore[no-untyped-def]
    convs = build_conversations(
        [
            record("a", "what is the purpose of a traffic circle"),
            record("b", "what is the history of the baptist church"),
        ],
        2,
    )
    replies = {convs[0].follow_up: convs[0].intended, convs[1].follow_up: "What is its history?"}

    def answer(req):  # type: ignore[no-untyped-def]
        last = req.messages[-1]["content"]
        follow = next(f for f in replies if f"User: {f}" in last)
        return json.dumps({"question": replies[follow]})

    responder = scripted_responder()
    engine = FakeEngine(lambda r: answer(r) if r.json_schema else responder(r))
    async with TypedRAG(settings, engine=engine) as rag:
        report = await evaluate(rag, convs)
    summary = report["summary"]
    assert (summary["n"], summary["resolved"], summary["rewritten"]) == (2, 1, 1)
    assert [r["resolved"] for r in report["rows"]] == [True, False]


def test_committed_set_is_what_the_command_builds(tmp_path: Path) -> None:
    out = tmp_path / "set.jsonl"
    data = REPO.parent.parent / "shared" / "wiki-nfqa"
    if not data.is_dir():
        data = Path("/work/shared/wiki-nfqa")
    if not data.is_dir():
        pytest.skip("Wiki-NFQA data not available")
    rc = main(
        ["conversations", "build", "-n", "30", "--out", str(out), "--set", f"eval.data_dir={data}"]
    )
    assert rc == 0
    assert out.read_text() == COMMITTED.read_text()
    assert len(read_conversations(out)) == 30
