"""Sub-question coverage: tolerant JSON parsing, the weighted score, and the judge's batching."""

from __future__ import annotations

import json

import pytest

from eval.answer_coverage.judge import (
    ANSWERABILITY_SCHEMA,
    COVERAGE_SCHEMA,
    DECOMPOSE_SCHEMA,
    CoverageItem,
    CoverageJudge,
    weighted_score,
)
from eval.answer_coverage.parse import (
    BAD_SHAPE,
    INCOMPLETE,
    NO_JSON,
    Decomposition,
    extract_json,
    parse_answerability,
    parse_coverage,
    parse_decomposition,
)
from typed_rag.engines.base import ChatRequest
from typed_rag.engines.fake import FakeEngine


def test_extract_json_handles_fences_and_chatter() -> None:
    assert extract_json('```json\n{"a": 1}\n```') == {"a": 1}
    assert extract_json('Sure! Here it is: {"a": [1, 2]} Hope it helps.') == {"a": [1, 2]}
    with pytest.raises(ValueError):
        extract_json("no json here")


def test_parse_decomposition_variants() -> None:
    ok = parse_decomposition('{"core": ["Why A?", "why a?", " "], "Follow-up": ["Then?"]}')
    assert ok.ok and ok.value is not None
    assert ok.value.core == ["Why A?"]  # duplicates (any case) and blanks dropped
    assert ok.value.follow_up == ["Then?"] and ok.value.background == []
    assert parse_decomposition('{"core": []}').status == INCOMPLETE
    assert parse_decomposition('{"core": [1, 2]}').status == BAD_SHAPE
    assert parse_decomposition("[]").status == BAD_SHAPE
    assert parse_decomposition("nothing").status == NO_JSON


def test_parse_coverage_and_answerability() -> None:
    text = json.dumps({"verdicts": [{"id": 2, "covered": False}, {"id": 1, "covered": True}]})
    assert parse_coverage(text, 2).value == [True, False]
    assert parse_coverage("[true, false, true]", 3).value == [True, False, True]
    assert parse_coverage(text, 3).status == INCOMPLETE
    assert parse_coverage('{"verdicts": [{"id": 1, "covered": "yes"}]}', 1).status == BAD_SHAPE
    assert parse_coverage('{"verdicts": [{"id": 9, "covered": true}]}', 1).status == BAD_SHAPE
    assert parse_answerability('{"scores": [{"id": 1, "score": 4}]}', 1).value == [4]
    assert parse_answerability('{"scores": [{"id": 1, "score": 6}]}', 1).status == BAD_SHAPE


def test_weighted_score_by_hand() -> None:
    # 2 core (1 hit), 2 background (2 hits), 1 follow-up (hit): (1 + 0.5*2 - 1) / (2 + 0.5*2)
    covered = {"core": [True, False], "background": [True, True], "follow_up": [True]}
    assert weighted_score(covered) == pytest.approx(1 / 3)
    assert weighted_score({"core": [True], "background": [], "follow_up": []}) == 1.0
    assert weighted_score({"core": [False], "background": [], "follow_up": [True]}) == -1.0
    assert weighted_score({"core": [], "background": [True], "follow_up": []}) is None


def judge_responder(req: ChatRequest) -> str:
    if req.json_schema is DECOMPOSE_SCHEMA:
        return json.dumps({"core": ["c1", "c2"], "background": ["b1"], "follow_up": ["f1"]})
    if req.json_schema is COVERAGE_SCHEMA:
        # covers c1, b1 and the follow-up f1
        return json.dumps({"verdicts": [{"id": i, "covered": i in (1, 3, 4)} for i in range(1, 5)]})
    if req.json_schema is ANSWERABILITY_SCHEMA:
        return json.dumps({"scores": [{"id": 1, "score": 4}, {"id": 2, "score": 1}]})
    raise AssertionError("unexpected request")


async def test_judge_batches_and_scores() -> None:
    engine = FakeEngine(judge_responder)
    judge = CoverageJudge(engine, answerable_threshold=3)
    (dec,) = await judge.decompose(["why?"])
    assert dec.ok and isinstance(dec.value, Decomposition)
    items = [
        CoverageItem(
            "rag\tq", "why?", dec.value, "an answer", passages=[{"title": "T", "text": "x"}]
        ),
        CoverageItem("llm\tq", "why?", dec.value, "an answer", passages=None),
    ]
    res = await judge.judge(items)
    # one decomposition batch, one coverage batch of 2, one answerability batch of 1
    assert [len(b) for b in engine.batches] == [1, 2, 1]
    rag, llm = res
    assert rag.covered == {"core": [True, False], "background": [True], "follow_up": [True]}
    assert rag.coverage == {"core": 0.5, "background": 1.0, "follow_up": 1.0}
    assert rag.weighted == pytest.approx((1 + 0.5 - 1) / (2 + 0.5))
    assert rag.context_scores == [4, 1] and rag.context_coverage == 0.5
    assert llm.context_status is None and llm.context_coverage is None
    assert all(r.status == "ok" for r in res)


async def test_judge_failures_are_reported_not_guessed() -> None:
    engine = FakeEngine(lambda req: "I cannot do that")
    judge = CoverageJudge(engine, max_resamples=1)
    (dec,) = await judge.decompose(["why?"])
    assert not dec.ok and dec.status == NO_JSON and dec.attempts == 2
    item = CoverageItem(
        "k", "q", Decomposition(core=["c"]), "a", passages=[{"title": "t", "text": "x"}]
    )
    (res,) = await judge.judge([item])
    assert res.status == NO_JSON and res.covered is None and res.weighted is None
    assert res.context_status == NO_JSON and res.context_coverage is None
