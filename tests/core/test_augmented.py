"""Core sub-question retrieval augmentation: coverage selection, pooling and routing."""

from __future__ import annotations

import json

import pytest

from tests.core.conftest import FixedClassifier
from typed_rag.engines.fake import scripted_responder
from typed_rag.pipelines.augmented import cover_select
from typed_rag.types import QuestionType as T

Q = "Why do leaves change color in autumn?"


def test_cover_select_prefers_passages_that_cover_different_queries() -> None:
    # Query 0 likes passages 0 and 1 equally; query 1 only likes passage 2.
    scores = [[1.0, 0.9, 0.0, 0.1], [0.0, 0.0, 1.0, 0.2]]
    assert cover_select(scores, 2) == [0, 2]  # top-2 by query 0 alone would be [0, 1]
    assert cover_select(scores, 10) == [0, 2, 1, 3]
    assert cover_select([[3.0, 3.0]], 1) == [0]  # flat scores: the earlier candidate
    assert cover_select([], 3) == []


async def test_augmented_route_pools_question_and_sub_questions(
    make_rag, settings, retriever, reranker
) -> None:
    settings.augment.types = ["EVIDENCE-BASED"]
    subs = json.dumps({"sub_questions": ["what does photosynthesis need", "sleep and memory"]})
    rag, engine = make_rag(
        scripted_responder({"core_sub_questions": subs}),
        classifier=FixedClassifier(T.EVIDENCE_BASED),
    )
    result = await rag.answer(Q, top_k=3)
    assert result.plan["augmented"] is True
    assert result.plan["core_sub_questions"] == json.loads(subs)["sub_questions"]
    assert retriever.searches[-1] == ([Q, *json.loads(subs)["sub_questions"]], 10)
    assert set(reranker.queries) == {Q, *json.loads(subs)["sub_questions"]}
    titles = {p.title for p in result.passages}
    # One slot each for the question and both sub-questions, not three autumn passages.
    assert {"Photosynthesis", "Sleep"} <= titles and len(result.passages) == 3
    assert result.rounds == 2
    assert engine.batches[0][0].json_schema["title"] == "core_sub_questions"


async def test_types_not_listed_keep_their_pipeline_and_bad_plans_fall_back(
    make_rag, settings
) -> None:
    settings.augment.types = ["EVIDENCE-BASED"]
    rag, engine = make_rag()
    result = await rag.answer(Q, force_type=T.REASON)
    assert "sub_queries" in result.plan and "augmented" not in result.plan
    rag, _ = make_rag(scripted_responder({"core_sub_questions": "[]"}))
    result = await rag.answer(Q, force_type=T.EVIDENCE_BASED)
    assert any(f.startswith("augment:") for f in result.fallbacks)
    assert result.passages  # plain RAG answered


@pytest.mark.parametrize("value", ["foo", ["REASON", "bar"]])
def test_unknown_types_are_rejected_by_name(value) -> None:
    from pydantic import ValidationError

    from typed_rag.config import load_settings

    with pytest.raises(ValidationError, match="unknown question type"):
        load_settings(**{"augment.types": value})


async def test_end_to_end_answers_each_core_sub_question_then_aggregates(
    make_rag, settings, retriever
) -> None:
    """Xie et al.'s M4: core sub-questions drive both retrieval and generation."""
    settings.augment.types = ["EVIDENCE-BASED"]
    settings.augment.end_to_end = True
    subs = ["what does photosynthesis need", "sleep and memory"]
    rag, engine = make_rag(
        scripted_responder({"core_sub_questions": json.dumps({"sub_questions": subs})}),
        classifier=FixedClassifier(T.EVIDENCE_BASED),
    )
    result = await rag.answer(Q, top_k=2)
    assert result.plan["end_to_end"] is True and result.plan["core_sub_questions"] == subs
    assert retriever.searches[-1] == (subs, 2)  # each sub-question's own top-K, no pool
    assert [s.query for s in result.sub_answers] == subs
    assert result.rounds == 3 and len(engine.batches[1]) == 2  # plan, sub-answers, aggregate
