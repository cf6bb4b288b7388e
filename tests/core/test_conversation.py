"""Follow-up questions: rewritten from their conversation, and what a chat adds to the answer."""

from __future__ import annotations

import json

import pytest

from tests.core.conftest import FixedClassifier, MemoryRetriever
from typed_rag.conversation import (
    REWRITE_SCHEMA,
    ChatOptions,
    Turn,
    needs_rewrite,
    parse_rewrite,
    rewrite_messages,
    with_chat_options,
)
from typed_rag.engines.fake import scripted_responder
from typed_rag.json_reply import PlanError
from typed_rag.types import QuestionType as T

HISTORY = (
    Turn("user", "What is tea?"),
    Turn("assistant", "Tea is an aromatic beverage made from the leaves of Camellia sinensis."),
)
STANDALONE = "How much caffeine does tea contain compared with coffee?"
TITLE = REWRITE_SCHEMA["title"]


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("How much caffeine does it contain?", True),
        ("Where was it first grown?", True),
        ("And coffee?", True),
        ("What about the risks?", True),
        ("Why?", True),
        ("Why do leaves change color in autumn?", False),
        ("How do I bake sourdough bread at home?", False),
    ],
)
def test_needs_rewrite_only_for_messages_that_refer_back(message: str, expected: bool) -> None:
    assert needs_rewrite(message) is expected


def test_parse_rewrite() -> None:
    assert parse_rewrite('{"question": "  Where was the tomato\\n first grown? "}') == (
        "Where was the tomato first grown?"
    )
    for bad in ("{}", '{"question": ""}', '{"question": 3}', "no json", "[1]"):
        with pytest.raises(PlanError):
            parse_rewrite(bad)


def test_rewrite_prompt_keeps_the_last_turns_cut_short() -> None:
    history = [Turn("user", f"question {i} " + "word " * 300) for i in range(10)]
    messages = rewrite_messages(history, "and it?", max_turns=3, max_turn_chars=100)
    user = messages[-1]["content"]
    assert "question 9" in user and "question 7" in user and "question 6" not in user
    assert all(len(line) < 120 for line in user.splitlines())
    assert user.rstrip().endswith("### Standalone question (JSON)") and "and it?" in user


def test_chat_options_go_to_the_end_of_the_system_message() -> None:
    base = [{"role": "system", "content": "You answer."}, {"role": "user", "content": "Q"}]
    out = with_chat_options(base, ChatOptions(system="Answer in French.", json_schema={"a": 1}))
    assert out[0]["content"].startswith("You answer.")
    assert "Answer in French." in out[0]["content"] and '{"a": 1}' in out[0]["content"]
    assert base[0]["content"] == "You answer."  # not mutated
    bare = with_chat_options([{"role": "user", "content": "Q"}], ChatOptions(system="Be brief."))
    assert bare[0]["role"] == "system" and "Be brief." in bare[0]["content"]
    assert with_chat_options(base, ChatOptions(history=HISTORY)) is base


async def test_follow_up_is_rewritten_and_drives_classify_and_retrieve(
    make_rag, retriever: MemoryRetriever
) -> None:
    clf = FixedClassifier(T.COMPARISON)
    responder = scripted_responder({TITLE: json.dumps({"question": STANDALONE})})
    rag, engine = make_rag(responder=responder, classifier=clf)
    result = await rag.answer(
        "How much caffeine does it contain?", mode="rag", chat=ChatOptions(history=HISTORY)
    )
    assert result.question == "How much caffeine does it contain?"
    assert result.rewrite == {"question": STANDALONE, "rewritten": True, "attempts": 1}
    rewrite_call = engine.calls[0]
    assert rewrite_call.json_schema == REWRITE_SCHEMA
    assert "Camellia sinensis" in rewrite_call.messages[-1]["content"]
    assert retriever.searches[0][0] == [STANDALONE]
    assert STANDALONE in engine.calls[-1].messages[-1]["content"]
    assert [c.step for c in result.calls][0] == "rewrite"


async def test_self_contained_message_skips_the_rewrite_call(make_rag) -> None:
    rag, engine = make_rag(responder=scripted_responder())
    q = "Why do leaves change color in autumn?"
    result = await rag.answer(q, mode="rag", chat=ChatOptions(history=HISTORY))
    assert result.rewrite == {"question": q, "rewritten": False, "skipped": "self-contained"}
    assert all(c.json_schema is None for c in engine.calls)


async def test_no_history_no_rewrite(make_rag) -> None:
    rag, engine = make_rag(responder=scripted_responder())
    result = await rag.answer("And it?", mode="rag", chat=ChatOptions(system="Be brief."))
    assert result.rewrite is None and len(engine.calls) == 1
    assert "Be brief." in engine.calls[0].messages[0]["content"]


async def test_unparseable_rewrite_falls_back_to_the_message(make_rag) -> None:
    responder = scripted_responder({TITLE: "not json"})
    rag, engine = make_rag(responder=responder)
    result = await rag.answer("And it?", mode="rag", chat=ChatOptions(history=HISTORY))
    assert result.rewrite is not None and result.rewrite["rewritten"] is False
    assert result.rewrite["attempts"] == 3 and len(result.rewrite["errors"]) == 3
    assert any("rewrite" in f for f in result.fallbacks)
    assert result.answer


async def test_rewrite_off_setting(make_rag, settings) -> None:
    settings.conversation.rewrite = "off"
    rag, engine = make_rag(responder=scripted_responder())
    result = await rag.answer("And it?", mode="rag", chat=ChatOptions(history=HISTORY))
    assert result.rewrite == {"question": "And it?", "rewritten": False, "skipped": "off"}
    assert len(engine.calls) == 1


async def test_stream_and_stop_and_schema_reach_the_final_call(make_rag) -> None:
    responder = scripted_responder({TITLE: json.dumps({"question": STANDALONE})})
    rag, engine = make_rag(responder=responder)
    chat = ChatOptions(history=HISTORY, stop=("END",), json_schema={"type": "object"})
    events = [e async for e in rag.answer_stream("And it?", mode="llm", chat=chat)]
    result = events[-1]
    assert result.rewrite["question"] == STANDALONE  # type: ignore[union-attr]
    final = engine.calls[-1]
    assert final.stop == ["END"] and final.json_schema == {"type": "object"}
    assert STANDALONE in final.messages[-1]["content"]
