"""The method options of issue 15 (``method.*``), each on the scripted fake engine.

Every test reads what the engine was sent (the prompts) and what the trace
recorded, with the option on and, where it matters, off.
"""

from __future__ import annotations

import json
import re

import pytest
from pydantic import ValidationError

from tests.core.conftest import EmptyRetriever
from typed_rag.config import load_settings
from typed_rag.engines.base import ChatRequest
from typed_rag.engines.fake import scripted_responder
from typed_rag.finishing.echo import drop_prompt_echo
from typed_rag.finishing.finish import cut_answer, first_sentences, trim_to_sentence
from typed_rag.pipelines.debate import MEDIATOR_SYSTEM, QUESTION_VIEW
from typed_rag.pipelines.decomposition import AGGREGATOR_SYSTEM
from typed_rag.pipelines.grounding import DRAFT_QUERY_WORDS
from typed_rag.pipelines.prompting import (
    ANSWER_SHAPES,
    ANSWER_SYSTEM,
    CORE_DEFINITION,
    DIRECT_FIRST,
    DRAFT_CITE,
    DRAFT_USE,
    FACTOID_BRIEF,
    OWN_KNOWLEDGE,
    PROMPT_HEADINGS,
    STRICT_CITE_RULE,
    length_guidance,
    llm_messages,
)
from typed_rag.types import QuestionType as T

Q = "Why do leaves change color in autumn?"
SUBS = ["chlorophyll breakdown in autumn leaves", "carotenoids anthocyanins leaf color"]
PLAN = json.dumps({"sub_queries": SUBS})
DEBATE = json.dumps(
    {
        "debate_topic": "nuclear power",
        "dist_opinion": ["pro", "contra"],
        "sub_queries": {"pro": "nuclear power low carbon", "contra": "nuclear waste accident risk"},
    }
)
GUIDE = "### How to write the answer"


def user_text(req: ChatRequest) -> str:
    return req.messages[-1]["content"]


def final_request(engine) -> ChatRequest:
    return engine.batches[-1][0]


def set_method(settings, **values) -> None:
    for key, value in values.items():
        setattr(settings.method, key, value)


def set_factoid_draft(settings, **values) -> None:
    """The factoid route with its closed-book draft (the default's), plus ``values``."""
    set_method(settings, own_knowledge="draft", **values)
    settings.method = settings.method.model_validate(
        {**settings.method.model_dump(), "own_knowledge_types": "factoid"}
    )


def sub_answer_by_query(answers: dict[str, str], default: str = "Final answer [1].") -> object:
    """An answer responder that picks a reply by the sub-query in the prompt."""

    def answer(req: ChatRequest) -> str:
        text = user_text(req)
        if "### Question\n" in text:
            asked = text.split("### Question\n", 1)[1].split("\n", 1)[0]
            if asked in answers:
                return answers[asked]
        return default

    return answer


# --- settings ------------------------------------------------------------------------


def test_paper_profile_and_profile_fills_only_unset_options(settings) -> None:
    paper = settings.method.options()  # the test settings pin the paper's profile
    assert not paper.grounded_aggregation and not paper.answer_shapes
    assert paper.max_sub_queries == 5 and paper.experience_retrieval == "question"
    assert paper.experience_rerank == "keywords"
    assert paper.sub_answers == "generate" and paper.cite_min_share == 0.3

    improved = load_settings(None, **{"method.profile": "improved"}).method.options()
    assert improved.grounded_aggregation and improved.drop_uninformative
    assert improved.answer_shapes and improved.require_citations
    assert improved.max_sub_queries == 3 and improved.core_sub_questions == "definition"
    assert improved.post_cite and improved.cite_min_share == 0.7
    assert improved.cite_floor_share == 0.4 and paper.cite_floor_share is None
    # A floor at or above cite_min_share cites nothing more: recorded as off, so runs made
    # at 0.3 before the floor existed keep their fingerprint.
    at_03 = load_settings(None, **{"method.cite_min_share": 0.3}).method.options()
    assert at_03.cite_floor_share is None
    assert improved.direct_first == "off" and paper.direct_first == "off"
    assert improved.trim_cut_off and not paper.trim_cut_off and not paper.length_hint

    # An explicit value wins over the profile, whichever order they come in (--set strings).
    mixed = load_settings(
        None, **{"method.answer_shapes": "false", "method.profile": "improved"}
    ).method.options()
    assert mixed.answer_shapes is False and mixed.grounded_aggregation is True


def test_bad_method_values_are_rejected_by_name() -> None:
    with pytest.raises(ValidationError, match="max_sub_queries"):
        load_settings(None, **{"method.max_sub_queries": "9"})
    with pytest.raises(ValidationError, match="profile"):
        load_settings(None, **{"method.profile": "best"})
    with pytest.raises(ValidationError, match="experience_retrieval"):
        load_settings(None, **{"method.experience_retrieval": "titles"})


# --- 1. grounded aggregation -----------------------------------------------------------


async def test_paper_aggregator_sees_no_passages_and_no_guidance(make_rag) -> None:
    rag, engine = make_rag(scripted_responder({"sub_query_plan": PLAN}))
    await rag.answer(Q, force_type=T.REASON)
    agg = final_request(engine)
    assert agg.messages[0]["content"] == AGGREGATOR_SYSTEM
    assert "### References" not in user_text(agg) and GUIDE not in user_text(agg)


async def test_grounded_aggregator_sees_best_passages_with_global_numbers(
    make_rag, settings, reranker
) -> None:
    set_method(settings, grounded_aggregation=True, aggregation_passages=3)
    rag, engine = make_rag(scripted_responder({"sub_query_plan": PLAN}))
    result = await rag.answer(Q, force_type=T.REASON)
    text = user_text(final_request(engine))
    assert final_request(engine).messages[0]["content"] == AGGREGATOR_SYSTEM
    refs = text.split("### References\n", 1)[1].split("### Question-answer pairs", 1)[0]
    shown = [p for p in result.passages if f"[{p.citation}] {p.title}\n{p.text}" in refs]
    assert len(shown) == 3  # aggregation_passages, out of the sub-answers' pool
    assert len(result.passages) > 3
    # Numbered as in the sub-answers' prompts, and picked against the original question.
    assert reranker.queries[-1] == Q
    assert {p.title for p in shown} >= {"Autumn leaf color"}
    assert "leave out every claim that no reference supports" in text
    for sub in result.sub_answers:  # the pairs are still there
        assert f"Question {SUBS.index(sub.query) + 1}: {sub.query}" in text
        assert sub.passages and set(sub.passages) <= {p.citation for p in result.passages}


async def test_a_method_profile_view_shares_the_components(make_rag) -> None:
    """An evaluation's ``typed-rag@improved`` answers with the profile on the same parts."""
    rag, engine = make_rag(scripted_responder({"sub_query_plan": PLAN}))
    improved = rag.with_method_profile("improved")
    assert improved.engine is engine and improved.retriever is rag.retriever
    assert improved.settings.method.options().grounded_aggregation
    assert not rag.settings.method.options().grounded_aggregation  # the original is unchanged
    await improved.answer(Q, force_type=T.REASON)
    assert "### References" in user_text(final_request(engine))


async def test_grounded_mediator_sees_passages(make_rag, settings) -> None:
    set_method(settings, grounded_aggregation=True)
    rag, engine = make_rag(scripted_responder({"debate_plan": DEBATE}))
    result = await rag.answer("Should countries build nuclear power plants?", force_type=T.DEBATE)
    med = final_request(engine)
    assert med.messages[0]["content"] == MEDIATOR_SYSTEM
    assert "### References\n[" in user_text(med) and "(perspective: contra)" in user_text(med)
    assert any(p.title.startswith("Nuclear power") for p in result.passages)


# --- 2. uninformative sub-answers ------------------------------------------------------


async def test_uninformative_sub_answers_are_dropped_and_traced(make_rag, settings) -> None:
    set_method(settings, drop_uninformative=True)
    replies = {
        SUBS[0]: "Chlorophyll breaks down as days shorten, revealing yellow pigments [1].",
        SUBS[1]: "The references do not mention carotenoids.",
    }
    rag, engine = make_rag(
        scripted_responder({"sub_query_plan": PLAN}, answer=sub_answer_by_query(replies))
    )
    result = await rag.answer(Q, force_type=T.REASON)
    assert [s.dropped for s in result.sub_answers] == [None, "no-information"]
    agg = user_text(final_request(engine))
    assert replies[SUBS[0]] in agg and replies[SUBS[1]] not in agg and SUBS[1] not in agg
    assert result.fallbacks == [] and result.calls[-1].step == "aggregate"


async def test_paper_default_keeps_uninformative_sub_answers(make_rag) -> None:
    replies = {SUBS[1]: "The references do not mention carotenoids."}
    rag, engine = make_rag(
        scripted_responder({"sub_query_plan": PLAN}, answer=sub_answer_by_query(replies))
    )
    result = await rag.answer(Q, force_type=T.REASON)
    assert replies[SUBS[1]] in user_text(final_request(engine))
    assert all(s.dropped is None for s in result.sub_answers)


async def test_all_sub_answers_empty_answers_like_rag_over_the_pool(make_rag, settings) -> None:
    set_method(settings, drop_uninformative=True)
    replies = {SUBS[0]: "", SUBS[1]: "Carotenoids anthocyanins leaf color\n\nReferences:\n[3]"}
    rag, engine = make_rag(
        scripted_responder({"sub_query_plan": PLAN}, answer=sub_answer_by_query(replies))
    )
    result = await rag.answer(Q, force_type=T.REASON, top_k=2)
    assert [s.dropped for s in result.sub_answers] == ["empty", "restates-query"]
    final = final_request(engine)
    assert final.messages[0]["content"] == ANSWER_SYSTEM
    text = user_text(final)
    assert f"### Question\n{Q}\n" in text and "### References\n[" in text
    assert text.count("\n[") == 2  # top_k of the pooled passages, global numbers
    assert result.calls[-1].step == "answer"
    assert result.fallbacks == [
        "aggregate: every sub-answer carried no information -> rag over the pooled passages"
    ]


async def test_debate_drops_a_perspective_that_restates_its_query(make_rag, settings) -> None:
    set_method(settings, drop_uninformative=True)
    replies = {
        "nuclear power low carbon": "Nuclear power low carbon\n\nReferences:\n[6]",
        "nuclear waste accident risk": "Opponents cite waste storage and accident risk [2].",
    }
    rag, engine = make_rag(
        scripted_responder({"debate_plan": DEBATE}, answer=sub_answer_by_query(replies))
    )
    result = await rag.answer("Should countries build nuclear power plants?", force_type=T.DEBATE)
    assert [s.dropped for s in result.sub_answers] == ["restates-query", None]
    med = user_text(final_request(engine))
    assert "(perspective: pro)" not in med and "(perspective: contra)" in med


@pytest.mark.parametrize("route", ["mediator", "reason"])
async def test_debate_route_picks_the_mediator_or_reasons_pipeline(
    make_rag, settings, route
) -> None:
    set_method(settings, debate_route=route, answer_shapes=True)
    rag, engine = make_rag(scripted_responder({"debate_plan": DEBATE, "sub_query_plan": PLAN}))
    result = await rag.answer("Should countries build nuclear power plants?", force_type=T.DEBATE)
    final = engine.batches[-1][0]
    if route == "reason":
        # Answered as REASON throughout: its plan, aggregator and shape; the trace keeps DEBATE.
        assert (result.type, result.routed_type, result.type_source) == (
            "REASON",
            "DEBATE",
            "forced",
        )
        assert result.plan["sub_queries"] == SUBS and "debate_topic" not in result.plan
        assert final.messages[0]["content"] == AGGREGATOR_SYSTEM
        assert ANSWER_SHAPES["REASON"] in user_text(final)
    else:
        assert (result.type, result.routed_type) == ("DEBATE", None)
        assert result.plan["debate_topic"] == "nuclear power"
        assert final.messages[0]["content"] == MEDIATOR_SYSTEM
    # Only typed-rag is routed: the baselines keep the type they report.
    rag_result = await rag.answer("Should we?", mode="rag", force_type=T.DEBATE)
    assert (rag_result.type, rag_result.routed_type) == ("DEBATE", None)


def test_debate_route_is_the_mediator_unless_set() -> None:
    assert load_settings(None).method.options().debate_route == "mediator"
    chosen = load_settings(None, **{"method.debate_route": "reason"}).method.options()
    assert chosen.debate_route == "reason"
    with pytest.raises(ValidationError, match="debate_route"):
        load_settings(None, **{"method.debate_route": "reasons"})


# --- 3. answer shapes ------------------------------------------------------------------


@pytest.mark.parametrize(
    "qtype,title,plan",
    [
        (T.INSTRUCTION, "sub_query_plan", PLAN),
        (T.REASON, "sub_query_plan", PLAN),
        (T.DEBATE, "debate_plan", DEBATE),
        (T.COMPARISON, None, None),
        (T.EXPERIENCE, None, None),
    ],
)
async def test_answer_shape_per_type_reaches_the_final_prompt(
    make_rag, settings, qtype, title, plan
) -> None:
    set_method(settings, answer_shapes=True)
    rag, engine = make_rag(scripted_responder({title: plan} if title else None))
    result = await rag.answer(Q, force_type=qtype)
    text = user_text(final_request(engine))
    section = text.split(GUIDE, 1)[1]
    assert ANSWER_SHAPES[qtype.value] in section and section.rstrip().endswith("### Answer")
    # The shape is for the final answer only: sub-answer and plan prompts have none.
    assert all(GUIDE not in user_text(r) for b in engine.batches[:-1] for r in b)
    assert result.fallbacks == []


@pytest.mark.parametrize(
    "qtype,title,plan",
    [
        (T.DEBATE, "debate_plan", DEBATE),
        (T.REASON, "sub_query_plan", PLAN),
        (T.COMPARISON, None, None),
    ],
)
@pytest.mark.parametrize("direct", ["off", "debate", "all"])
async def test_direct_first_comes_before_the_shape(
    make_rag, settings, qtype, title, plan, direct
) -> None:
    set_method(settings, answer_shapes=True, direct_first=direct)
    rag, engine = make_rag(scripted_responder({title: plan} if title else None))
    await rag.answer(Q, force_type=qtype)
    section = user_text(final_request(engine)).split(GUIDE, 1)[1]
    if direct == "all" or (direct == "debate" and qtype == T.DEBATE):
        assert section.index(DIRECT_FIRST) < section.index(ANSWER_SHAPES[qtype.value])
    else:
        assert DIRECT_FIRST not in section


@pytest.mark.parametrize(
    "qtype,title,plan", [(T.DEBATE, "debate_plan", DEBATE), (T.REASON, "sub_query_plan", PLAN)]
)
@pytest.mark.parametrize("setting", ["off", "debate", "all"])
async def test_question_sub_query_is_searched_and_reaches_the_final_step(
    make_rag, settings, qtype, title, plan, setting
) -> None:
    set_method(settings, question_sub_query=setting)
    rag, engine = make_rag(
        scripted_responder({title: plan}, answer=sub_answer_by_query({Q: "Direct reply [1]."}))
    )
    result = await rag.answer(Q, force_type=qtype)
    queries = [s.query for s in result.sub_answers]
    on = setting == "all" or (setting == "debate" and qtype == T.DEBATE)
    if on:
        assert queries[0] == Q and len(queries) == 3
        assert result.plan["question_searched"] is True
        assert "Direct reply [1]." in user_text(final_request(engine))
        if qtype == T.DEBATE:
            assert result.sub_answers[0].perspective == QUESTION_VIEW
    else:
        assert Q not in queries and len(queries) == 2 and "question_searched" not in result.plan
        assert "Direct reply" not in user_text(final_request(engine))


def cut_at(engine, words: int) -> None:
    """Make ``engine`` honour a cap of ``words`` words on free-text replies, as a real one
    honours ``max_tokens``: the reply is cut and reported as ``length``."""
    generate = engine.generate

    async def cutting(requests):
        out = await generate(requests)
        for req, res in zip(requests, out, strict=True):
            if req.json_schema is None and len(res.text.split()) > words:
                res.text, res.finish_reason = " ".join(res.text.split()[:words]), "length"
        return out

    engine.generate = cutting


@pytest.mark.parametrize("trim", [False, True])
async def test_trim_cut_off_ends_a_cut_answer_at_its_last_sentence(
    make_rag, settings, trim
) -> None:
    set_method(settings, trim_cut_off=trim)
    long = "Coffee helps focus [1]. Tea calms the mind [2]. Both are fine in small amounts."
    rag, engine = make_rag(lambda req: "{}" if req.json_schema else long)
    cut_at(engine, 10)
    result = await rag.answer(Q, force_type=T.EVIDENCE_BASED)
    assert result.finish_reason == "length"
    if trim:
        assert result.answer == "Coffee helps focus [1]. Tea calms the mind [2]."
        assert result.trimmed and result.citations == [1, 2]
    else:
        assert result.answer.endswith("Both") and not result.trimmed


@pytest.mark.parametrize(
    "text,expected",
    [
        ("The ore is uraninite [3]. It is mined in", "The ore is uraninite [3]."),
        (
            "1. Remove the wheel.\n2. Find the hole [2].\n3. Pat",
            "1. Remove the wheel.\n2. Find the hole [2].",
        ),
        ('He said "stop." Then he', 'He said "stop."'),
        ("Costs rose 3.5 percent in 1998. The", "Costs rose 3.5 percent in 1998."),
        # An initial's full stop ends no sentence: the cut never leaves "John F." at the end.
        ("He left [1]. He met John F. Ken", "He left [1]."),
        ("no sentence ends here", "no sentence ends here"),
    ],
)
def test_trim_to_sentence(text: str, expected: str) -> None:
    assert trim_to_sentence(text) == expected


@pytest.mark.parametrize("hint", [False, True])
async def test_length_hint_states_the_budget_in_the_final_prompt_only(
    make_rag, settings, hint
) -> None:
    set_method(settings, length_hint=hint)
    settings.sampling.max_tokens = 300
    rag, engine = make_rag(scripted_responder({"sub_query_plan": PLAN}))
    await rag.answer(Q, force_type=T.REASON)
    line = length_guidance(300)
    assert "under about 150 words" in line
    assert (line in user_text(final_request(engine))) is hint
    assert all(line not in user_text(r) for b in engine.batches[:-1] for r in b)


@pytest.mark.parametrize(
    "setting,mode",
    [
        ("off", "off"),
        ("allow", "allow"),
        ("draft", "draft"),
        ("draft:reason", "draft"),
        ("draft-cite", "draft-cite"),
        ("draft:debate,comparison", "off"),
    ],
)
async def test_own_knowledge_allows_or_drafts_a_closed_book_answer_first(
    make_rag, settings, setting, mode
) -> None:
    own, _, types = setting.partition(":")
    set_method(settings, own_knowledge=own)
    if types:
        settings.method = settings.method.model_validate(
            {**settings.method.model_dump(), "own_knowledge_types": types}
        )
    closed_book = llm_messages(Q)[-1]["content"]

    def answer(req: ChatRequest) -> str:
        return "Chlorophyll fades in the cold." if user_text(req) == closed_book else "Final [1]."

    rag, engine = make_rag(scripted_responder({"sub_query_plan": PLAN}, answer))
    result = await rag.answer(Q, force_type=T.REASON)
    final = user_text(final_request(engine))
    drafted = [r for b in engine.batches for r in b if user_text(r) == closed_book]
    drafting = mode in ("draft", "draft-cite")
    assert len(drafted) == (1 if drafting else 0)
    assert (OWN_KNOWLEDGE in final) is (mode != "off")
    assert (DRAFT_USE in final) is (mode == "draft")
    assert (DRAFT_CITE in final) is (mode == "draft-cite")
    if drafting:
        # the draft sits before the guidance, which sits before the closing heading
        assert final.index("Chlorophyll fades") < final.index(GUIDE) < final.rindex("### ")
        assert result.plan["draft"] == "Chlorophyll fades in the cold."
        assert [c.step for c in result.calls].count("draft") == 1
        # the draft has its own budget (the user reads the final answer, not the draft)
        s = settings.sampling
        assert drafted[0].max_tokens == min(s.draft_max_tokens, s.max_tokens) < s.max_tokens
    else:
        assert "draft" not in result.plan and "Chlorophyll" not in final


@pytest.mark.parametrize("types,drafting", [("reason", False), ("reason,factoid", True)])
async def test_the_factoid_route_drafts_only_when_listed_and_rag_mode_never(
    make_rag, settings, types, drafting
) -> None:
    set_method(settings, own_knowledge="draft")
    settings.method = settings.method.model_validate(
        {**settings.method.model_dump(), "own_knowledge_types": types}
    )
    closed_book = llm_messages(Q)[-1]["content"]

    def answer(req: ChatRequest) -> str:
        return "Chlorophyll fades in the cold." if user_text(req) == closed_book else "Final [1]."

    rag, engine = make_rag(scripted_responder({}, answer))
    result = await rag.answer(Q, force_type=T.FACTOID)
    final = user_text(final_request(engine))
    assert ("Chlorophyll fades" in final) is drafting
    assert (DRAFT_USE in final) is drafting
    assert ("draft" in result.plan) is drafting
    # The RAG baseline is the paper's prompt whatever the typed routes do.
    baseline = await rag.answer(Q, mode="rag")
    assert "draft" not in baseline.plan
    assert "Chlorophyll" not in user_text(final_request(engine))


@pytest.mark.parametrize("brief", [False, True])
async def test_factoid_brief_asks_the_factoid_route_only_for_a_short_answer(
    make_rag, settings, brief
) -> None:
    set_factoid_draft(settings, factoid_brief=brief)
    rag, engine = make_rag(scripted_responder({}, lambda req: "Final [1]."))
    await rag.answer(Q, force_type=T.FACTOID)
    final = user_text(final_request(engine))
    assert (FACTOID_BRIEF in final) is brief
    assert DRAFT_USE in final  # alongside the draft's guidance, not instead of it
    assert final.index(GUIDE) < final.rindex("### Answer")
    # Neither the other routes nor the RAG baseline are asked for it.
    for kwargs in ({"force_type": T.EVIDENCE_BASED}, {"mode": "rag"}):
        await rag.answer(Q, **kwargs)
        assert FACTOID_BRIEF not in user_text(final_request(engine))


@pytest.mark.parametrize("guidance", [False, True])
async def test_factoid_guidance_gives_the_factoid_route_the_typed_final_guidance(
    make_rag, settings, guidance
) -> None:
    set_factoid_draft(
        settings,
        core_sub_questions="definition",
        require_citations=True,
        factoid_brief=True,
        factoid_guidance=guidance,
    )
    rag, engine = make_rag(scripted_responder({}, lambda req: "Final [1]."))
    await rag.answer(Q, force_type=T.FACTOID)
    final = user_text(final_request(engine))
    assert (CORE_DEFINITION in final) is guidance
    assert (STRICT_CITE_RULE in final) is guidance
    # the draft, its guidance and factoid_brief's line either way, once each
    assert final.count(DRAFT_USE) == final.count(FACTOID_BRIEF) == final.count(GUIDE) == 1


@pytest.mark.parametrize("cap", [None, 1, 2])
async def test_factoid_sentences_keeps_the_first_sentences_of_factoid_route_answers(
    make_rag, settings, cap
) -> None:
    set_method(settings, factoid_sentences=cap)
    text = "It is the crust [1]. The draft answer is correct.\n\n1. Rocks [2]. 2. Crystals."
    rag, _ = make_rag(scripted_responder({}, lambda req: text))
    result = await rag.answer(Q, force_type=T.FACTOID)
    expected = {None: text, 1: "It is the crust [1].", 2: text.split("\n\n")[0]}[cap]
    assert result.answer == expected
    assert result.shortened is (cap is not None)
    assert result.citations == ([1] if cap else [1, 2])
    # Only the factoid route: a typed pipeline's answer keeps every sentence.
    evidence = await rag.answer(Q, force_type=T.EVIDENCE_BASED)
    assert evidence.answer == text and not evidence.shortened


@pytest.mark.parametrize(
    "text,n,expected",
    [
        ("One [1]. Two. Three.", 2, "One [1]. Two."),
        ("One. Two.", 2, "One. Two."),
        ("Some include [2]:\n1. A thing. More.\n2. B.", 1, "Some include [2]:\n1. A thing."),
        ("Costs rose 3.5 percent. Then fell.", 1, "Costs rose 3.5 percent."),
        ("no sentence ends here", 1, "no sentence ends here"),
    ],
)
def test_first_sentences(text: str, n: int, expected: str) -> None:
    assert first_sentences(text, n) == expected


ANSWER = "The seven wonders include the Great Pyramid of Giza [1] and the Lighthouse of Alexandria."
GUIDANCE_ECHO = "### How to write the answer\n- The draft above was written from memory."


@pytest.mark.parametrize(
    "text,expected",
    [
        (f"{ANSWER}\n\n{GUIDANCE_ECHO}", ANSWER),
        (f"{ANSWER}\n\n### References:\n[1] A made-up entry.", ANSWER),
        (f"### Question\nWhat are they?\n\n### Answer\n{ANSWER}", ANSWER),
        (f"### Original question\nWhat?\n\n### Answer:\n{ANSWER}\n\n{GUIDANCE_ECHO}", ANSWER),
        (f"{ANSWER}\n\n**References:**\n[1] Smith, J. (2010). Leeches.", ANSWER),
        (f"{ANSWER}\n\nReferences:\n[1][2]", ANSWER),
        # a line without "#" is a heading only when it is nothing but a heading's name
        (f"{ANSWER}\n\nReferences [1]: Obstetrics\nAnswering it took {ANSWER}", None),
        # a copied prompt and no answer heading: where the answer starts is not known
        (f"### Question\nWhat are they?\n\n{ANSWER}", None),
        (f"**Question:**\nWhat are they?\n\n**Responses:**\n- {ANSWER}", None),
        (f"### Draft answer from memory\n{ANSWER}\n\n{GUIDANCE_ECHO}", None),
        # nothing but a restated question before the copied heading
        (f"**Question**: What are they?\n\n### Debate topic: x\n{ANSWER}", None),
        # too little before the copied heading: it opens the answer's own content
        (f"One wonder [1].\n\n### References\n{ANSWER}", None),
        # the answer's own headings stay
        (f"### Perspective 1\n{ANSWER}\n### Question 2: why?\n{ANSWER}", None),
    ],
)
def test_drop_prompt_echo(text: str, expected: str | None) -> None:
    assert drop_prompt_echo(text) == (text if expected is None else expected)


def test_cut_answer_trims_only_an_end_the_echo_left() -> None:
    cut_off = f"{ANSWER} Then the"
    # a copied section took the cut-off end with it: nothing more is trimmed
    cut = cut_answer(f"{ANSWER} More\n\n{GUIDANCE_ECHO} And", drop_echo=True, cut_off=True)
    assert cut.answer == f"{ANSWER} More" and cut.unechoed and not cut.trimmed
    # a copied opening leaves the cut-off end: it is trimmed
    cut = cut_answer(f"### Question\nWhat?\n### Answer\n{cut_off}", drop_echo=True, cut_off=True)
    assert cut.answer == ANSWER and cut.unechoed and cut.trimmed
    assert cut_answer(cut_off, drop_echo=False, cut_off=True).answer == ANSWER
    off = cut_answer(f"{ANSWER}\n\n{GUIDANCE_ECHO}", drop_echo=False, cut_off=False)
    assert off.answer == f"{ANSWER}\n\n{GUIDANCE_ECHO}" and not off.unechoed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The draft answer was incorrect. It is the crust [1].", "It is the crust [1]."),
        (
            "It is the crust [1].\n\nThe draft answer is consistent with it [1]. Rock [2].",
            "It is the crust [1]. Rock [2].",
        ),
        ("Steps:\n1. Dig [1].\n- The draft answers were checked.\n2. Sift.", None),
        ("Only men register for the draft [1]. It held [2].", None),  # the word, not the draft
        ("The draft answer is correct.", None),  # nothing would be left
    ],
)
def test_drop_draft_talk(text: str, expected: str | None) -> None:
    from typed_rag.finishing.finish import drop_draft_talk

    if text.startswith("Steps"):
        expected = "Steps:\n1. Dig [1].\n2. Sift."
    assert drop_draft_talk(text) == (text if expected is None else expected)


@pytest.mark.parametrize("drop", [False, True])
async def test_drop_draft_talk_cuts_answers_written_from_a_draft(make_rag, settings, drop) -> None:
    set_method(settings, own_knowledge="draft", drop_draft_talk=drop)
    settings.method = settings.method.model_validate(
        {**settings.method.model_dump(), "own_knowledge_types": "REASON"}
    )
    text = f"{ANSWER} The draft answer was right."
    rag, _ = make_rag(scripted_responder({"sub_query_plan": PLAN}, lambda req: text))
    reason = await rag.answer(Q, force_type=T.REASON)
    assert reason.answer == (ANSWER if drop else text) and reason.undrafted is drop
    debate = await rag.answer(Q, force_type=T.DEBATE)  # no draft: nothing to talk about
    assert "The draft answer" in debate.answer and not debate.undrafted


COPIED = "[3] Malta\nMalta is an island country in the Mediterranean Sea."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f"It is Vatican City [1].\n\n{COPIED}\n\n[1] Monaco is second.",
            "It is Vatican City [1].",
        ),
        # the lead-in goes with the copies; the model's own paragraph after them stays
        (
            f"It is L [1].\n\nAs the references say:\n\n{COPIED}\n\nL is fifty [2].",
            "It is L [1].\n\nL is fifty [2].",
        ),
        (f"{COPIED}\n\nMore [1].", None),  # the first paragraph is the answer's own
        ("It is L.\n\n[1][2]", None),  # bare markers are no copy (post_cite drops them)
        ("Steps:\n\n1. Dig [1].\n\n2. Sift [2].", None),
    ],
)
def test_drop_passage_copies(text: str, expected: str | None) -> None:
    from typed_rag.finishing.echo import drop_passage_copies

    assert drop_passage_copies(text) == (text if expected is None else expected)


@pytest.mark.parametrize("drop", [False, True])
@pytest.mark.parametrize(
    ("option", "flag", "extra"),
    [
        ("drop_passage_copies", "uncopied", COPIED),
        ("drop_repeats", "unrepeated", ANSWER),
        ("drop_source_talk", "unsourced", "This is supported by the references [1] and [2]."),
    ],
)
async def test_finishing_cut_changes_typed_answers_only(
    make_rag, settings, drop, option, flag, extra
) -> None:
    set_method(settings, **{option: drop})
    text = f"{ANSWER}\n\n{extra}"
    rag, _ = make_rag(scripted_responder({}, lambda req: text))
    result = await rag.answer(Q, force_type=T.FACTOID)
    assert result.answer == (ANSWER if drop else text) and getattr(result, flag) is drop
    baseline = await rag.answer(Q, mode="rag")
    assert baseline.answer == text and not getattr(baseline, flag)


@pytest.mark.parametrize("drop", [False, True])
async def test_drop_echo_cuts_typed_answers_only(make_rag, settings, drop) -> None:
    set_method(settings, drop_echo=drop)
    text = f"{ANSWER}\n\n{GUIDANCE_ECHO}"
    rag, _ = make_rag(scripted_responder({}, lambda req: text))
    for qtype in (T.FACTOID, T.REASON, T.DEBATE):
        result = await rag.answer(Q, force_type=qtype)
        assert result.answer == (ANSWER if drop else text)
        assert result.unechoed is drop
    baseline = await rag.answer(Q, mode="rag")
    assert baseline.answer == text and not baseline.unechoed


@pytest.mark.parametrize("labels", ["responses", "perspectives"])
async def test_prompt_headings_name_every_final_prompt_section(make_rag, settings, labels) -> None:
    """``method.drop_echo`` knows a copied section by these names: a final prompt with a new
    heading must add it."""
    set_method(
        settings,
        own_knowledge="draft",
        grounded_aggregation=True,
        sub_answers="generate",
        mediator_labels=labels,
    )
    settings.method = settings.method.model_validate(
        {**settings.method.model_dump(), "own_knowledge_types": list(T)}
    )
    rag, engine = make_rag(scripted_responder({}, lambda req: "Final [1]."))
    seen: set[str] = set()
    for qtype in T:
        await rag.answer(Q, force_type=qtype)
        seen |= set(re.findall(r"^### (.+)$", user_text(final_request(engine)), re.M))
    assert {"Question", "References", "Answer", "Debate topic", labels.title()} <= seen
    assert seen <= set(PROMPT_HEADINGS)


@pytest.mark.parametrize("draft_query", [False, True])
async def test_draft_query_searches_the_question_with_its_draft_written_once(
    make_rag, settings, retriever, draft_query
) -> None:
    set_factoid_draft(settings, draft_query=draft_query)
    closed_book = llm_messages(Q)[-1]["content"]
    draft = "Chlorophyll breaks down in autumn, revealing carotenoids. " + "More words. " * 40

    def answer(req: ChatRequest) -> str:
        return draft if user_text(req) == closed_book else "Final [1]."

    rag, engine = make_rag(scripted_responder({}, answer))
    result = await rag.answer(Q, force_type=T.FACTOID)
    (queries, _), *_ = retriever.searches
    searched = queries[0]
    assert [c.step for c in result.calls].count("draft") == 1  # written once either way
    assert "Chlorophyll breaks down" in user_text(final_request(engine))
    if draft_query:
        assert searched.startswith(Q + " Chlorophyll breaks down")
        assert len(searched.split()) == len(Q.split()) + DRAFT_QUERY_WORDS  # the draft is cut
        assert result.plan["draft_query"] == searched
        assert {p.query for p in result.passages} == {searched}
    else:
        assert searched == Q and "draft_query" not in result.plan
    # A type the draft does not apply to searches the question alone.
    retriever.searches.clear()
    await rag.answer(Q, force_type=T.EVIDENCE_BASED)
    assert retriever.searches[0][0] == [Q]


@pytest.mark.parametrize("on", [False, True])
async def test_draft_sub_query_adds_the_question_with_its_draft_as_one_more_sub_query(
    make_rag, settings, retriever, on
) -> None:
    """REASON with its draft: ``draft_sub_query`` writes the draft before retrieval and
    searches the question plus the draft's first words after the planned sub-queries; the
    draft is still written once and still reaches the final prompt. The factoid route does
    not search with its draft unless ``draft_query`` says so."""
    set_method(settings, own_knowledge="draft", draft_sub_query=on)
    closed_book = llm_messages(Q)[-1]["content"]
    draft = "Chlorophyll breaks down in autumn, revealing carotenoids. " + "More words. " * 40

    def answer(req: ChatRequest) -> str:
        return draft if user_text(req) == closed_book else "Final [1]."

    rag, engine = make_rag(scripted_responder({"sub_query_plan": PLAN}, answer))
    result = await rag.answer(Q, force_type=T.REASON)
    searched = [q for queries, _ in retriever.searches for q in queries]
    assert [c.step for c in result.calls].count("draft") == 1
    assert "Chlorophyll breaks down" in user_text(final_request(engine))
    if on:
        assert searched[-1] == result.plan["draft_query"]
        assert searched[-1].startswith(Q + " Chlorophyll breaks down")
        assert searched[:-1] == SUBS and len(result.sub_answers) == len(SUBS) + 1
    else:
        assert searched == SUBS and "draft_query" not in result.plan
    retriever.searches.clear()
    await rag.answer(Q, force_type=T.FACTOID)
    assert retriever.searches[0][0] == [Q]


async def test_plain_types_get_no_shape(make_rag, settings) -> None:
    set_method(settings, answer_shapes=True)
    rag, engine = make_rag()
    await rag.answer(Q, force_type=T.EVIDENCE_BASED)
    assert GUIDE not in user_text(final_request(engine))


# --- 4. experience retrieval -------------------------------------------------------------


@pytest.mark.parametrize(
    "by,queries",
    [
        ("question", ["What is it like to travel Europe cheaply?"]),
        ("keywords", ["backpacking hostels"]),
        ("both", ["What is it like to travel Europe cheaply?", "backpacking hostels"]),
    ],
)
async def test_experience_retrieves_with_question_keywords_or_both(
    make_rag, settings, retriever, reranker, by, queries
) -> None:
    set_method(settings, experience_retrieval=by)
    plan = json.dumps({"keywords": ["backpacking", "hostels"]})
    rag, _ = make_rag(scripted_responder({"keyword_plan": plan}))
    result = await rag.answer(
        "What is it like to travel Europe cheaply?", top_k=2, force_type=T.EXPERIENCE
    )
    assert retriever.searches == [(queries, settings.retrieval.experience_pool)]
    assert reranker.queries == ["backpacking hostels"]
    assert result.passages[0].id == "p12"
    assert result.passages[0].query in queries


@pytest.mark.parametrize(
    "by,query",
    [
        ("keywords", "backpacking hostels"),
        ("question", "What is it like to travel Europe cheaply?"),
        ("both", "What is it like to travel Europe cheaply? backpacking hostels"),
    ],
)
async def test_experience_reranks_against_keywords_question_or_both(
    make_rag, settings, reranker, by, query
) -> None:
    set_method(settings, experience_rerank=by)
    plan = json.dumps({"keywords": ["backpacking", "hostels"]})
    rag, _ = make_rag(scripted_responder({"keyword_plan": plan}))
    await rag.answer("What is it like to travel Europe cheaply?", top_k=2, force_type=T.EXPERIENCE)
    assert reranker.queries == [query]


# --- 5. core sub-questions -----------------------------------------------------------


async def test_core_definition_adds_guidance_without_a_call(make_rag, settings) -> None:
    set_method(settings, core_sub_questions="definition")
    rag, engine = make_rag(scripted_responder({"sub_query_plan": PLAN}))
    result = await rag.answer(Q, force_type=T.REASON)
    assert CORE_DEFINITION in user_text(final_request(engine)).split(GUIDE, 1)[1]
    assert result.rounds == 3


async def test_core_listed_asks_once_and_names_them(make_rag, settings) -> None:
    set_method(settings, core_sub_questions="listed")
    core = ["why does chlorophyll break down", "which pigments give autumn colors"]
    plans = {"sub_query_plan": PLAN, "core_sub_questions": json.dumps({"sub_questions": core})}
    rag, engine = make_rag(scripted_responder(plans))
    result = await rag.answer(Q, force_type=T.REASON)
    titles = [b[0].json_schema["title"] for b in engine.batches if b[0].json_schema]
    assert titles == ["sub_query_plan", "core_sub_questions"]
    guide = user_text(final_request(engine)).split(GUIDE, 1)[1]
    assert f"1. {core[0]}" in guide and f"2. {core[1]}" in guide
    assert result.plan["core_sub_questions"] == core and result.rounds == 4
    assert [c.step for c in result.calls].count("core-plan") == 1


async def test_core_listed_reuses_augmentation_and_falls_back_to_definition(
    make_rag, settings
) -> None:
    set_method(settings, core_sub_questions="listed")
    settings.augment.types = ["EVIDENCE-BASED"]
    rag, engine = make_rag()
    result = await rag.answer(Q, force_type=T.EVIDENCE_BASED)
    assert result.plan["augmented"] is True and result.rounds == 2  # no second core plan
    assert "1. what happens to chlorophyll in autumn" in user_text(final_request(engine))

    settings.augment.types = []
    rag, engine = make_rag(scripted_responder({"sub_query_plan": PLAN, "core_sub_questions": "[]"}))
    result = await rag.answer(Q, force_type=T.REASON)
    assert CORE_DEFINITION in user_text(final_request(engine))
    assert result.fallbacks[-1].startswith("core sub-questions: unparseable after 3 attempts")


# --- 6. citations --------------------------------------------------------------------


async def test_citations_are_checked_in_every_mode_and_stripped_only_when_set(
    make_rag, settings
) -> None:
    rag, _ = make_rag(scripted_responder(answer="Leaves turn [1, 42]. Pigments [2]."))
    result = await rag.answer(Q, mode="rag")
    assert result.citations == [1, 2] and result.invalid_citations == [42]
    assert result.answer == "Leaves turn [1, 42]. Pigments [2]."  # flagged, not changed

    set_method(settings, strip_invalid_citations=True)
    result = await rag.answer(Q, mode="rag")  # the rag baseline is never changed
    assert "[1, 42]" in result.answer
    result = await rag.answer(Q, force_type=T.EVIDENCE_BASED)
    assert result.answer == "Leaves turn [1]. Pigments [2]." and result.invalid_citations == [42]

    events = [e async for e in rag.answer_stream(Q, force_type=T.EVIDENCE_BASED)]
    streamed = "".join(e for e in events if isinstance(e, str))
    assert events[-1].answer == streamed and "[1, 42]" in streamed  # already sent: flagged only
    assert events[-1].invalid_citations == [42]


async def test_require_citations_puts_the_rule_in_final_prompts_with_passages(
    make_rag, settings
) -> None:
    set_method(settings, require_citations=True)
    rag, engine = make_rag(scripted_responder({"sub_query_plan": PLAN}))
    await rag.answer(Q, force_type=T.REASON)
    assert STRICT_CITE_RULE in user_text(final_request(engine))
    assert all(STRICT_CITE_RULE not in user_text(r) for r in engine.batches[1])

    rag, engine = make_rag(scripted_responder({"sub_query_plan": PLAN}), retriever=EmptyRetriever())
    await rag.answer(Q, force_type=T.REASON)
    assert STRICT_CITE_RULE not in user_text(final_request(engine))  # nothing to cite


# --- 7. sub-query count and phrasing --------------------------------------------------------


async def test_max_sub_queries_caps_plan_schema_prompt_and_sub_answers(make_rag, settings) -> None:
    set_method(settings, max_sub_queries=3)
    five = json.dumps({"sub_queries": [f"{w} leaves autumn" for w in "abcde"]})
    rag, engine = make_rag(scripted_responder({"sub_query_plan": five}))
    result = await rag.answer(Q, force_type=T.INSTRUCTION)
    plan_req = engine.batches[0][0]
    assert plan_req.json_schema["properties"]["sub_queries"]["maxItems"] == 3
    assert "between 2 and 3" in user_text(plan_req)
    assert len(result.sub_answers) == 3 and len(engine.batches[1]) == 3

    three = {
        "debate_topic": "t",
        "dist_opinion": ["a", "b", "c", "d"],
        "sub_queries": {k: f"nuclear {k} view" for k in "abcd"},
    }
    rag, engine = make_rag(scripted_responder({"debate_plan": json.dumps(three)}))
    result = await rag.answer(Q, force_type=T.DEBATE)
    assert "2 to 3 distinct perspectives" in user_text(engine.batches[0][0])
    assert [s.perspective for s in result.sub_answers] == ["a", "b", "c"]


async def test_paraphrase_style_rewords_the_whole_question(make_rag, settings) -> None:
    rag, engine = make_rag(scripted_responder({"sub_query_plan": PLAN}))
    await rag.answer(Q, force_type=T.REASON)
    assert "single aspect" in user_text(engine.batches[0][0])

    set_method(settings, sub_query_style="paraphrase")
    rag, engine = make_rag(scripted_responder({"sub_query_plan": PLAN}))
    await rag.answer(Q, force_type=T.REASON)
    plan_text = user_text(engine.batches[0][0])
    assert "whole meaning" in plan_text and "single aspect" not in plan_text


# --- the profile ----------------------------------------------------------------------------


async def test_improved_profile_turns_the_set_on_in_one_run(make_rag, settings) -> None:
    settings.method.profile = "improved"
    named = [f"why do leaves change color: {w}" for w in ("chlorophyll", "pigments", "x", "y")]
    replies = {named[1]: "No information about pigments is given."}
    done = "Leaves change color as chlorophyll breaks down [1] [77]."
    rag, engine = make_rag(
        scripted_responder(
            {"sub_query_plan": json.dumps({"sub_queries": named})},
            answer=sub_answer_by_query(replies, done),
        )
    )
    result = await rag.answer(Q, force_type=T.INSTRUCTION)
    text = user_text(final_request(engine))
    assert len(result.sub_answers) == 3 and result.sub_answers[1].dropped == "no-information"
    assert "### References\n[" in text and ANSWER_SHAPES["INSTRUCTION"] in text
    assert CORE_DEFINITION in text and STRICT_CITE_RULE in text
    assert result.answer == done.replace(" [77]", "") and result.invalid_citations == [77]
    assert result.citations == [1] and result.added_citations == result.dropped_citations == []


async def test_vague_sub_queries_are_anchored_to_the_question(make_rag, settings) -> None:
    vague = ["what was it about", "leaves color autumn chlorophyll"]
    plan = json.dumps({"sub_queries": vague})
    rag, engine = make_rag(scripted_responder({"sub_query_plan": plan}))
    result = await rag.answer(Q, force_type=T.REASON)
    assert [s.query for s in result.sub_answers] == vague  # off by default

    set_method(settings, anchor_sub_queries=True)
    rag, engine = make_rag(scripted_responder({"sub_query_plan": plan}))
    result = await rag.answer(Q, force_type=T.REASON)
    anchored = f"what was it about (context: {Q})"
    assert [s.query for s in result.sub_answers] == [anchored, vague[1]]
    assert result.plan["anchored"] == [vague[0]] and result.plan["sub_queries"] == vague
    assert f"### Question\n{anchored}\n" in user_text(engine.batches[1][0])


async def test_post_cite_attaches_the_passage_sharing_a_sentences_words(make_rag, settings) -> None:
    answer = (
        "Leaves change color because chlorophyll breaks down in autumn.\n"
        "Carotenoids and anthocyanins become visible [1].\nNature is lovely."
    )
    rag, _ = make_rag(scripted_responder(answer=answer))
    result = await rag.answer(Q, force_type=T.EVIDENCE_BASED)
    assert result.answer == answer and result.added_citations == []  # off by default

    set_method(settings, post_cite=True)
    result = await rag.answer(Q, force_type=T.EVIDENCE_BASED)
    leaf = next(p.citation for p in result.passages if p.title == "Autumn leaf color")
    first = result.answer.split("\n")[0]
    assert first == f"Leaves change color because chlorophyll breaks down in autumn [{leaf}]."
    assert result.answer.split("\n")[1:] == answer.split("\n")[1:]  # cited / no match: kept
    assert result.added_citations == [leaf] and leaf in result.citations

    result = await rag.answer(Q, mode="rag")  # never in the baselines
    assert result.answer == answer


async def test_cite_min_share_sets_how_much_a_cited_passage_must_share(make_rag, settings) -> None:
    answer = "Autumn days shorten while trees rest quietly."  # 3 of 6 words in one passage
    set_method(settings, post_cite=True)
    rag, _ = make_rag(scripted_responder(answer=answer))
    result = await rag.answer(Q, force_type=T.EVIDENCE_BASED)
    assert result.added_citations and result.citations == result.added_citations

    set_method(settings, post_cite=True, cite_min_share=0.6)
    result = await rag.answer(Q, force_type=T.EVIDENCE_BASED)
    assert result.answer == answer and result.added_citations == result.citations == []

    # With a floor below its share, the answer's one sentence is its best match: cited.
    set_method(settings, post_cite=True, cite_min_share=0.6, cite_floor_share=0.4)
    result = await rag.answer(Q, force_type=T.EVIDENCE_BASED)
    assert result.added_citations and result.citations == result.added_citations


def test_ask_output_shows_left_out_sub_answers_and_invalid_citations() -> None:
    import io

    from cli.ask import print_result
    from typed_rag.result import Result, SubAnswer

    result = Result(
        question=Q,
        mode="typed-rag",
        answer="Leaves turn [1].",
        plan={"core_sub_questions": ["why does chlorophyll fade"]},
        sub_answers=[SubAnswer(query="leaf pigments", answer="", dropped="empty")],
        invalid_citations=[7],
    )
    out = io.StringIO()
    print_result(result, out)
    text = out.getvalue()
    assert "left out: sub-answer to 'leaf pigments' (empty)\n" in text
    assert "citations: [7] point at no shown passage\n" in text
    assert "core sub-questions (for the answer to cover):\n  1. why does chlorophyll fade" in text
