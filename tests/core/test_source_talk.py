"""``typed_rag.finishing.source_talk``: sentences that vouch for the answer's sources go, what the
sources say stays."""

import pytest

from typed_rag.finishing.finish import drop_sentences
from typed_rag.finishing.source_talk import is_source_talk


@pytest.mark.parametrize(
    "sentence",
    [
        "This can be found in references [1] and [3].",
        "This answer directly addresses the question and is supported by the references provided.",
        "The evidence for this cause is supported by [1], [2], and [3].",
        "This perspective is supported by [1] and [4].",
        "This is clearly stated in Answer 1 of the question-answer pairs.",
        "The reference [1] provides the details of the exhumation process and the DNA tests.",
        "- The answer is directly supported by the information in the references.",
        "These points are supported by the references provided.",
    ],
)
def test_source_talk_is_found(sentence: str) -> None:
    assert is_source_talk(sentence)


@pytest.mark.parametrize(
    "sentence",
    [
        # about the subject, with an attesting verb and a citation
        "This key is found on the 0 key in the US keyboard layout [1].",
        "This classification is based on the shape of its spiral arms [4].",
        "This view is supported by seismic waves and the study of the crust [1].",
        # what a source says, or lacks, is content
        "The passage mentions that Norway is a unitary constitutional monarchy [5].",
        "The passages do not mention the cause of his death [2].",
        'This is given directly in the reference [3] when it states "Eggs are fine".',
        "This is supported by the following references:",
        "The answer is 21 [3].",
    ],
)
def test_content_is_not_source_talk(sentence: str) -> None:
    assert not is_source_talk(sentence)


def test_drop_sentences_keeps_the_answer_when_all_would_go() -> None:
    answer = "The crust [4]. This answer is correct based on the first reference."
    assert drop_sentences(answer, is_source_talk) == "The crust [4]."
    talk = "This is supported by the references [1] and [2]."
    assert drop_sentences(talk, is_source_talk) == talk
