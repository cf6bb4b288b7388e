"""The method options (``method.*``), each on the scripted fake engine.

Every test reads what the engine was sent (the prompts) and what the trace
recorded, with the option on and, where it matters, off.
"""

from __future__ import annotations

import json
import re

import pytest
from pydantic import ValidationError

from eval.data.methods import with_method_profile
from tests.core.conftest import EmptyRetriever
from typed_rag.config import load_settings
from typed_rag.engines.base import ChatRequest
from typed_rag.engines.fake import scripted_responder
from typed_rag.finishing.echo import drop_prompt_echo
from typed_rag.finishing.finish import cut_answer, trim_to_sentence
from typed_rag.messages import PROMPT_HEADINGS
from typed_rag.pipelines.decomposition import AGGREGATOR_SYSTEM
from typed_rag.pipelines.experience import EXPERIENCE_POOL
from typed_rag.pipelines.prompting import (
    ANSWER_SHAPES,
    ANSWER_SYSTEM,
    CORE_DEFINITION,
    DRAFT_USE,
    OWN_KNOWLEDGE,
    STRICT_CITE_RULE,
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
    assert not paper.drop_uninformative and not paper.answer_shapes
    assert paper.max_sub_queries == 5 and paper.experience_retrieval == "question"
    assert paper.sub_answers == "generate" and paper.cite_min_share == 0.3

    fast = load_settings(None, **{"method.profile": "fast"}).method.options()
    assert fast.drop_uninformative and fast.sub_answers == "extract"
    assert fast.answer_shapes and fast.require_citations
    assert fast.max_sub_queries == 3 and fast.core_sub_questions == "definition"
    assert fast.post_cite and fast.cite_min_share == 0.7
    assert fast.cite_floor_share == 0.4 and paper.cite_floor_share is None
    # A floor at or above cite_min_share cites nothing more: recorded as off, so runs made
    # at 0.3 before the floor existed keep their fingerprint.
    at_03 = load_settings(None, **{"method.cite_min_share": 0.3}).method.options()
    assert at_03.cite_floor_share is None
    assert fast.trim_cut_off and not paper.trim_cut_off

    # An explicit value wins over the profile, whichever order they come in (--set strings).
    mixed = load_settings(
        None, **{"method.answer_shapes": "false", "method.profile": "fast"}
    ).method.options()
    assert mixed.answer_shapes is False and mixed.drop_uninformative is True


def test_bad_method_values_are_rejected_by_name() -> None:
    with pytest.raises(ValidationError, match="max_sub_queries"):
        load_settings(None, **{"method.max_sub_queries": "9"})
    with pytest.raises(ValidationError, match="profile"):
        load_settings(None, **{"method.profile": "best"})
    with pytest.raises(ValidationError, match="experience_retrieval"):
        load_settings(None, **{"method.experience_retrieval": "keywords"})
    with pytest.raises(ValidationError, match="profile"):
        load_settings(None, **{"method.profile": "improved"})  # retired: fast replaced it


# --- aggregation -------------------------------------------------------------------------


async def test_paper_aggregator_sees_no_passages_and_no_guidance(make_rag) -> None:
    rag, engine = make_rag(scripted_responder({"sub_query_plan": PLAN}))
    await rag.answer(Q, force_type=T.REASON)
    agg = final_request(engine)
    assert agg.messages[0]["content"] == AGGREGATOR_SYSTEM
    assert "### References" not in user_text(agg) and GUIDE not in user_text(agg)


async def test_a_method_profile_view_shares_the_components(make_rag) -> None:
    """An evaluation's ``typed-rag@fast`` answers with the profile on the same parts."""
    rag, engine = make_rag(scripted_responder({"sub_query_plan": PLAN}))
    fast = with_method_profile(rag, "fast")
    assert fast.engine is engine and fast.retriever is rag.retriever
    assert fast.settings.method.options().answer_shapes
    assert not rag.settings.method.options().answer_shapes  # the original is unchanged
    await fast.answer(Q, force_type=T.REASON)
    assert GUIDE in user_text(final_request(engine))


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


@pytest.mark.parametrize(
    "setting,mode",
    [
        ("off", "off"),
        ("draft", "draft"),
        ("draft:reason", "draft"),
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
    drafting = mode == "draft"
    assert len(drafted) == (1 if drafting else 0)
    assert (OWN_KNOWLEDGE in final) is (mode != "off")
    assert (DRAFT_USE in final) is (mode == "draft")
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


@pytest.mark.parametrize("guidance", [False, True])
async def test_factoid_guidance_gives_the_factoid_route_the_typed_final_guidance(
    make_rag, settings, guidance
) -> None:
    set_factoid_draft(
        settings,
        core_sub_questions="definition",
        require_citations=True,
        factoid_guidance=guidance,
    )
    rag, engine = make_rag(scripted_responder({}, lambda req: "Final [1]."))
    await rag.answer(Q, force_type=T.FACTOID)
    final = user_text(final_request(engine))
    assert (CORE_DEFINITION in final) is guidance
    assert (STRICT_CITE_RULE in final) is guidance
    # the draft and its guidance either way, once each
    assert final.count(DRAFT_USE) == final.count(GUIDE) == 1


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
        # the core sub-questions written out before an answer heading
        (f"1. What are they [1]?\n2. Where were they?\n\n### Answer\n\n{ANSWER}", ANSWER),
        ("What are they?\n\n### Answer", None),  # nothing after the heading
        (f"They are seven.\n\n### Answer\n{ANSWER}", None),  # a statement before it
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


async def test_prompt_headings_name_every_final_prompt_section(make_rag, settings) -> None:
    """``method.drop_echo`` knows a copied section by these names: a final prompt with a new
    heading must add it."""
    set_method(
        settings,
        own_knowledge="draft",
        sub_answers="generate",
    )
    settings.method = settings.method.model_validate(
        {**settings.method.model_dump(), "own_knowledge_types": list(T)}
    )
    rag, engine = make_rag(scripted_responder({}, lambda req: "Final [1]."))
    seen: set[str] = set()
    for qtype in T:
        await rag.answer(Q, force_type=qtype)
        seen |= set(re.findall(r"^### (.+)$", user_text(final_request(engine)), re.M))
    assert {"Question", "References", "Answer", "Debate topic", "Responses"} <= seen
    assert seen <= set(PROMPT_HEADINGS)


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
    assert retriever.searches == [(queries, EXPERIENCE_POOL)]
    assert reranker.queries == ["backpacking hostels"]
    assert result.passages[0].id == "p12"
    assert result.passages[0].query in queries


# --- 5. core sub-questions -----------------------------------------------------------


async def test_core_definition_adds_guidance_without_a_call(make_rag, settings) -> None:
    set_method(settings, core_sub_questions="definition")
    rag, engine = make_rag(scripted_responder({"sub_query_plan": PLAN}))
    result = await rag.answer(Q, force_type=T.REASON)
    assert CORE_DEFINITION in user_text(final_request(engine)).split(GUIDE, 1)[1]
    assert result.rounds == 3


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


# --- the profile ----------------------------------------------------------------------------


async def test_fast_profile_turns_the_set_on_in_one_run(make_rag, settings) -> None:
    settings.method.profile = "fast"
    set_method(settings, sub_answers="generate", own_knowledge="off")
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
    assert ANSWER_SHAPES["INSTRUCTION"] in text
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
        sub_answers=[SubAnswer(query="leaf pigments", answer="", dropped="empty")],
        invalid_citations=[7],
    )
    out = io.StringIO()
    print_result(result, out)
    text = out.getvalue()
    assert "left out: sub-answer to 'leaf pigments' (empty)\n" in text
    assert "citations: [7] point at no shown passage\n" in text


async def test_a_type_in_rag_types_is_answered_by_plain_rag(make_rag, settings) -> None:
    """The fast profile routes DEBATE to plain RAG (its pipeline lost to RAG, paired); the
    trace keeps the question's type, and emptying the list brings the mediator back."""
    assert load_settings(None, **{"method.profile": "fast"}).method.options().rag_types == [
        "DEBATE"
    ]
    assert settings.method.options().rag_types == []  # the paper's: every type its pipeline
    listed = load_settings(None, **{"method.rag_types": "debate,Comparison"}).method.options()
    assert listed.rag_types == ["DEBATE", "COMPARISON"]
    with pytest.raises(ValidationError, match="rag_types"):
        load_settings(None, **{"method.rag_types": "DEBATES"})
    question = "Should countries build nuclear power plants?"
    set_method(settings, rag_types=["DEBATE"])
    rag, engine = make_rag(scripted_responder({"debate_plan": DEBATE}))
    result = await rag.answer(question, force_type=T.DEBATE)
    (only,) = engine.calls  # one RAG answer: no plan, no perspectives, no mediator
    assert only.json_schema is None and result.type == "DEBATE"
    assert not result.plan and result.sub_answers == []

    set_method(settings, rag_types=[])
    rag, engine = make_rag(scripted_responder({"debate_plan": DEBATE}))
    result = await rag.answer(question, force_type=T.DEBATE)
    assert engine.calls[0].json_schema["title"] == "debate_plan"
    assert result.plan["debate_topic"] == "nuclear power" and len(engine.calls) > 2
