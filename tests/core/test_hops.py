"""``method.resolve_hops``: a multi-hop question's chain is answered link by link first.

The pipeline tests run on the scripted fake engine and read what was searched, what the
links were asked and what reached the aggregator.
"""

from __future__ import annotations

import json

import pytest

from typed_rag.engines.base import ChatRequest
from typed_rag.engines.fake import scripted_responder
from typed_rag.json_reply import PlanError
from typed_rag.pipelines.decomposition import AGGREGATOR_SYSTEM, DecompositionPlan
from typed_rag.pipelines.hops import (
    HOP_ANSWER_RULE,
    HOP_ANSWER_TOKENS,
    HopPlan,
    fill,
    parse_hops,
    short_answer,
)
from typed_rag.types import QuestionType as T

Q = "Why did the founder of the company that makes the iPhone leave it in 1985?"
HOPS = ["Which company makes the iPhone?", "Who founded #1?", "Why did #2 leave #1 in 1985?"]
CHAIN = json.dumps({"hops": HOPS})
SUBS = ["founder leaving company 1985", "boardroom dispute 1985"]
PLAN = json.dumps({"sub_queries": SUBS})


def user_text(req: ChatRequest) -> str:
    return req.messages[-1]["content"]


def asked_link(req: ChatRequest) -> str | None:
    """The question of a link's request (the ones carrying the short-answer rule)."""
    text = user_text(req)
    if HOP_ANSWER_RULE not in text:
        return None
    return text.split("### Question\n", 1)[1].split("\n", 1)[0]


def link_answers(answers: dict[str, str]):
    def answer(req: ChatRequest) -> str:
        link = asked_link(req)
        return answers.get(link, "unknown") if link is not None else "Final answer [1]."

    return answer


# --- the chain ---------------------------------------------------------------------------


def test_parse_hops_reads_the_chain_and_tells_multi_hop_from_one_link() -> None:
    assert parse_hops(CHAIN).hops == HOPS
    assert parse_hops(CHAIN).multi_hop
    assert parse_hops('{"chain": ["a", "b", "c", "d", "e"]}').hops == ["a", "b", "c", "d"]
    assert not parse_hops('{"hops": ["Why is the sky blue?"]}').multi_hop
    # Links that never refer back are aspects, not a chain.
    assert not parse_hops('{"hops": ["what yeast does", "how warmth helps dough"]}').multi_hop
    with pytest.raises(PlanError):
        parse_hops('{"hops": []}')


def test_fill_writes_earlier_answers_and_drops_references_not_answered_yet() -> None:
    assert fill("Why did #2 leave #1 in 1985?", ["Apple", "Steve Jobs"]) == (
        "Why did Steve Jobs leave Apple in 1985?"
    )
    assert fill("Why did #2 leave #1?", ["Apple"]) == "Why did leave Apple?"


@pytest.mark.parametrize(
    "reply,expected",
    [
        ("Apple Inc. [1]", "Apple Inc"),
        ('"Steve Jobs".\nHe founded it in 1976 [2].', "Steve Jobs"),
        ("unknown", ""),
        ("Unknown.", ""),
        ("The references do not mention the founder.", ""),
        ("", ""),
        (" ".join(f"w{i}" for i in range(30)), " ".join(f"w{i}" for i in range(12))),
    ],
)
def test_short_answer_keeps_a_search_ready_phrase(reply: str, expected: str) -> None:
    assert short_answer(reply) == expected


# --- the pipeline ------------------------------------------------------------------------


async def test_links_are_answered_in_order_and_their_names_reach_search_and_aggregator(
    make_rag, settings, retriever
) -> None:
    settings.method.resolve_hops = True
    answers = {"Which company makes the iPhone?": "Apple [1]", "Who founded Apple?": "Steve Jobs"}
    rag, engine = make_rag(
        scripted_responder({"hop_plan": CHAIN, "sub_query_plan": PLAN}, link_answers(answers))
    )
    events = []
    result = await rag.answer(Q, force_type=T.REASON, on_event=events.append)

    links = [asked_link(r) for r in engine.calls if asked_link(r)]
    # The chain and each answered link are announced as they come (the demo shows them).
    announced = [(e.kind, e.data.get("step")) for e in events if e.kind != "type"]
    assert announced[:3] == [("plan", None), ("sub_answer", "hop"), ("sub_answer", "hop")]
    assert events[2].data["answer"] == "Apple" and events[2].data["total"] == 2
    assert links == ["Which company makes the iPhone?", "Who founded Apple?"]
    assert all(r.max_tokens == HOP_ANSWER_TOKENS for r in engine.calls if asked_link(r) is not None)
    # One link per round: the second is written from the first's answer.
    assert [c.step for c in result.calls].count("hop") == 2
    assert result.plan["hop_plan"]["hops"] == HOPS
    assert result.plan["hop_answers"] == [
        {"question": "Which company makes the iPhone?", "answer": "Apple"},
        {"question": "Who founded Apple?", "answer": "Steve Jobs"},
    ]
    searched = [q for queries, _ in retriever.searches for q in queries]
    assert searched[:2] == links
    assert searched[2:] == [
        *SUBS,
        "Why did Steve Jobs leave Apple in 1985?",
        f"{Q} Apple Steve Jobs",
    ]
    # The aggregator reads the answered links first, then the sub-queries' answers.
    final = engine.batches[-1][0]
    assert final.messages[0]["content"] == AGGREGATOR_SYSTEM
    text = user_text(final)
    assert "Question 1: Which company makes the iPhone?\nAnswer 1: Apple" in text
    assert "Question 2: Who founded Apple?\nAnswer 2: Steve Jobs" in text
    assert len(result.sub_answers) == 2 + len(SUBS) + 2
    assert "plan: hops resolved:" in DecompositionPlan.describe(result.plan)


async def test_a_chain_stopped_at_an_unknown_link_searches_the_next_link_with_what_it_has(
    make_rag, settings, retriever
) -> None:
    settings.method.resolve_hops = True
    answers = {"Which company makes the iPhone?": "Apple"}  # "Who founded Apple?": unknown
    rag, engine = make_rag(
        scripted_responder({"hop_plan": CHAIN, "sub_query_plan": PLAN}, link_answers(answers))
    )
    result = await rag.answer(Q, force_type=T.REASON)
    assert [h["answer"] for h in result.plan["hop_answers"]] == ["Apple"]
    searched = [q for queries, _ in retriever.searches for q in queries]
    assert searched[-2:] == ["Who founded Apple?", f"{Q} Apple"]


@pytest.mark.parametrize(
    "chain,first_answer",
    [
        (json.dumps({"hops": [Q]}), "Apple"),  # a chain of one
        (json.dumps({"hops": ["iPhone maker", "Jobs 1985"]}), "Apple"),  # no references
        (CHAIN, "unknown"),  # the first link goes unanswered
        ("not json", "Apple"),  # no chain at all
    ],
)
async def test_no_chain_leaves_the_decomposition_as_it_is(
    make_rag, settings, retriever, chain, first_answer
) -> None:
    settings.method.resolve_hops = True
    answers = {"Which company makes the iPhone?": first_answer}
    rag, engine = make_rag(
        scripted_responder({"hop_plan": chain, "sub_query_plan": PLAN}, link_answers(answers))
    )
    result = await rag.answer(Q, force_type=T.REASON)
    searched = [q for queries, _ in retriever.searches for q in queries]
    assert searched[-len(SUBS) :] == SUBS
    assert "hop_answers" not in result.plan
    assert len(result.sub_answers) == len(SUBS)
    # The same passages, numbers and final prompt as without the option.
    settings.method.resolve_hops = False
    rag, plain = make_rag(scripted_responder({"sub_query_plan": PLAN}, link_answers(answers)))
    without = await rag.answer(Q, force_type=T.REASON)
    assert result.passages == without.passages and result.answer == without.answer
    assert engine.batches[-1] == plain.batches[-1]


async def test_off_by_default_and_not_on_other_routes(make_rag, settings) -> None:
    rag, engine = make_rag(scripted_responder({"sub_query_plan": PLAN}))
    result = await rag.answer(Q, force_type=T.REASON)
    titles = [r.json_schema.get("title") for r in engine.calls if r.json_schema]
    assert HopPlan.title not in titles and "hop_plan" not in result.plan
    settings.method.resolve_hops = True
    rag, engine = make_rag()
    await rag.answer(Q, force_type=T.EVIDENCE_BASED)
    assert not [r for r in engine.calls if r.json_schema]


async def test_the_closed_book_draft_is_written_with_the_links_found(make_rag, settings) -> None:
    """REASON's draft (``own_knowledge = "draft"``) is asked after the links, with them."""
    settings.method.resolve_hops = True
    settings.method.own_knowledge = "draft"
    answers = {"Which company makes the iPhone?": "Apple", "Who founded Apple?": "Steve Jobs"}
    rag, engine = make_rag(
        scripted_responder({"hop_plan": CHAIN, "sub_query_plan": PLAN}, link_answers(answers))
    )
    result = await rag.answer(Q, force_type=T.REASON)
    steps = [c.step for c in result.calls]
    assert steps.count("draft") == 1 and steps.index("draft") > steps.index("hop")
    (draft,) = [r for r, c in zip(engine.calls, result.calls, strict=True) if c.step == "draft"]
    assert user_text(draft).endswith(
        "### Facts found\nWhich company makes the iPhone? Apple\nWho founded Apple? Steve Jobs"
        "\n\n### Answer\n"
    )


async def test_a_links_token_budget_never_exceeds_max_tokens(make_rag, settings) -> None:
    """Like every step's budget, a link's stays within ``sampling.max_tokens``."""
    settings.method.resolve_hops = True
    settings.sampling.max_tokens = 16
    answers = {"Which company makes the iPhone?": "Apple", "Who founded Apple?": "Steve Jobs"}
    rag, engine = make_rag(
        scripted_responder({"hop_plan": CHAIN, "sub_query_plan": PLAN}, link_answers(answers))
    )
    await rag.answer(Q, force_type=T.REASON)
    budgets = [r.max_tokens for r in engine.calls if asked_link(r) is not None]
    assert budgets == [16, 16]
