"""Fixtures shared by every area: a small real corpus and isolated settings.

Area fixtures live in ``tests/<area>/conftest.py``.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from typed_rag.config import Settings, load_settings

TINY_PASSAGES: list[tuple[str, str, str]] = [
    (
        "p1",
        "Autumn leaf color",
        "Leaves change color in autumn because chlorophyll breaks down and carotenoids and anthocyanins become visible as days shorten.",
    ),
    (
        "p2",
        "Chlorophyll",
        "Chlorophyll is the green pigment plants use for photosynthesis; trees stop producing it when nights grow longer and colder.",
    ),
    (
        "p3",
        "Python (programming language)",
        "Python is a high-level programming language known for readability; it uses indentation to delimit blocks.",
    ),
    (
        "p4",
        "Java (programming language)",
        "Java is a statically typed, class-based programming language that runs on the Java virtual machine.",
    ),
    (
        "p5",
        "Coffee",
        "Coffee is a brewed drink made from roasted coffee beans; it contains caffeine, a stimulant.",
    ),
    (
        "p6",
        "Tea",
        "Tea is an aromatic beverage made by pouring hot water over cured leaves of Camellia sinensis; it contains less caffeine than coffee.",
    ),
    (
        "p7",
        "Bread",
        "To bake bread, mix flour, water, salt and yeast, knead the dough, let it rise, shape it and bake it in a hot oven.",
    ),
    (
        "p8",
        "Sourdough",
        "Sourdough bread is leavened by a starter of wild yeast and lactic acid bacteria instead of baker's yeast.",
    ),
    (
        "p9",
        "Nuclear power",
        "Supporters of nuclear power cite low carbon emissions and reliable baseload output as reasons to build reactors.",
    ),
    (
        "p10",
        "Nuclear power debate",
        "Opponents of nuclear power point to waste storage, accident risk and high construction costs.",
    ),
    (
        "p11",
        "Paris",
        "Paris is the capital and most populous city of France, known for the Eiffel Tower and the Louvre.",
    ),
    (
        "p12",
        "Backpacking",
        "Travellers who went backpacking in Europe report that rail passes and hostels keep costs low.",
    ),
    (
        "p13",
        "Sleep",
        "Sleep deprivation impairs memory and attention because the brain consolidates memories during deep sleep.",
    ),
    (
        "p14",
        "Exercise",
        "Regular aerobic exercise strengthens the heart, lowers blood pressure and improves mood.",
    ),
    (
        "p15",
        "Roman Empire",
        "The Western Roman Empire fell in 476 because of economic decline, military defeats and political instability.",
    ),
    (
        "p16",
        "Photosynthesis",
        "Photosynthesis converts light energy, water and carbon dioxide into glucose and oxygen in chloroplasts.",
    ),
]


def write_tsv(path: Path, rows: list[tuple[str, str, str]], header: bool = True) -> Path:
    """Write rows as a DPR psgs_w100.tsv file (id, text, title)."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter="\t", quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
        if header:
            writer.writerow(["id", "text", "title"])
        for pid, title, text in rows:
            writer.writerow([pid, text, title])
    return path


@pytest.fixture
def tiny_corpus(tmp_path: Path) -> Path:
    """A 16-passage corpus in DPR TSV format."""
    return write_tsv(tmp_path / "tiny.tsv", TINY_PASSAGES)


@pytest.fixture
def settings(tmp_path: Path, tiny_corpus: Path) -> Settings:
    """Settings isolated under ``tmp_path`` with the tiny corpus and the fake engine.

    The method profile is the paper's, which most pipeline tests are about (its three
    rounds and generated sub-answers); the default ``fast`` profile has its own tests.
    Retrieval is the paper's too (no per-query reranking): tests of the default reranking
    set ``retrieval.rerank_depth`` themselves.
    """
    return load_settings(
        None,
        **{
            "home": str(tmp_path / "home"),
            "corpus.path": str(tiny_corpus),
            "engine.backend": "fake",
            "method.profile": "paper",
            "retrieval.rerank_depth": 0,
        },
    )
