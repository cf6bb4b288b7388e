"""TypedRAG: type routing, streaming, batching many questions, errors, and `typed-rag ask`."""

from __future__ import annotations

import json

import pytest

from cli.main import main
from tests.core.conftest import FixedClassifier
from typed_rag.errors import UserError
from typed_rag.result import Result
from typed_rag.system import TypedRAG
from typed_rag.types import QuestionType as T

Q = "Why do leaves change color in autumn?"


async def test_classifier_prediction_picks_the_pipeline(make_rag) -> None:
    clf = FixedClassifier(T.REASON, p=0.9)
    rag, engine = make_rag(classifier=clf)
    result = await rag.answer(Q)
    assert (result.type, result.type_source, result.predicted_type) == (
        "REASON",
        "classifier",
        "REASON",
    )
    assert result.probabilities["REASON"] == pytest.approx(0.9)
    assert result.rounds == 3 and len(result.sub_answers) == 2


async def test_forced_type_wins_and_skips_the_classifier(make_rag) -> None:
    clf = FixedClassifier(T.REASON)
    rag, engine = make_rag(classifier=clf)
    result = await rag.answer(Q, force_type="experience")
    assert (result.type, result.type_source) == ("EXPERIENCE", "forced")
    assert clf.calls == 0 and result.plan["keywords"]


async def test_unsure_prediction_defaults_to_plain_rag_and_keeps_prediction(
    make_rag, settings
) -> None:
    clf = FixedClassifier(T.DEBATE, p=settings.classifier.min_confidence - 0.05)
    rag, engine = make_rag(classifier=clf)
    result = await rag.answer(Q)
    assert (result.type, result.type_source, result.predicted_type) == (
        "EVIDENCE-BASED",
        "low-confidence-default",
        "DEBATE",
    )
    assert len(engine.batches) == 1


async def test_no_classifier_means_plain_rag(make_rag) -> None:
    rag, engine = make_rag(classifier=None)
    result = await rag.answer(Q)
    assert (result.type, result.type_source, result.predicted_type) == (
        "EVIDENCE-BASED",
        "none",
        None,
    )
    assert result.fallbacks == ["classify: no classifier loaded -> EVIDENCE-BASED (plain rag)"]
    assert (await rag.answer(Q, mode="rag")).fallbacks == []


async def test_stream_deltas_join_to_the_answer_and_result_comes_last(make_rag) -> None:
    rag, engine = make_rag(classifier=FixedClassifier(T.REASON))
    events = [e async for e in rag.answer_stream(Q)]
    *deltas, last = events
    assert isinstance(last, Result) and all(isinstance(d, str) for d in deltas)
    assert len(deltas) > 1 and "".join(deltas) == last.answer == "A fake answer [1]."
    assert last.rounds == 3 and last.calls[-1].step == "aggregate"
    assert last.timings["total"] >= last.timings["generate"] >= 0


async def test_timings_cover_every_stage(make_rag) -> None:
    rag, _ = make_rag(classifier=FixedClassifier(T.COMPARISON))
    result = await rag.answer(Q)
    stages = {"classify", "plan", "retrieve", "rerank", "sub_answers", "generate", "total"}
    assert stages <= set(result.timings)
    assert result.timings["retrieve"] > 0 and result.timings["rerank"] > 0


async def test_answer_many_keeps_order_and_classifies_once(make_rag) -> None:
    clf = FixedClassifier(T.REASON)
    rag, engine = make_rag(classifier=clf)
    questions = [f"Why is {x} the way it is?" for x in ("coffee", "tea", "bread")]
    results = await rag.answer_many(questions, concurrency=3)
    assert [r.question for r in results] == questions
    assert clf.calls == 1 and all(r.type == "REASON" and r.rounds == 3 for r in results)
    forced = await rag.answer_many(questions[:2], force_type=[T.DEBATE, None])
    assert [r.type_source for r in forced] == ["forced", "classifier"]
    with pytest.raises(UserError, match="2 entries for 3 questions"):
        await rag.answer_many(questions, force_type=[T.DEBATE, None])


async def test_seed_argument_reaches_every_call(make_rag) -> None:
    rag, engine = make_rag(classifier=FixedClassifier(T.DEBATE))
    await rag.answer(Q, seed=1234)
    assert {r.seed for r in engine.calls} == {1234}


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"question": "   "}, "question is empty"),
        ({"question": Q, "force_type": "opinion"}, "unknown question type 'opinion'"),
        ({"question": Q, "mode": "magic"}, "unknown mode 'magic'"),
        ({"question": Q, "top_k": 0}, "top_k must be at least 1"),
    ],
)
async def test_bad_arguments_are_user_errors(make_rag, kwargs, match) -> None:
    rag, engine = make_rag()
    with pytest.raises(UserError, match=match):
        await rag.answer(**kwargs)
    assert engine.batches == []


# --- typed-rag ask ---------------------------------------------------------------------


@pytest.fixture
def cli_rag(make_rag, monkeypatch):
    rag, engine = make_rag(classifier=FixedClassifier(T.REASON))
    monkeypatch.setattr(TypedRAG, "from_settings", classmethod(lambda cls, settings: rag))
    return rag, engine


def test_ask_prints_type_plan_answer_sources_and_cost(cli_rag, capsys) -> None:
    assert main(["--set", "engine.backend=fake", "ask", Q]) == 0
    out = capsys.readouterr().out
    assert "type: REASON (p=0.90, classifier)" in out
    assert "plan: sub-queries:\n  1. why do leaves change color" in out
    assert "A fake answer [1]." in out
    assert "sources:\n  [1] Autumn leaf color (id p1, score" in out
    assert "cost: 3 rounds, 4 calls" in out


def test_ask_json_and_flags(cli_rag, capsys) -> None:
    rag, engine = cli_rag
    assert main(["ask", Q, "--json", "--type", "comparison", "-k", "2", "--seed", "5"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["type"] == "COMPARISON" and data["type_source"] == "forced"
    assert len(data["passages"]) == 2 and {r.seed for r in engine.calls} == {5}
    assert main(["ask", Q, "--mode", "llm", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passages"] == []


def test_ask_shows_the_type_answered_and_what_the_classifier_said(capsys) -> None:
    from cli.ask import print_result

    forced = Result(
        question=Q,
        mode="typed-rag",
        type="REASON",
        type_source="forced",
        predicted_type="DEBATE",
        probabilities={"DEBATE": 0.81, "REASON": 0.1},
    )
    print_result(forced)
    line = capsys.readouterr().out.splitlines()[1]
    assert line == "type: REASON (p=0.10, forced, classifier said DEBATE)"


def test_ask_bad_type_is_a_clear_error(cli_rag, capsys) -> None:
    assert main(["ask", Q, "--type", "opinion"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("typed-rag: error: --type: unknown question type 'opinion'")


async def test_engine_failure_propagates_and_is_logged_with_context(make_rag, caplog) -> None:
    from typed_rag.engines.base import EngineError
    from typed_rag.engines.fake import valid_plan

    def responder(req):
        if req.json_schema is not None:
            return valid_plan("sub_query_plan")
        raise EngineError("backend died")

    rag, engine = make_rag(responder)
    with pytest.raises(EngineError, match="backend died"):
        await rag.answer(Q, force_type=T.REASON)
    assert "typed-rag pipeline (REASON) failed after 2 rounds" in caplog.text


async def test_sampling_override_reaches_every_engine_call(make_rag) -> None:
    rag, engine = make_rag(classifier=FixedClassifier(T.REASON))
    await rag.answer(Q, sampling={"temperature": 0.1, "top_p": 0.5, "max_tokens": 7})
    assert engine.calls and all(r.temperature == 0.1 and r.top_p == 0.5 for r in engine.calls)
    # answers use the client's max_tokens; plans keep plan_max_tokens
    plain = [r for r in engine.calls if r.json_schema is None]
    assert plain and all(r.max_tokens == 7 for r in plain)


async def test_sampling_override_rejects_unknown_and_invalid_fields(make_rag) -> None:
    rag, _ = make_rag()
    with pytest.raises(UserError, match="unknown sampling field"):
        await rag.answer(Q, force_type="factoid", sampling={"warmth": 1})
    with pytest.raises(UserError, match="invalid sampling override"):
        await rag.answer(Q, force_type="factoid", sampling={"max_tokens": "many"})


def test_ask_output_shows_constraints() -> None:
    import io

    from cli.ask import print_result
    from typed_rag.result import Result

    result = Result(
        question="Explain AI, but skip trends.",
        mode="typed-rag",
        type="EVIDENCE-BASED",
        constraints={
            "detected": True,
            "question": "Explain AI.",
            "include": [],
            "exclude": ["trends"],
        },
    )
    out = io.StringIO()
    print_result(result, out)
    text = out.getvalue()
    assert "constraints: core question: Explain AI.\n  leave out: trends\n" in text
    assert "include:" not in text
