"""Passages cut on structure: sizes, headings, pages, sentences, words, exact spans."""

from __future__ import annotations

import re

from indexes.documents.build import passage_title
from indexes.documents.chunk import chunk_document
from indexes.documents.document import DocumentBuilder


def sentences(n: int, tag: str) -> str:
    return " ".join(f"Sentence {i} of {tag} has exactly eight words." for i in range(n))


def test_passages_stay_in_bounds_and_keep_exact_spans() -> None:
    doc = DocumentBuilder()
    doc.heading("Intro", 1)
    for i in range(12):
        doc.paragraph(sentences(4 + i % 5, f"para{i}"))  # 32-64 words each
    built = doc.build("Guide")
    chunks = chunk_document(built, min_words=100, max_words=200)
    assert len(chunks) > 2
    for c in chunks:
        assert built.text[c.start : c.end] == c.text
        assert len(c.text.split()) <= 200
        assert c.section == "Intro"
        assert re.match(r"^Sentence \d+ of para\d+", c.text) and c.text.endswith("words.")
    assert all(len(c.text.split()) >= 100 for c in chunks[:-1])
    # every word of the paragraphs is in exactly one passage, in order (headings are titles)
    words = [w for c in chunks for w in c.text.split()]
    assert words == [w for b in built.blocks if b.kind == "text" for w in b.text.split()]


def test_headings_and_pages_end_passages() -> None:
    doc = DocumentBuilder()
    doc.heading("Chapter", 1)
    doc.heading("Part A", 2)
    doc.paragraph("Alpha text on page one.", page=1)
    doc.paragraph("More alpha text, now on page two.", page=2)
    doc.heading("Part B", 2)
    doc.paragraph("Beta text.", page=2)
    doc.heading("Appendix", 1)
    doc.paragraph("Gamma text.", page=3)
    chunks = chunk_document(doc.build("Book"))
    assert [(c.text, c.section, c.page) for c in chunks] == [
        ("Alpha text on page one.", "Part A", 1),
        ("More alpha text, now on page two.", "Part A", 2),
        ("Beta text.", "Part B", 2),
        ("Gamma text.", "Appendix", 3),
    ]


def test_a_long_paragraph_is_cut_between_sentences() -> None:
    doc = DocumentBuilder()
    doc.paragraph(sentences(60, "long"))  # 480 words, one paragraph
    chunks = chunk_document(doc.build("T"), min_words=100, max_words=200)
    assert [len(c.text.split()) for c in chunks] == [200, 200, 80]
    assert all(c.text.startswith("Sentence") and c.text.endswith("words.") for c in chunks)


def test_abbreviations_do_not_end_sentences() -> None:
    doc = DocumentBuilder()
    text = ("Dr. Smith met Mr. Jones at 5 p.m. in St. Louis, e.g. near the river. " * 30).strip()
    doc.paragraph(text)
    for c in chunk_document(doc.build("T"), min_words=20, max_words=40):
        assert c.text.startswith("Dr. Smith") and c.text.endswith("river.")


def test_a_sentence_longer_than_a_passage_is_cut_between_words_never_inside_one() -> None:
    doc = DocumentBuilder()
    words = [f"token{i:03d}" for i in range(450)]
    doc.paragraph(" ".join(words))
    chunks = chunk_document(doc.build("T"), min_words=100, max_words=200)
    assert [len(c.text.split()) for c in chunks] == [200, 200, 50]
    assert [w for c in chunks for w in c.text.split()] == words


def test_a_short_last_piece_joins_the_passage_before() -> None:
    doc = DocumentBuilder()
    doc.paragraph(sentences(25, "a"))  # 200 words
    doc.paragraph("Tiny tail.")
    chunks = chunk_document(doc.build("T"), min_words=100, max_words=200)
    assert len(chunks) == 1 and chunks[0].text.endswith("Tiny tail.")


def test_passage_title_is_document_title_and_section() -> None:
    assert passage_title("Workshop Manual", "Safety") == "Workshop Manual — Safety"
    assert passage_title("Workshop Manual", None) == "Workshop Manual"
    assert passage_title("Workshop Manual", "workshop manual") == "Workshop Manual"
