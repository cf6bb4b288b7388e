"""The QTREE build on the fake engine: records, the rule, fallbacks, resumability, summary."""

from __future__ import annotations

import json
from pathlib import Path

from eval.store import read_jsonl
from tests.qtree.helpers import hashed_score, qtree_responder, rule_following_outlines
from training.qtree.dataset import (
    DATASET,
    INSTRUCTIONS,
    TREES,
    QTreeConfig,
    QTreeQuestion,
    build_qtree_dataset,
)
from training.qtree.summary import load_examples, summarize, write_summary
from typed_rag.engines.base import ChatRequest
from typed_rag.engines.fake import FakeEngine
from typed_rag.qtree.outlines import follows_rule, is_connected

QUESTIONS = [
    QTreeQuestion("a", "Tea: how is it made?", source="wikinfqa"),
    QTreeQuestion("b", "Coffee: why is it bitter?", source="wikinfqa"),
    QTreeQuestion(
        "c",
        "Bread: how to bake it?",
        source="constraints",
        conditioned_question="How to bake bread? Skip the history.",
    ),
]


def engine(**kw: object) -> FakeEngine:
    kw.setdefault("outlines", rule_following_outlines)
    return FakeEngine(qtree_responder(**kw), chooser=hashed_score)  # type: ignore[arg-type]


def titles(e: FakeEngine) -> list[str]:
    return [str((r.json_schema or {}).get("title")) for r in e.calls]


async def test_build_writes_judged_outlines_that_follow_the_rule(tmp_path: Path) -> None:
    e = engine()
    stats = await build_qtree_dataset(e, QUESTIONS, tmp_path, QTreeConfig(chunk=2))
    assert stats.trees["ok"] == 3 and stats.outlines["ok"] == 3
    assert titles(e).count("qtree") == 3
    assert titles(e).count("coverage_instructions") == 2  # "c" came conditioned
    records = {r["question_id"]: r for r in read_jsonl(tmp_path / DATASET)}
    assert set(records) == {"a", "b", "c"}
    for r in records.values():
        assert r["status"] == "ok" and len(r["outlines"]) == 3
        for o in r["outlines"]:
            assert len(o["ids"]) == 4 and is_connected(o["ids"])
            assert 1 <= o["score"] <= 5 and len(o["queries"]) == 4
            if r["background"]:
                assert follows_rule(o["ids"], r["background"], r["intent"])
        expected = [o["expected"] for o in r["outlines"]]
        assert expected[r["best"]] == max(expected) and expected[r["worst"]] == min(expected)
    assert records["c"]["conditioned_question"] == "How to bake bread? Skip the history."
    assert records["a"]["conditioned_question"].startswith("Tea: how is it made? Please tell me")
    assert len(e.choice_calls) == 9


async def test_rerun_makes_no_engine_calls(tmp_path: Path) -> None:
    await build_qtree_dataset(engine(), QUESTIONS, tmp_path)
    before = (tmp_path / DATASET).read_text()
    again = engine()
    await build_qtree_dataset(again, QUESTIONS, tmp_path)
    assert again.calls == [] and again.choice_calls == []
    assert (tmp_path / DATASET).read_text() == before


async def test_a_killed_run_resumes_after_its_last_stage(tmp_path: Path) -> None:
    first = engine()
    # Trees and instructions done, outlines not: simulate by dropping qtree.jsonl.
    await build_qtree_dataset(first, QUESTIONS[:1], tmp_path)
    (tmp_path / DATASET).unlink()
    resumed = engine()
    await build_qtree_dataset(resumed, QUESTIONS, tmp_path)
    t = titles(resumed)
    assert t.count("qtree") == 2 and t.count("coverage_instructions") == 1
    assert t.count("qtree_outlines") == 3
    assert len(read_jsonl(tmp_path / TREES)) == 3


async def test_failures_are_stored_with_their_reason_and_not_retried(tmp_path: Path) -> None:
    bad = FakeEngine(qtree_responder(tree='{"subqueries": ["only one?"]}'), chooser=hashed_score)
    cfg = QTreeConfig(max_resamples=1)
    await build_qtree_dataset(bad, QUESTIONS[:2], tmp_path, cfg)
    assert len(bad.calls) == 4  # two questions, two attempts each
    trees = read_jsonl(tmp_path / TREES)
    assert all(t["status"].startswith("the question has 1 children") for t in trees)
    assert [r["status"] for r in read_jsonl(tmp_path / DATASET)] == ["no-tree", "no-tree"]
    s = summarize(tmp_path)
    assert s["questions"] == 2 and s["n"] == 0  # the size counts judged questions only
    again = engine()
    await build_qtree_dataset(again, QUESTIONS[:2], tmp_path, cfg)
    assert again.calls == []


async def test_outline_failure_moves_on_to_the_next_instruction(tmp_path: Path) -> None:
    def outlines(req: ChatRequest) -> str:
        if "part 0" in req.messages[-1]["content"]:
            return '{"outlines": [["1", "2.1.1", "3", "3.3.3"]]}'  # never valid
        return rule_following_outlines(req)

    e = engine(outlines=outlines)
    await build_qtree_dataset(e, QUESTIONS[:1], tmp_path, QTreeConfig(max_resamples=0))
    (record,) = read_jsonl(tmp_path / DATASET)
    assert record["status"] == "ok" and record["instruction_index"] == 1
    assert "part 1" in record["conditioned_question"]
    (inst,) = read_jsonl(tmp_path / INSTRUCTIONS)
    assert len(inst["instructions"]) == 5 and inst["intent"] in ("include", "exclude")


async def test_summary_and_training_examples(tmp_path: Path) -> None:
    await build_qtree_dataset(engine(), QUESTIONS, tmp_path)
    s = summarize(tmp_path)
    assert s["n"] == s["questions"] == s["judged"] == 3 and s["outlines"] == 9
    assert sum(s["score_histogram"].values()) == 9
    assert s["intents"]["given"] == 1 and s["sources"] == {"wikinfqa": 2, "constraints": 1}
    path = write_summary(tmp_path, tmp_path / "out" / "summary.json")
    assert json.loads(path.read_text()) == s
    examples = load_examples(tmp_path)
    assert len(examples) == 3 and all(len(e.tree) == 39 for e in examples)
    assert sum(e.rejected is not None for e in examples) == s["dpo_pairs"]
    first = examples[0]
    assert first.chosen[0].split(". ", 1)[0] in first.tree
