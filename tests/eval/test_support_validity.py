"""``benchmarks.support_validity``: known-answer pairs for the support judge, and its scores."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from benchmarks.support_validity import (
    altered,
    auc,
    build_pairs,
    first_passages,
    judge,
    kept_rewrite,
    names_in,
    plot,
    reworded,
    sentence_of,
    summarize,
)
from typed_rag.engines.fake import FakeEngine

CRUST = (
    "the mantle below. The crust of the Earth is about 35 kilometres thick under the "
    "continents. Short one. It was first measured by Andrija Mohorovicic in 1909."
)
MOON = "The Moon orbits the Earth once every 27 days, as Galileo and Kepler described it."
TEXTS = {"p1": ("Crust", CRUST), "p2": ("Moon", MOON)}


def test_sentence_of_takes_whole_sentences_of_8_to_40_words() -> None:
    rng = random.Random(0)
    picks = {sentence_of(CRUST, rng) for _ in range(20)}
    # not the chunk's opening fragment, nor the short sentence
    assert picks == {
        "The crust of the Earth is about 35 kilometres thick under the continents.",
        "It was first measured by Andrija Mohorovicic in 1909.",
    }
    assert sentence_of("too short. also lower case and long enough to count here", rng) is None


def test_altered_changes_one_number_else_one_name() -> None:
    rng = random.Random(0)
    sentence = "It was first measured by Andrija Mohorovicic in 1909."
    number = altered(sentence, MOON, rng)
    assert number is not None and number.replace(number.split()[-1], "1909.") == sentence
    assert int(number.split()[-1].rstrip(".")) in {1912, 1916, 1920}
    named = "The crust was first measured by Andrija Mohorovicic."
    name = altered(named, MOON, rng)
    assert name is not None
    changed = [(a, b) for a, b in zip(named.split(), name.split(), strict=True) if a != b]
    assert len(changed) == 1 and changed[0][1].rstrip(".") in {"Moon", "Earth", "Galileo", "Kepler"}
    assert altered("it has no number nor name at all here.", MOON, rng) is None
    # a swap takes a name, never a word that only opens a sentence
    assert names_in("His work was praised. Because of Kepler, the Moon orbits.") == {
        "Kepler",
        "Moon",
    }


def test_build_pairs_makes_the_three_kinds_from_neighbouring_questions() -> None:
    pairs = build_pairs([("q1", "p1"), ("q2", "p2")], TEXTS, seed=1)
    kinds = [(p.kind, p.question_id, p.passage_id) for p in pairs]
    assert ("verbatim", "q1", "p1") in kinds and ("elsewhere", "q1", "p2") in kinds
    assert ("altered", "q1", "p1") in kinds and ("verbatim", "q2", "p2") in kinds
    verbatim = next(p for p in pairs if p.kind == "verbatim" and p.question_id == "q1")
    assert verbatim.statement in CRUST and verbatim.supported
    assert not next(p for p in pairs if p.kind == "altered").supported


def test_first_passages_skips_rows_without_passages_and_other_methods() -> None:
    rows = [
        {"method": "rag", "question_id": "q0", "result": {"passages": [{"id": "x"}]}},
        {"method": "typed-rag", "question_id": "q1", "result": {"passages": []}},
        {"method": "typed-rag", "question_id": "q2", "result": {"passages": [{"id": "p2"}]}},
    ]
    assert first_passages(rows, 5) == [("q2", "p2")]


def test_auc_and_summary_score_a_judge_against_the_known_answers() -> None:
    assert auc([0.9, 0.8], [0.1, 0.8]) == pytest.approx(0.875)
    assert auc([], [0.1]) is None
    pairs = build_pairs([("q1", "p1"), ("q2", "p2")], TEXTS, seed=1)
    perfect = [1.0 if p.supported else 0.0 for p in pairs]
    summary = summarize(pairs, perfect)
    assert all(k["accuracy"] == 1.0 for k in summary["kinds"].values() if k["pairs"])
    assert summary["auc_verbatim_vs_altered"] == 1.0
    always_yes = summarize(pairs, [0.9] * len(pairs))
    assert always_yes["kinds"]["altered"]["accuracy"] == 0.0
    assert always_yes["auc_verbatim_vs_elsewhere"] == 0.5


def test_judge_asks_the_support_prompt_once_per_pair_and_caches(tmp_path: Path) -> None:
    pairs = build_pairs([("q1", "p1"), ("q2", "p2")], TEXTS, seed=1)

    def chooser(req):  # supported when the statement's words are all in the passage
        text = req.messages[-1]["content"]
        passage, statement = text.split("Statement: ")
        ok = all(w in passage for w in statement.split())
        return {"yes": 0.9, "no": 0.1} if ok else {"yes": 0.1, "no": 0.9}

    engine = FakeEngine(lambda req: "", chooser=chooser)
    probs = asyncio.run(judge(pairs, TEXTS, engine, "fake", tmp_path, batch_size=2))
    assert [p > 0.5 for p in probs] == [p.supported for p in pairs]
    again = FakeEngine(lambda req: "", chooser=chooser)
    assert asyncio.run(judge(pairs, TEXTS, again, "fake", tmp_path, batch_size=2)) == probs
    assert again.choice_calls == []  # every verdict came from the cache


def test_plot_writes_a_figure(tmp_path: Path) -> None:
    pairs = build_pairs([("q1", "p1"), ("q2", "p2")], TEXTS, seed=1)
    path = plot(pairs, [0.5] * len(pairs), "llamacpp:judge", tmp_path / "p.png")
    assert path.stat().st_size > 1000


def test_a_rewrite_counts_only_when_it_keeps_every_number_and_name() -> None:
    sentence = "It was first measured by Andrija Mohorovicic in 1909."
    kept = "Andrija Mohorovicic first measured it in 1909."
    assert kept_rewrite(sentence, f'"{kept}"\nSome chatter.') == kept
    assert kept_rewrite(sentence, "Mohorovicic first measured it in 1910.") is None
    assert kept_rewrite(sentence, sentence) is None  # a copy is no rewrite
    assert kept_rewrite(sentence, "Measured in 1909.") is None  # too short to be the sentence


def test_reworded_pairs_come_from_the_generator_once(tmp_path: Path) -> None:
    pairs = build_pairs([("q1", "p1"), ("q2", "p2")], TEXTS, seed=1)
    engine = FakeEngine(lambda req: "In 1909 Andrija Mohorovicic was the first to measure it.")
    made = asyncio.run(reworded(pairs, engine, "fake", tmp_path, batch_size=4))
    # only the verbatim sentence whose facts the fixed rewrite keeps becomes a pair
    kept = [p for p in made if p.kind == "reworded"]
    assert all(p.supported for p in kept) and len(kept) <= 2
    again = FakeEngine(lambda req: "never asked")
    assert asyncio.run(reworded(pairs, again, "fake", tmp_path, batch_size=4)) == made
    assert again.calls == []
