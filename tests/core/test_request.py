"""One request, resolved once: its defaults, its checks, and the fitting of top_k to the
model's context, the same whichever edge (HTTP, CLI, Python API, evaluation) built it."""

from __future__ import annotations

import pytest

from cli.main import main
from tests.core.conftest import FixedClassifier
from typed_rag.config import Settings
from typed_rag.conversation import ChatOptions
from typed_rag.request import AnswerRequest, RequestError
from typed_rag.types import QuestionType as T

Q = "Why do leaves change color in autumn?"


def test_defaults_come_from_the_settings(settings: Settings) -> None:
    request = AnswerRequest(f"  {Q} ").resolve(settings)
    assert request.question == Q
    assert request.mode == settings.mode and request.top_k == settings.retrieval.top_k
    assert request.seed == settings.sampling.seed and request.sampling == settings.sampling
    assert request.force_type is None and request.notes == ()


def test_given_values_win_and_labels_parse_in_any_spelling(settings: Settings) -> None:
    asked = AnswerRequest(Q, mode="rag", force_type="evidence_based", top_k=3, seed=7)
    request = asked.resolve(settings)
    assert request.force_type is T.EVIDENCE_BASED
    assert (request.mode, request.top_k, request.seed) == ("rag", 3, 7)
    sampled = AnswerRequest(Q, sampling={"temperature": 0.1, "top_p": None}).resolve(settings)
    assert sampled.sampling.temperature == 0.1
    assert sampled.sampling.top_p == settings.sampling.top_p  # None: the default stays


@pytest.mark.parametrize(
    ("fields", "param", "match"),
    [
        ({"question": " "}, "messages", "question is empty"),
        ({"mode": "magic"}, "model", "unknown mode 'magic'"),
        ({"force_type": "opinion"}, "force_type", "unknown question type 'opinion'"),
        ({"top_k": 0}, "top_k", "top_k must be at least 1"),
        ({"top_k": 21}, "top_k", "at most 20 passages per query \\(server.max_top_k\\)"),
        ({"sampling": {"warmth": 1}}, None, "unknown sampling field"),
        ({"sampling": {"max_tokens": "many"}}, None, "invalid sampling override"),
    ],
)
def test_each_bad_field_is_a_request_error_naming_it(
    settings: Settings, fields: dict, param: str | None, match: str
) -> None:
    with pytest.raises(RequestError, match=match) as caught:
        AnswerRequest(**{"question": Q, **fields}).resolve(settings)
    assert caught.value.param == param


def test_the_top_k_bound_is_a_setting(settings: Settings) -> None:
    settings.server.max_top_k = 40
    assert AnswerRequest(Q, top_k=40).resolve(settings).top_k == 40


def test_top_k_is_fitted_to_the_context_the_same_for_every_edge(settings: Settings) -> None:
    settings.engine.n_ctx = 2048
    settings.server.max_top_k = 100
    request = AnswerRequest(Q, mode="rag", top_k=50).resolve(settings)
    fits = (2048 - 512 - (300 + len(Q) // 3)) // 150
    assert request.top_k == fits
    (note,) = request.notes
    assert note.startswith(f"context: top_k 50 -> {fits},") and "engine.n_ctx" in note
    # the llm mode retrieves nothing: nothing to fit
    assert AnswerRequest(Q, mode="llm", top_k=50).resolve(settings).top_k == 50
    long_system = ChatOptions(system="Be brief and clear. " * 400)
    with pytest.raises(RequestError, match="leave no room") as caught:
        AnswerRequest(Q, mode="rag", chat=long_system).resolve(settings)
    assert (caught.value.param, caught.value.code) == ("messages", "context_length_exceeded")


def test_from_messages_splits_the_chat() -> None:
    messages = [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "What is sourdough?"},
        {"role": "assistant", "content": "A bread."},
        {"role": "developer", "content": "One sentence."},
        {"role": "user", "content": "How is it made?"},
    ]
    request = AnswerRequest.from_messages(messages, stop=["END"], mode="rag")
    assert request.question == "How is it made?" and request.mode == "rag"
    assert request.chat.system == "Answer in French.\n\nOne sentence."
    assert [t.role for t in request.chat.history] == ["user", "assistant"]
    assert tuple(request.chat.stop) == ("END",)
    with pytest.raises(RequestError, match="no message with role 'user'"):
        AnswerRequest.from_messages([{"role": "system", "content": "hi"}])


def test_short_requests_are_the_llm_mode_and_small_rag_answers(settings: Settings) -> None:
    def short(**fields: object) -> bool:
        return AnswerRequest(Q, **fields).resolve(settings).short  # type: ignore[arg-type]

    assert short(mode="llm")
    assert short(mode="rag", sampling={"max_tokens": 16})
    assert not short(mode="rag")
    assert not short(mode="typed-rag", sampling={"max_tokens": 16})  # still plans


async def test_the_api_takes_the_request_and_answers_as_the_keywords_do(make_rag) -> None:
    rag, engine = make_rag(classifier=FixedClassifier(T.REASON))
    by_request = await rag.answer(AnswerRequest(Q, force_type="comparison", top_k=2, seed=3))
    first = [c.messages for c in engine.calls]
    engine.batches.clear()
    by_keywords = await rag.answer(Q, force_type="comparison", top_k=2, seed=3)
    assert [c.messages for c in engine.calls] == first
    assert by_request.answer == by_keywords.answer and len(by_request.passages) == 2
    before = len(engine.calls)
    with pytest.raises(RequestError, match="top_k"):
        await rag.answer(AnswerRequest(Q, top_k=500))
    assert len(engine.calls) == before  # refused before any engine call


async def test_short_requests_reach_the_engine_first(make_rag) -> None:
    rag, engine = make_rag(classifier=FixedClassifier(T.REASON))
    await rag.answer(Q, mode="llm")
    await rag.answer(Q, mode="typed-rag")
    priorities = [c.priority for c in engine.calls]
    assert priorities[0] == 1 and set(priorities[1:]) == {0}


def test_ask_refuses_a_top_k_beyond_the_bound_like_the_server(capsys) -> None:
    assert main(["--set", "engine.backend=fake", "ask", Q, "-k", "50"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("typed-rag: error: -k/--top-k: top_k 50 is more than")
