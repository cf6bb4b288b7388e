"""``method.sub_answers = "extract"`` (issue 14): sub-answers are passage sentences, not
generations, so a decomposed question costs two engine rounds (plan, final answer)."""

from __future__ import annotations

import re

from tests.core.test_method_options import DEBATE, PLAN, Q, final_request, user_text
from typed_rag.config import load_settings
from typed_rag.engines.fake import scripted_responder
from typed_rag.finishing.subanswers import MAX_SENTENCE_WORDS, extract_evidence
from typed_rag.progress import Progress
from typed_rag.types import QuestionType as T

PASSAGES = [
    (3, "Autumn is a season. Chlorophyll breaks down in autumn leaves as the days shorten."),
    (
        5,
        "Carotenoids stay in the leaf all year long. Tree bark is brown and rough to touch. "
        "Anthocyanins are made in autumn from sugars trapped in the leaf.",
    ),
]


def one(query: str, passages=PASSAGES, n: int = 3) -> str:
    return extract_evidence([(query, passages)], n)[0]


def test_extract_picks_the_best_matching_sentences_with_their_numbers() -> None:
    # Both matching sentences, in rank order; "Autumn is a season." is too short.
    assert one("chlorophyll in autumn leaves", n=2) == (
        "Chlorophyll breaks down in autumn leaves as the days shorten. [3] "
        "Anthocyanins are made in autumn from sugars trapped in the leaf. [5]"
    )
    assert "bark" not in one("chlorophyll autumn")


def test_sub_queries_sharing_passages_take_turns_and_never_repeat() -> None:
    first, second = extract_evidence([("autumn leaves", PASSAGES), ("autumn leaf", PASSAGES)], 3)
    assert first.startswith("Chlorophyll") and "Chlorophyll" not in second
    assert "Anthocyanins" in second
    # A query whose every match was taken gets its best sentence, shared.
    _, third = extract_evidence([("chlorophyll", PASSAGES[:1]), ("chlorophyll", PASSAGES[:1])])
    assert third.startswith("Chlorophyll")


def test_extract_without_a_match_falls_back_to_the_top_passage() -> None:
    assert one("volcano eruption") == (
        "Chlorophyll breaks down in autumn leaves as the days shorten. [3]"
    )
    assert extract_evidence([("anything", [])]) == [""]


def test_extract_cuts_a_long_sentence() -> None:
    long = "leaf " * (MAX_SENTENCE_WORDS + 20)
    text = one("leaf", [(1, long)])
    assert len(text.split()) == MAX_SENTENCE_WORDS + 2 and text.endswith("... [1]")


def test_fast_is_the_default_profile() -> None:
    fast = load_settings(None).method.options()
    assert fast.sub_answers == "extract" and fast.drop_uninformative
    assert fast.require_citations and fast.max_sub_queries == 3
    paper = load_settings(None, **{"method.profile": "paper"}).method.options()
    assert paper.sub_answers == "generate"


async def test_reason_with_extracted_sub_answers_costs_two_rounds(make_rag, settings) -> None:
    settings.method.sub_answers = "extract"
    rag, engine = make_rag(scripted_responder({"sub_query_plan": PLAN}))
    events: list[Progress] = []
    result = await rag.answer(Q, force_type=T.REASON, on_event=events.append)
    assert [c.step for c in result.calls] == ["plan", "aggregate"]
    assert len(engine.batches) == 2
    shown = {p.citation: p.text for p in result.passages}
    for sub in result.sub_answers:
        assert sub.citations and set(sub.citations) <= set(sub.passages)
        # every extracted sentence is quoted from the passage it cites
        for sentence, number in re.findall(r"\s*(.+?) \[(\d+)\]", sub.answer):
            assert sentence in shown[int(number)]
    aggregate = user_text(final_request(engine))
    assert all(sub.answer in aggregate for sub in result.sub_answers)
    kinds = [e.kind for e in events]
    assert kinds.count("sub_answer") == len(result.sub_answers)
    assert kinds.index("plan") < kinds.index("sub_answer")


async def test_debate_perspectives_are_extracted_too(make_rag, settings) -> None:
    settings.method.sub_answers = "extract"
    rag, engine = make_rag(scripted_responder({"debate_plan": DEBATE}))
    result = await rag.answer("Should we build nuclear power plants?", force_type=T.DEBATE)
    assert [c.step for c in result.calls] == ["plan", "mediate"]
    views = {s.perspective: s.answer for s in result.sub_answers}
    assert "low carbon" in views["pro"] and "waste" in views["contra"]
    assert views["contra"] in user_text(final_request(engine))


async def test_the_paper_profile_generates_sub_answers(make_rag) -> None:
    rag, _engine = make_rag(scripted_responder({"sub_query_plan": PLAN}))
    result = await rag.answer(Q, force_type=T.REASON)
    assert [c.step for c in result.calls].count("sub-answer") == 2
