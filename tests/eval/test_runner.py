"""The resumable run: batches, append-as-you-go, and resuming without duplicates or recomputation."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from eval.data.labels import QuestionLabel, classify_questions
from eval.data.methods import parse_methods
from eval.data.wikinfqa import load_wikinfqa
from eval.reports.paired import paired_scores
from eval.runs import runner as run_module
from eval.runs.manifest import judge_identity
from eval.runs.resume import EvalAborted
from eval.runs.runner import ANSWERS, SCORES, EvalRunner
from eval.settings import load_lab_settings
from eval.store import JsonlStore
from tests.eval.conftest import KeywordClassifier, StandInAnswerer, linkage_responder
from typed_rag.config import Settings
from typed_rag.engines.fake import FakeEngine
from typed_rag.errors import UserError


@pytest.fixture
def eval_settings(settings: Settings, nfqa_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setattr(run_module, "BATCH_SIZE", 3)  # small batches: several per method
    monkeypatch.setattr(run_module, "SCORE_BATCH_SIZE", 4)
    return load_lab_settings(
        None,
        **{
            "home": str(settings.home),
            "engine.backend": "fake",
            "eval.data_dir": str(nfqa_dir),
            "eval.judge_protocol": "linkage",  # text verdicts: the tests count generate batches
        },
    )


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def keys(path: Path) -> list[tuple[str, str]]:
    return [(r["method"], r["question_id"]) for r in lines(path)]


async def test_full_run_answers_in_batches_and_scores_everything(
    eval_settings: Settings, tmp_path: Path
) -> None:
    records = load_wikinfqa(eval_settings.eval.data_dir, "nq,squad").records
    labels = classify_questions(records, KeywordClassifier())
    answerer = StandInAnswerer()
    engine = FakeEngine(linkage_responder({"typed-rag": 1, "rag": 2, "llm": 3}))
    runner = EvalRunner(
        eval_settings,
        tmp_path / "run",
        answerer=answerer,
        scorer_engine=engine,
        labels=labels,
        progress=False,
    )
    stats = await runner.run(records, ["llm", "rag", "typed-rag"])
    assert answerer.batches == [3, 3, 3] * 3  # 9 questions per method in batches of 3
    assert stats.answers["rag"].computed == 9 and stats.scores.computed == 27
    assert [len(b) for b in engine.batches] == [4] * 6 + [3]  # 27 scorer requests, 4 per call
    scores = lines(tmp_path / "run" / SCORES)
    by_method = {(r["method"], r["question_id"]): r for r in scores}
    assert by_method[("typed-rag", "nq_0")]["rank"] == 1
    assert by_method[("llm", "nq_1")]["rank"] == 3
    assert by_method[("rag", "nq_1")]["n"] == 2  # labels (0,3,0,3,...) -> 2 references
    assert by_method[("rag", "nq_0")]["type"] == "REASON"
    assert [ref["label"] for ref in by_method[("rag", "nq_0")]["references"]] == [3, 2, 1, 0]
    answers = lines(tmp_path / "run" / ANSWERS)
    assert answers[0]["result"]["calls"][0]["prompt_tokens"] == 100


async def test_interrupted_run_resumes_without_duplicates_or_recomputation(
    eval_settings: Settings, tmp_path: Path
) -> None:
    records = load_wikinfqa(eval_settings.eval.data_dir, "nq,squad").records
    run_dir = tmp_path / "run"
    # First run: the generator dies after 4 questions, inside the second batch; that batch is
    # retried one by one, every retry fails too -> abort, keeping the first batch.
    crashing = StandInAnswerer(fail_after=4)
    runner = EvalRunner(
        eval_settings,
        run_dir,
        answerer=crashing,
        scorer_engine=FakeEngine(linkage_responder()),
        progress=False,
    )
    with pytest.raises(EvalAborted):
        await runner.run(records, ["rag", "typed-rag"])
    first = keys(run_dir / ANSWERS)
    assert first == [("rag", "nq_0"), ("rag", "nq_1"), ("rag", "nq_2")]
    assert not (run_dir / SCORES).exists()
    errors = lines(run_dir / "errors.jsonl")
    assert {e["question_id"] for e in errors} == {"nq_3", "nq_4", "squad_0"}

    # Second run: a healthy generator; the scorer dies after its first batch.
    calls = {"n": 0}

    def flaky(req):
        if calls["n"] >= 4:
            raise RuntimeError("scorer crashed")
        calls["n"] += 1
        return "[[2]]"

    healthy = StandInAnswerer()
    runner = EvalRunner(
        eval_settings, run_dir, answerer=healthy, scorer_engine=FakeEngine(flaky), progress=False
    )
    with pytest.raises(RuntimeError, match="scorer crashed"):
        await runner.run(records, ["rag", "typed-rag"])
    asked = Counter(healthy.asked)
    assert max(asked.values()) == 1  # nothing asked twice
    assert ("rag", "why do leaves change color in autumn") not in asked  # nq_0 was done
    assert (
        sum(1 for m, _ in asked if m == "rag") == 6
        and sum(1 for m, _ in asked if m == "typed-rag") == 9
    )
    assert len(keys(run_dir / SCORES)) == 4

    # Third run: everything healthy; only the 14 missing scores are computed, nothing re-answered.
    third = StandInAnswerer()
    engine = FakeEngine(linkage_responder())
    stats = await EvalRunner(
        eval_settings, run_dir, answerer=third, scorer_engine=engine, progress=False
    ).run(records, ["rag", "typed-rag"])
    assert third.asked == [] and third.started == 0  # no answer phase work at all
    assert stats.scores.done_before == 4 and stats.scores.computed == 14
    assert len(engine.calls) == 14
    for name in (ANSWERS, SCORES):
        ks = keys(run_dir / name)
        assert len(ks) == len(set(ks)) == 18

    # Fourth run: nothing left to do, no factory is even called.
    def must_not_build():
        raise AssertionError("should not be built")

    stats = await EvalRunner(
        eval_settings,
        run_dir,
        answerer=must_not_build,
        scorer_engine=must_not_build,
        progress=False,
    ).run(records, ["rag", "typed-rag"])
    assert stats.scores.computed == 0 and stats.answers["rag"].done_before == 9


async def test_factories_are_started_and_closed(eval_settings: Settings, tmp_path: Path) -> None:
    records = load_wikinfqa(eval_settings.eval.data_dir, "nq,squad").records[:2]
    made = StandInAnswerer()
    engine = FakeEngine(linkage_responder())
    await EvalRunner(
        eval_settings,
        tmp_path / "r",
        answerer=lambda: made,
        scorer_engine=lambda: engine,
        progress=False,
    ).run(records, ["llm"])
    assert made.started == 1 and made.closed == 1


def test_torn_last_line_is_dropped_and_recomputed(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text(
        json.dumps({"method": "rag", "question_id": "a"}) + "\n" + '{"method": "rag", "questi'
    )
    store = JsonlStore(path)
    assert len(store) == 1 and path.read_text().endswith("}\n")
    assert (
        store.append([{"method": "rag", "question_id": "a"}, {"method": "rag", "question_id": "b"}])
        == 1
    )
    assert [r["question_id"] for r in lines(path)] == ["a", "b"]
    # a read-only reader of a live run never truncates
    path.write_text(path.read_text() + '{"torn')
    JsonlStore(path, readonly=True)
    assert path.read_text().endswith('{"torn')


def test_parse_methods() -> None:
    assert parse_methods("typed-rag, LLM") == ["typed-rag", "llm"]
    with pytest.raises(UserError, match="unknown method"):
        parse_methods("llm,hyde")


def labelled_runner(
    settings: Settings, run_dir: Path, records: list, types: list[str]
) -> tuple[EvalRunner, StandInAnswerer]:
    """A runner over a stand-in answerer, with ``types[i]`` recorded as record i's label."""
    labels = {
        r.question_id: QuestionLabel(r.question_id, r.subset, t, 0.9, True)
        for r, t in zip(records, types, strict=True)
    }
    answerer = StandInAnswerer()
    runner = EvalRunner(
        settings,
        run_dir,
        answerer=answerer,
        scorer_engine=FakeEngine(linkage_responder()),
        labels=labels,
        progress=False,
    )
    return runner, answerer


async def test_typed_rag_answers_follow_the_recorded_labels(
    eval_settings: Settings, tmp_path: Path
) -> None:
    """Routing in an evaluation uses the stored labels, never a fresh classification."""
    records = load_wikinfqa(eval_settings.eval.data_dir, "nq").records
    # Labels that disagree with what any classifier would say about these questions.
    recorded = ["DEBATE", "COMPARISON", "REASON", "EXPERIENCE", "INSTRUCTION"]
    runner, answerer = labelled_runner(eval_settings, tmp_path / "run", records, recorded)
    await runner.run(records, ["rag", "typed-rag"])
    assert answerer.forced == [None] * 5 + recorded  # rag is not routed; typed-rag is
    answers = {(r["method"], r["question_id"]): r for r in lines(tmp_path / "run" / ANSWERS)}
    for rec, t in zip(records, recorded, strict=True):
        row = answers[("typed-rag", rec.question_id)]
        assert row["route"] == row["type"] == t and row["type_source"] == "forced"


async def test_route_classifier_lets_the_classifier_pick_the_pipeline(
    eval_settings: Settings, tmp_path: Path
) -> None:
    """``eval.route="classifier"``: typed-rag is routed as the server routes it; the
    recorded label still groups the row."""
    records = load_wikinfqa(eval_settings.eval.data_dir, "nq").records
    recorded = ["DEBATE"] * len(records)
    eval_settings.eval.route = "classifier"
    runner, answerer = labelled_runner(eval_settings, tmp_path / "run", records, recorded)
    await runner.run(records, ["typed-rag"])
    assert answerer.forced == [None] * len(records)
    rows = lines(tmp_path / "run" / ANSWERS)
    assert all(r["type"] == "DEBATE" and r["route"] == "EVIDENCE-BASED" for r in rows)
    assert all(r["type_source"] == "classifier" for r in rows)


async def test_route_labels_factoid_sends_only_confident_factoid_questions_to_that_route(
    eval_settings: Settings, tmp_path: Path
) -> None:
    """``eval.route="labels-factoid"``: the labels route, except the questions the
    classifier is confident are FACTOID; the recorded label still groups every row."""
    records = load_wikinfqa(eval_settings.eval.data_dir, "nq").records
    recorded = ["DEBATE"] * len(records)
    eval_settings.eval.route = "labels-factoid"
    runner, answerer = labelled_runner(eval_settings, tmp_path / "run", records, recorded)
    await runner.run(records, ["typed-rag"])
    expected = ["FACTOID" if r.question.lower().startswith("what") else "DEBATE" for r in records]
    assert "FACTOID" in expected and "DEBATE" in expected  # the fixture has both kinds
    assert answerer.forced == expected
    rows = {r["question_id"]: r for r in lines(tmp_path / "run" / ANSWERS)}
    assert [rows[r.question_id]["route"] for r in records] == expected
    assert all(r["type"] == "DEBATE" for r in rows.values())


async def test_route_labels_classifier_follows_the_confident_classifier_over_the_labels(
    eval_settings: Settings, tmp_path: Path
) -> None:
    """``eval.route="labels-classifier"``: a confident FACTOID or typed prediction routes
    the question as the server would; an unsure or missing one leaves the label's route."""
    records = load_wikinfqa(eval_settings.eval.data_dir, "nq").records
    eval_settings.eval.route = "labels-classifier"
    runner, answerer = labelled_runner(eval_settings, tmp_path / "run", records, ["DEBATE"] * 5)
    await runner.run(records, ["typed-rag"])
    # why -> REASON, how to (unsure) -> DEBATE, what -> FACTOID, is ... (none) -> DEBATE.
    expected = ["REASON", "DEBATE", "FACTOID", "DEBATE", "REASON"]
    assert [r.question for r in records][1].startswith("how to")
    assert answerer.forced == expected
    rows = {r["question_id"]: r for r in lines(tmp_path / "run" / ANSWERS)}
    assert [rows[r.question_id]["route"] for r in records] == expected
    assert all(r["type"] == "DEBATE" for r in rows.values())


METHODS_RUN = "rag,typed-rag,typed-rag@paper"


async def test_a_method_variant_is_typed_rag_with_its_profile_on_the_same_questions(
    eval_settings: Settings, tmp_path: Path
) -> None:
    """``typed-rag@paper`` answers in typed-rag mode, routed by the recorded labels, with
    the paper's method profile, and is paired with rag in the report; the default profile
    (typed-rag) is paired with the paper's too."""
    records = load_wikinfqa(eval_settings.eval.data_dir, "nq").records
    runner, _ = labelled_runner(eval_settings, tmp_path / "run", records, ["REASON"] * len(records))
    await runner.run(records, parse_methods(METHODS_RUN))
    rows = [r for r in lines(tmp_path / "run" / ANSWERS) if r["method"] == "typed-rag@paper"]
    assert len(rows) == len(records)
    assert all(r["answer"].startswith("typed-rag@paper answer") for r in rows)
    assert all(r["route"] == "REASON" and r["type_source"] == "forced" for r in rows)
    paired = paired_scores(lines(tmp_path / "run" / SCORES), parse_methods(METHODS_RUN))
    pairs = {(r["a"], r["b"]) for r in paired["rows"]}
    assert {
        ("typed-rag@paper", "rag"),
        ("typed-rag", "typed-rag@paper"),
    } <= pairs


async def test_default_protocol_stores_verdict_distributions(
    eval_settings: Settings, tmp_path: Path
) -> None:
    records = load_wikinfqa(eval_settings.eval.data_dir, "nq").records
    settings = eval_settings.model_copy(
        update={"eval": eval_settings.eval.model_copy(update={"judge_protocol": "linkage-prob"})}
    )
    engine = FakeEngine(linkage_responder({"rag": 1}, default=3))
    runner = EvalRunner(
        settings, tmp_path / "run", answerer=StandInAnswerer(), scorer_engine=engine, progress=False
    )
    await runner.run(records, ["llm", "rag"])
    assert engine.batches == [] and len(engine.choice_calls) == 10  # no text generation
    scores = {(r["method"], r["question_id"]): r for r in lines(tmp_path / "run" / SCORES)}
    row = scores[("rag", "nq_0")]
    assert row["protocol"] == "linkage-prob" and row["rank"] == 1 and row["dist"][0] == 1.0
    assert scores[("llm", "nq_0")]["rank"] == 3


async def test_committed_runs_can_leave_passage_texts_out(
    eval_settings: Settings, tmp_path: Path
) -> None:
    records = load_wikinfqa(eval_settings.eval.data_dir, "nq").records[:2]
    settings = eval_settings.model_copy(
        update={"eval": eval_settings.eval.model_copy(update={"store_passage_text": False})}
    )
    runner = EvalRunner(
        settings,
        tmp_path / "run",
        answerer=StandInAnswerer(),
        scorer_engine=FakeEngine(linkage_responder()),
        progress=False,
    )
    await runner.run(records, ["rag"])
    (passage,) = lines(tmp_path / "run" / ANSWERS)[0]["result"]["passages"]
    assert passage["id"] == "p1" and passage["citation"] == 1 and "text" not in passage


class CitingAnswerer(StandInAnswerer):
    """Answers that cite the shown passage and vouch for it, as typed-rag's do."""

    def _one(self, question: str, mode: str, force_type: str | None = None):  # type: ignore[override]
        result = super()._one(question, mode, force_type)
        result.answer = (
            f"Chlorophyll breaks down [1]. {result.answer}. This is supported by the references."
        )
        return result


@pytest.mark.parametrize(
    ("citations", "source_talk"), [("keep", "keep"), ("strip", "keep"), ("strip", "strip")]
)
async def test_judge_view_sets_what_the_judge_reads(
    eval_settings: Settings, tmp_path: Path, citations: str, source_talk: str
) -> None:
    records = load_wikinfqa(eval_settings.eval.data_dir, "nq").records[:2]
    view = {"judge_citations": citations, "judge_source_talk": source_talk}
    settings = eval_settings.model_copy(update={"eval": eval_settings.eval.model_copy(update=view)})
    engine = FakeEngine(linkage_responder())
    runner = EvalRunner(
        settings, tmp_path / "run", answerer=CitingAnswerer(), scorer_engine=engine, progress=False
    )
    await runner.run(records, ["rag"])
    prompts = [m["content"] for call in engine.calls for m in call.messages]
    judged = [p for p in prompts if "Chlorophyll breaks down" in p]
    assert len(judged) == 2
    assert all(("breaks down [1]." in p) == (citations == "keep") for p in judged)
    assert all("breaks down." in p for p in judged) == (citations == "strip")
    assert all(("supported by the references" in p) == (source_talk == "keep") for p in judged)
    stored = lines(tmp_path / "run" / ANSWERS)[0]["answer"]  # the answer itself is kept
    assert stored.startswith("Chlorophyll breaks down [1].")
    assert stored.endswith("This is supported by the references.")
    # A run judged one way cannot resume judged another (absent when kept: older runs match).
    identity = judge_identity(settings)
    assert ("citations" in identity) == (citations == "strip")
    assert ("source_talk" in identity) == (source_talk == "strip")
