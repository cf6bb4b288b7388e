"""Control flow of every type pipeline on a scripted FakeEngine (DSPy-style fake LLM)."""

from __future__ import annotations

import json

import pytest

from tests.core.conftest import EmptyRetriever
from typed_rag.engines.base import ChatRequest
from typed_rag.engines.fake import scripted_responder
from typed_rag.pipelines.debate import MEDIATOR_SYSTEM
from typed_rag.pipelines.decomposition import AGGREGATOR_SYSTEM
from typed_rag.pipelines.experience import EXPERIENCE_POOL
from typed_rag.types import QuestionType as T

REASON_Q = "Why do leaves change color in autumn?"


def kind(req: ChatRequest) -> str:
    """Which step a request belongs to, read from the request itself."""
    if req.json_schema is not None:
        return req.json_schema["title"]
    system = req.messages[0]["content"]
    return {AGGREGATOR_SYSTEM: "aggregate", MEDIATOR_SYSTEM: "mediate"}.get(system, "answer")


def batch_kinds(engine) -> list[list[str]]:
    return [[kind(r) for r in batch] for batch in engine.batches]


def user_text(req: ChatRequest) -> str:
    return req.messages[-1]["content"]


FOUR = json.dumps(
    {
        "sub_queries": [
            "leaf pigments autumn",
            "chlorophyll breakdown",
            "carotenoids",
            "day length trees",
        ]
    }
)


@pytest.mark.parametrize("qtype", [T.REASON, T.INSTRUCTION])
async def test_decomposed_question_costs_three_rounds_with_one_sub_answer_batch(
    make_rag, qtype
) -> None:
    rag, engine = make_rag(scripted_responder({"sub_query_plan": FOUR}))
    result = await rag.answer(REASON_Q, force_type=qtype)
    assert batch_kinds(engine) == [["sub_query_plan"], ["answer"] * 4, ["aggregate"]]
    assert result.rounds == 3
    assert [c.step for c in result.calls] == ["plan"] + ["sub-answer"] * 4 + ["aggregate"]
    assert [c.round for c in result.calls] == [1, 2, 2, 2, 2, 3]
    assert [s.query for s in result.sub_answers] == json.loads(FOUR)["sub_queries"]
    assert result.plan["sub_queries"] == json.loads(FOUR)["sub_queries"]
    agg = user_text(engine.batches[2][0])
    for sub in result.sub_answers:
        assert sub.query in agg
    assert result.fallbacks == []


async def test_plain_types_make_one_round(make_rag) -> None:
    for qtype in (T.EVIDENCE_BASED, T.FACTOID, T.NOT_A_QUESTION):
        rag, engine = make_rag()
        result = await rag.answer(REASON_Q, force_type=qtype)
        assert batch_kinds(engine) == [["answer"]]
        assert len(result.passages) == 5 and result.plan == {}


async def test_comparison_dedups_by_id_reranks_against_question(
    make_rag, retriever, reranker
) -> None:
    plan = {
        "is_compare": True,
        "compare_type": "Differences",
        "keywords_list": ["coffee caffeine", "tea caffeine"],
    }
    rag, engine = make_rag(scripted_responder({"comparison_plan": json.dumps(plan)}))
    result = await rag.answer("How does coffee differ from tea?", force_type="comparison", top_k=3)
    assert batch_kinds(engine) == [["comparison_plan"], ["answer"]]
    # Both keywords retrieve the tea and coffee passages: the union holds each id once.
    assert retriever.searches[-1] == (["coffee caffeine", "tea caffeine"], 3)
    ids = [p.id for p in result.passages]
    assert len(ids) == len(set(ids)) <= 3 and {"p5", "p6"} <= set(ids)
    assert reranker.queries == ["How does coffee differ from tea?"]
    assert all(p.rerank_score is not None for p in result.passages)
    final = user_text(engine.batches[1][0])
    assert "differences" in final and "coffee caffeine; tea caffeine" in final
    assert result.plan["compare_type"] == "differences"


async def test_comparison_union_without_reranker_interleaves_keywords(make_rag) -> None:
    from typed_rag.pipelines.plain import union_by_id
    from typed_rag.retrieval import Passage

    a = [Passage("1", "t", "x"), Passage("2", "t", "x")]
    b = [Passage("2", "t", "x"), Passage("3", "t", "x")]
    pool, sources = union_by_id([a, b], ["ka", "kb"])
    assert [p.id for p in pool] == ["1", "2", "3"] and sources == ["ka", "kb", "kb"]

    plan = {"is_compare": True, "compare_type": "differences", "keywords_list": ["coffee", "tea"]}
    rag, _ = make_rag(scripted_responder({"comparison_plan": json.dumps(plan)}), reranker=None)
    result = await rag.answer("Coffee or tea?", force_type=T.COMPARISON, top_k=2)
    assert [p.id for p in result.passages] == ["p5", "p6"]  # rank 1 of each keyword
    assert [p.query for p in result.passages] == ["coffee", "tea"]


async def test_comparison_single_keyword_works(make_rag) -> None:
    plan = {"is_compare": True, "compare_type": "superiority", "keywords_list": ["sourdough bread"]}
    rag, engine = make_rag(scripted_responder({"comparison_plan": json.dumps(plan)}))
    result = await rag.answer("Is sourdough the best bread?", force_type=T.COMPARISON)
    assert result.fallbacks == [] and result.plan["keywords"] == ["sourdough bread"]
    assert result.passages and result.passages[0].id in {"p7", "p8"}
    assert len(engine.batches) == 2


async def test_comparison_not_a_comparison_falls_back_to_rag(make_rag) -> None:
    plan = {"is_compare": False, "compare_type": "differences", "keywords_list": []}
    rag, engine = make_rag(scripted_responder({"comparison_plan": json.dumps(plan)}))
    result = await rag.answer("What is Paris?", force_type=T.COMPARISON)
    assert batch_kinds(engine) == [["comparison_plan"], ["answer"]]
    assert result.plan["is_compare"] is False
    assert len(result.fallbacks) == 1 and "not a comparison -> rag" in result.fallbacks[0]
    assert "Comparison type" not in user_text(engine.batches[1][0])


async def test_experience_reranks_wide_pool_against_keywords(
    make_rag, retriever, reranker, settings
) -> None:
    plan = {"keywords": ["backpacking", "hostels"]}
    rag, engine = make_rag(scripted_responder({"keyword_plan": json.dumps(plan)}))
    q = "What is it like to travel Europe cheaply?"
    result = await rag.answer(q, force_type=T.EXPERIENCE, top_k=2)
    assert retriever.searches == [([q], EXPERIENCE_POOL)]
    assert reranker.queries == ["backpacking hostels"]
    assert len(result.passages) == 2 and result.passages[0].id == "p12"
    assert batch_kinds(engine) == [["keyword_plan"], ["answer"]]


async def test_debate_answers_perspectives_in_one_batch_then_mediates(make_rag) -> None:
    plan = {
        "debate_topic": "nuclear power",
        "dist_opinion": ["pro", "contra", "neutral"],
        "sub-queries": {
            "pro": "nuclear power low carbon",
            "contra": "nuclear waste accident risk",
            "neutral": "nuclear power debate",
        },
    }
    answers = {
        "nuclear power low carbon": "Low carbon [1].",
        "nuclear waste accident risk": "Risky [2].",
    }

    def answer(req: ChatRequest) -> str:
        return next((a for q, a in answers.items() if q in user_text(req)), "Balanced view [1].")

    rag, engine = make_rag(scripted_responder({"debate_plan": json.dumps(plan)}, answer=answer))
    result = await rag.answer("Should countries build nuclear power plants?", force_type="DEBATE")
    assert batch_kinds(engine) == [["debate_plan"], ["answer"] * 3, ["mediate"]]
    assert [s.perspective for s in result.sub_answers] == ["pro", "contra", "neutral"]
    mediator = user_text(engine.batches[2][0])
    assert "nuclear power" in mediator and '(perspective: contra): "Risky [2]."' in mediator
    assert result.plan["debate_topic"] == "nuclear power"
    assert [c.step for c in result.calls] == [
        "plan",
        "perspective",
        "perspective",
        "perspective",
        "mediate",
    ]


async def test_plan_malformed_twice_then_valid_uses_new_seeds(make_rag) -> None:
    replies = ["not json at all", '{"sub_queries": ["only one"]}', FOUR]
    rag, engine = make_rag(scripted_responder({"sub_query_plan": replies}))
    result = await rag.answer(REASON_Q, force_type=T.REASON, seed=7)
    plan_calls = [r for r in engine.calls if r.json_schema is not None]
    assert [r.seed for r in plan_calls] == [7, 8, 9]
    assert [c.ok for c in result.calls if c.step == "plan"] == [False, False, True]
    assert result.fallbacks == [] and len(result.sub_answers) == 4
    assert result.plan["attempts"] == 3 and "errors" not in result.plan
    assert result.rounds == 5  # three plan attempts, sub-answers, aggregation


async def test_plan_malformed_three_times_falls_back_to_rag(make_rag, settings) -> None:
    rag, engine = make_rag(scripted_responder({"sub_query_plan": "```\nnope\n```"}))
    result = await rag.answer(REASON_Q, force_type=T.REASON)
    assert settings.sampling.plan_retries == 2
    assert batch_kinds(engine) == [["sub_query_plan"]] * 3 + [["answer"]]
    assert result.fallbacks == ["reason: plan unparseable after 3 attempts -> rag"]
    assert len(result.plan["errors"]) == 3 and result.sub_answers == []
    assert result.answer == "A fake answer [1]." and len(result.passages) == 5


@pytest.mark.parametrize(
    "qtype,title",
    [
        (T.COMPARISON, "comparison_plan"),
        (T.EXPERIENCE, "keyword_plan"),
        (T.DEBATE, "debate_plan"),
        (T.INSTRUCTION, "sub_query_plan"),
    ],
)
async def test_every_typed_pipeline_falls_back_when_plans_fail(make_rag, qtype, title) -> None:
    rag, engine = make_rag(scripted_responder({title: "{}"}))
    result = await rag.answer(REASON_Q, force_type=qtype)
    assert len(engine.batches) == 4
    assert result.fallbacks == [f"{qtype.value.lower()}: plan unparseable after 3 attempts -> rag"]


async def test_empty_retrieval_answers_without_passages_and_records_it(make_rag) -> None:
    rag, engine = make_rag(retriever=EmptyRetriever())
    result = await rag.answer(REASON_Q, force_type=T.EVIDENCE_BASED)
    assert result.passages == [] and "References" not in user_text(engine.calls[0])
    assert result.fallbacks == [
        "retrieval: no passages for the question -> answered without passages"
    ]

    rag, engine = make_rag(scripted_responder({"sub_query_plan": FOUR}), retriever=EmptyRetriever())
    result = await rag.answer(REASON_Q, force_type=T.REASON)
    assert len(result.fallbacks) == 4 and result.rounds == 3


async def test_citation_numbers_match_prompts_and_passages(make_rag) -> None:
    rag, engine = make_rag(scripted_responder({"sub_query_plan": FOUR}, answer="See [2] and [99]."))
    result = await rag.answer(REASON_Q, force_type=T.REASON)
    numbers = [p.citation for p in result.passages]
    assert numbers == list(range(1, len(numbers) + 1))
    assert len({p.id for p in result.passages}) == len(numbers)  # one number per passage id
    prompts = "\n".join(user_text(r) for r in engine.batches[1])
    for p in result.passages:
        assert f"[{p.citation}] {p.title}\n{p.text}" in prompts
    for req, sub in zip(engine.batches[1], result.sub_answers, strict=True):
        assert sub.citations == [2]  # [99] was never shown, so it is not a citation
        assert f"### Question\n{sub.query}\n" in user_text(req)


async def test_llm_mode_retrieves_nothing(make_rag, retriever) -> None:
    rag, engine = make_rag(scripted_responder({"sub_query_plan": FOUR}))
    result = await rag.answer(REASON_Q, mode="llm", force_type=T.REASON)
    assert retriever.searches == [] and result.passages == []
    assert batch_kinds(engine) == [["answer"]] and result.mode == "llm"
    assert "References" not in user_text(engine.calls[0])


async def test_rag_mode_ignores_type(make_rag, retriever) -> None:
    rag, engine = make_rag(scripted_responder({"sub_query_plan": FOUR}))
    result = await rag.answer(REASON_Q, mode="rag", force_type=T.REASON)
    assert batch_kinds(engine) == [["answer"]] and result.type == "REASON"
    assert retriever.searches == [([REASON_Q], 5)]
    assert "### References\n[1] " in user_text(engine.calls[0])


async def test_sampling_settings_and_plan_budget_reach_requests(make_rag, settings) -> None:
    rag, engine = make_rag(scripted_responder({"sub_query_plan": FOUR}))
    await rag.answer(REASON_Q, force_type=T.REASON)
    plan, subs, final = engine.batches
    for req in engine.calls:
        assert (req.temperature, req.top_p, req.seed) == (0.8, 0.95, settings.sampling.seed)
    assert plan[0].max_tokens == settings.sampling.plan_max_tokens
    assert {r.max_tokens for r in subs} == {settings.sampling.sub_answer_max_tokens}
    assert final[0].max_tokens == 512
