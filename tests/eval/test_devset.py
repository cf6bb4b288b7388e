"""``eval devset``: development questions from corpus passages, graded by construction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cli.lab.eval_devset as cli_devset
from cli.main import main
from eval.data import devset
from eval.data.graded import load_graded
from eval.data.wikinfqa import SUBSETS
from eval.settings import load_lab_settings
from indexes import build_index
from tests.eval.conftest import make_record, write_subset
from typed_rag.classifier.base import TypePrediction
from typed_rag.config import Settings
from typed_rag.engines.base import ChatRequest
from typed_rag.engines.fake import FakeEngine
from typed_rag.retrieval.collections import WIKI, collection_dir
from typed_rag.retrieval.store import PassageStore, PassageStoreWriter
from typed_rag.types import QuestionType


def _prompt(request: ChatRequest) -> str:
    return request.messages[-1]["content"]


def responder(request: ChatRequest) -> str:
    """Questions named after their passage's title; each reference kind says what it is."""
    prompt = _prompt(request)
    if prompt.startswith("Here is a passage"):
        title = prompt.split("titled ", 1)[1].split(".\n", 1)[0].strip("'\"")
        if "bad" in title:
            return "What does the passage say?"  # not stand-alone: dropped
        return f"Question: Why does {title} matter?\nExtra line."
    if "completely and accurately" in prompt:
        return "Answer: full answer about " + prompt.split("Question: ", 1)[1].split("\n", 1)[0]
    if "one short sentence" in prompt:
        return "partial answer"
    return "vague reply"


def write_store(folder: Path, titles: list[str], words: int = 90) -> PassageStore:
    with PassageStoreWriter(folder) as writer:
        for i, title in enumerate(titles):
            writer.add(f"p{i}", title, " ".join(["word"] * words))
    return PassageStore(folder)


def test_clean_question() -> None:
    assert devset.clean_question('Question: "Why is the sky blue?"\nmore') == "Why is the sky blue?"
    assert devset.clean_question("Why is the sky blue") is None  # not a question
    assert devset.clean_question("What does this passage describe?") is None
    assert devset.clean_question("   ") is None


def test_sources_one_per_article_types_in_turn(tmp_path: Path) -> None:
    titles = ["A", "A", "B", "near", "C", "D", "E", "F", "G", "H"]
    store = write_store(tmp_path / "store", titles)
    try:
        sources = devset.sample_sources(store, 7, seed=1, excluded_titles={"near"})
        again = devset.sample_sources(store, 7, seed=1, excluded_titles={"near"})
    finally:
        store.close()
    assert sources == again  # seeded
    assert len({s.title for s in sources}) == 7
    assert "near" not in {s.title for s in sources}
    assert [s.type for s in sources] == [*devset.TYPES, devset.TYPES[0]]


def test_short_passages_are_not_sampled(tmp_path: Path) -> None:
    store = write_store(tmp_path / "store", ["A", "B"], words=20)
    try:
        assert devset.sample_sources(store, 2, seed=1, excluded_titles=set()) == []
    finally:
        store.close()


@pytest.mark.asyncio
async def test_batch_grades_by_construction() -> None:
    titles = ["X", "bad one", "Y", "Z"]
    sources = [devset.Source(f"p{i}", t, "text", devset.TYPES[i]) for i, t in enumerate(titles)]
    engine = FakeEngine(responder=responder)
    records = await devset.write_batch(engine.generate, sources)
    assert [r["question"] for r in records] == [
        "Why does X matter?",
        "Why does Y matter?",
        "Why does Z matter?",
    ]
    first = {ref["grade"]: ref["text"] for ref in records[0]["references"]}
    assert first == {
        3: "full answer about Why does X matter?",
        2: "partial answer",
        1: "vague reply",
        0: "full answer about Why does Y matter?",  # the next question's full answer
    }
    assert records[2]["references"][3]["text"] == "full answer about Why does X matter?"
    assert [r["type"] for r in records] == [devset.TYPES[0], devset.TYPES[2], devset.TYPES[3]]
    # the vague reply is written without the passage
    vague = [c for c in engine.calls if "no specific facts" in _prompt(c)]
    assert vague and all("Passage" not in _prompt(c) for c in vague)


@pytest.mark.asyncio
async def test_batch_with_one_usable_question_writes_nothing() -> None:
    sources = [devset.Source("p0", "X", "t", "REASON"), devset.Source("p1", "bad", "t", "REASON")]
    assert await devset.write_batch(FakeEngine(responder=responder).generate, sources) == []


def test_cli_writes_a_file_eval_run_reads_and_resumes(
    settings: Settings, nfqa_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_index(settings, show_progress=False)
    for subset in SUBSETS:  # every subset, one question on the tiny corpus's first article
        if not (nfqa_dir / subset).is_dir():
            write_subset(nfqa_dir, subset, [make_record(subset, 0, "what is the first topic")])
    engine = FakeEngine(responder=responder)
    monkeypatch.setattr(cli_devset.engines, "build_engine", lambda s: engine)
    # every question asked as REASON, which the stand-in classifier confirms
    reason_only = devset.Corpus(devset.WIKIPEDIA.what, ("REASON",), devset.QUESTION_ASKS)
    monkeypatch.setattr(devset, "WIKIPEDIA", reason_only)
    monkeypatch.setattr(cli_devset, "_confirm", lambda s: _as_asked)
    out = tmp_path / "dev" / "devset.jsonl"
    home = settings.home
    argv = ["--set", f"home={home}", "--set", f"corpus.path={settings.corpus.path}"]
    argv += ["--set", "engine.backend=fake", "--set", f"eval.data_dir={nfqa_dir}"]
    run = [*argv, "eval", "devset", "--out", str(out), "--n", "2", "--batch", "2", "--no-progress"]
    # the tiny corpus's passages are short: sample all of them
    monkeypatch.setattr(devset, "sample_sources", _all_sources(devset.sample_sources))
    assert main(run) == 0
    data = load_graded(out)
    assert len(data.records) == 2
    assert {r.subset for r in data.records} == {"dev"}
    assert all(
        json.loads(line)["type_check"]["attempt"] == 0 for line in out.read_text().splitlines()
    )
    calls = len(engine.calls)
    lines = out.read_text().splitlines()
    assert main(run) == 0  # resumed: nothing written again, no model call
    assert out.read_text().splitlines() == lines
    assert len(engine.calls) == calls
    titles = {json.loads(line)["title"] for line in lines}
    with_data = load_lab_settings(None, **{**settings.model_dump(), "eval.data_dir": str(nfqa_dir)})
    near = cli_devset.near_wikinfqa(with_data)
    assert near and not titles & near  # articles the Wiki-NFQA questions find are left out
    store = PassageStore(collection_dir(settings, WIKI))
    try:
        assert titles <= {store.get(d)[1] for d in range(len(store))}
    finally:
        store.close()


def _all_sources(sample):  # type: ignore[no-untyped-def]
    def sample_short(store, n, seed, excluded_titles, min_words=80, **kw):  # type: ignore[no-untyped-def]
        return sample(store, n, seed, excluded_titles, min_words=1, **kw)

    return sample_short


def test_cli_rejects_a_batch_of_one(settings: Settings, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    argv = ["--set", f"home={settings.home}", "eval", "devset", "--out", str(tmp_path / "d.jsonl")]
    assert main([*argv, "--batch", "1"]) == 2
    assert "--batch" in capsys.readouterr().err


@pytest.mark.asyncio
async def test_documentation_questions_are_asked_as_such_and_mark_the_unanswerable() -> None:
    types = devset.DOCUMENTATION.types
    sources = [
        devset.Source("d0", "Saving plots", "text", types[0]),
        devset.Source("d1", "Undoing commits", "text", types[3]),
        devset.Source("o0", "Proof sessions", "text", types[1], answerable=False),
    ]
    engine = FakeEngine(responder=responder)
    records = await devset.write_batch(engine.generate, sources, devset.DOCUMENTATION)
    asked = [_prompt(c) for c in engine.calls if _prompt(c).startswith("Here is a passage")]
    assert all("a page of software documentation" in p for p in asked)
    assert "should use, choose or avoid" in asked[1]  # DEBATE over docs: a should-I question
    assert [r.get("answerable", True) for r in records] == [True, True, False]
    # the unanswerable one is measured by its decline: no references written for it
    assert "references" not in records[2] and len(engine.calls) == len(sources) + 3 * 2


def test_documentation_types_rotate_over_the_sample(tmp_path: Path) -> None:
    store = write_store(tmp_path / "docs", [f"page {i}" for i in range(6)])
    try:
        sources = devset.sample_sources(store, 6, 1, set(), types=devset.DOCUMENTATION.types)
    finally:
        store.close()
    types = devset.DOCUMENTATION.types
    assert [s.type for s in sources] == [*types, types[0]]
    assert set(types) <= set(devset.QUESTION_ASKS)


def _predict(kind: str, confident: bool = True) -> TypePrediction:
    return TypePrediction(QuestionType(kind), {kind: 0.9 if confident else 0.3}, confident)


def _by_opening(questions):  # type: ignore[no-untyped-def]
    """A stand-in classifier: 'Why' questions are REASON, 'Should' ones DEBATE (unsure
    where they say 'maybe'), anything else FACTOID."""
    kinds = {"Why": "REASON", "Should": "DEBATE"}
    return [_predict(kinds.get(q.split()[0], "FACTOID"), "maybe" not in q) for q in questions]


def _as_asked(questions):  # type: ignore[no-untyped-def]
    return [_predict("REASON") for _ in questions]


def debate_on_resampling(request: ChatRequest) -> str:
    """At temperature 0 every question is a 'Why' one; sampled, a 'Should' one (an unsure
    one for the title 'hedged'), and for the title 'never' always 'Why'."""
    prompt = _prompt(request)
    if prompt.startswith("Here is a passage") and request.temperature:
        title = prompt.split("titled ", 1)[1].split(".\n", 1)[0].strip("'\"")
        if title == "never":
            return f"Why does {title} matter?"
        hedge = " maybe" if title == "hedged" else ""
        return f"Should {title} be done{hedge}?"
    return responder(request)


@pytest.mark.asyncio
async def test_a_question_the_classifier_types_otherwise_is_asked_again_then_dropped() -> None:
    sources = [
        devset.Source("p0", "X", "t", "REASON"),
        devset.Source("p1", "Y", "t", "DEBATE"),
        devset.Source("p2", "never", "t", "DEBATE"),
        devset.Source("p3", "hedged", "t", "DEBATE"),
    ]
    engine = FakeEngine(responder=debate_on_resampling)
    records = await devset.write_batch(engine.generate, sources, confirm=_by_opening)
    assert [(r["id"], r["question"]) for r in records] == [
        ("dev-p0", "Why does X matter?"),
        ("dev-p1", "Should Y be done?"),
    ]
    assert [r["type_check"]["attempt"] for r in records] == [0, 1]
    assert records[1]["type_check"] == {"predicted": "DEBATE", "probability": 0.9, "attempt": 1}
    asked = [c for c in engine.calls if _prompt(c).startswith("Here is a passage")]
    # p0 once; p1 twice; 'never' and 'hedged' (confident only about the wrong type, or
    # unsure of the right one) every attempt, each retry sampled with its own seed
    assert len(asked) == 1 + 2 + 2 * devset.ATTEMPTS
    assert sorted({(c.temperature, c.seed) for c in asked}) == [
        (0.0, 42),
        *((devset.RETRY_TEMPERATURE, 42 + a) for a in range(1, devset.ATTEMPTS)),
    ]


@pytest.mark.asyncio
async def test_without_a_classifier_each_passage_is_asked_once() -> None:
    sources = [devset.Source("p0", "X", "t", "DEBATE"), devset.Source("p1", "Y", "t", "DEBATE")]
    engine = FakeEngine(responder=debate_on_resampling)
    records = await devset.write_batch(engine.generate, sources)
    assert [r["question"] for r in records] == ["Why does X matter?", "Why does Y matter?"]
    assert all("type_check" not in r for r in records)


def test_records_written_before_the_check_are_checked_and_the_unconfirmed_asked_again() -> None:
    checked = {"id": "dev-a", "question": "Should A?", "type": "DEBATE",
               "type_check": {"predicted": "DEBATE", "probability": 0.8, "attempt": 2}}  # fmt: skip
    records = [
        checked,
        {"id": "dev-b", "question": "Why B?", "type": "REASON"},
        {"id": "dev-c", "question": "Why C?", "type": "DEBATE"},  # factual, typed otherwise
    ]
    kept, dropped = devset.recheck(records, _by_opening)
    assert kept == [checked, {**records[1], "type_check": {"predicted": "REASON",
                                                            "probability": 0.9, "attempt": 0}}]  # fmt: skip
    assert dropped == ["dev-c"]


def test_batches_skip_written_and_given_up_passages_and_close_the_gaps() -> None:
    sources = [devset.Source(f"p{i}", f"T{i}", "t", "REASON") for i in range(5)]
    todo = devset.batches(sources, 2, ["dev-p1", "dev-p2"])
    assert [[s.passage_id for s in b] for b in todo] == [["p0", "p3"], ["p4"]]
