"""The instruction-following benchmark's checks: they decide ``system_followed_share``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SPEC = importlib.util.spec_from_file_location(
    "instructions_bench", Path(__file__).parents[2] / "benchmarks" / "instructions_bench.py"
)
bench = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench)


def check(name: str, answer: str) -> bool:
    return bench.CHECKS[name][1](bench.plain(answer))


def test_language_is_told_apart() -> None:
    assert check("french", "Les feuilles changent de couleur car la chlorophylle est détruite [1].")
    assert not check("french", "Leaves change color because the chlorophyll breaks down [1].")
    assert check("spanish", "Las hojas cambian de color porque la clorofila se degrada en otoño.")
    assert check("german", "Die Blätter ändern ihre Farbe, weil das Chlorophyll abgebaut wird.")
    assert not check("german", "Las hojas cambian de color porque la clorofila se degrada.")


def test_length_checks_ignore_citation_markers() -> None:
    assert check("one-sentence", "Bake it hot and slow for a crisp crust [1], [2].")
    assert not check("one-sentence", "Bake it hot. Let it cool for an hour [2].")
    assert check("30-words", " ".join(["word"] * 30) + " [1]")
    assert not check("30-words", " ".join(["word"] * 31))


def test_format_checks() -> None:
    assert check("three-bullets", "- practise daily\n- learn chords\n* play songs you like")
    assert not check("three-bullets", "- practise daily\n- learn chords")
    assert check("three-bullets", "1. practise\n2. chords\n3. songs")
    assert check("uppercase", "WE DREAM TO SORT MEMORIES [1].")
    assert not check("uppercase", "We dream to sort memories.")
    assert check("in-short", "**In short:** cold comes from evaporating refrigerant.")
    assert not check("in-short", "A refrigerator moves heat out. In short: it pumps heat.")
