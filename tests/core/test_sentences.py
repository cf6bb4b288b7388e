"""Sentence ends that are not: initials and abbreviations (``typed_rag.finishing.sentences``), and the
two places they used to break a name in an answer (extracted evidence, post-citing)."""

from __future__ import annotations

import pytest

from typed_rag.finishing.citations import attach_citations, cited_sentences
from typed_rag.finishing.sentences import passage_sentences
from typed_rag.finishing.subanswers import extract_evidence
from typed_rag.result import CitedPassage


@pytest.mark.parametrize(
    "text,sentences",
    [
        ("He met John F. Kennedy. Then he left.", ["He met John F. Kennedy.", "Then he left."]),
        ("A. W. Sandberg was a director. He died.", ["A. W. Sandberg was a director.", "He died."]),
        ('"Sleeping Venus" (c. 1510) lies. Next!', ['"Sleeping Venus" (c. 1510) lies.', "Next!"]),
        ("St. Peter's is big. Mr. Smith came.", ["St. Peter's is big.", "Mr. Smith came."]),
        ("Use e.g. apples. Or approx. two pears?", ["Use e.g. apples.", "Or approx. two pears?"]),
        # A full stop before a lower-case word ends nothing; a line break always ends one.
        ("It rose ... and fell. Then\nit rose", ["It rose ... and fell.", "Then", "it rose"]),
        # Where an initial might end a sentence it is read as an initial (one sentence fewer).
        ("He served Pope Pius X. He died.", ["He served Pope Pius X. He died."]),
        ("It is in the U.S. The next day came.", ["It is in the U.S.", "The next day came."]),
    ],
)
def test_passage_sentences_end_at_full_stops_not_at_initials(
    text: str, sentences: list[str]
) -> None:
    assert [s for s in passage_sentences(text) if s.strip()] == sentences


def test_extracted_evidence_quotes_a_name_with_an_initial_whole() -> None:
    passage = "The law was challenged. Several attorneys, including Robert L. Goldberg, sued."
    assert extract_evidence([("attorneys sued Goldberg", [(2, passage)])], 1) == [
        "Several attorneys, including Robert L. Goldberg, sued. [2]"
    ]


def test_post_citing_cites_a_sentence_at_its_end_not_after_an_initial() -> None:
    passage = CitedPassage(
        citation=1,
        id="r",
        title="Rostker v. Goldberg",
        score=1.0,
        text="Several attorneys, including Robert L. Goldberg, challenged the draft law in court.",
    )
    answer = "Several attorneys, including Robert L. Goldberg, challenged the draft law."
    recited = attach_citations(answer, [passage], min_share=0.7)
    assert recited.answer == (
        "Several attorneys, including Robert L. Goldberg, challenged the draft law [1]."
    )
    assert cited_sentences(recited.answer) == [(recited.answer, [1])]
