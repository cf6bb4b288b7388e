"""The gate-without-copies probe removes copied runs of the question, and only those."""

from __future__ import annotations

from benchmarks.gate_copies import without_question_copies
from eval.judging.validity import padding

QUESTION = "Why is the sky blue during the day?"


def test_a_quoted_question_is_removed_and_the_answer_kept() -> None:
    answer = "Sunlight scatters off air molecules. " + padding(QUESTION)
    out = without_question_copies(QUESTION, answer)
    assert "sky blue during" not in out
    assert out.startswith("Sunlight scatters off air molecules. Answering")
    assert out.endswith("a fuller picture of the question.")


def test_the_questions_words_in_the_answers_own_order_are_kept() -> None:
    answer = "The sky is blue because air scatters blue light more than red."
    assert without_question_copies(QUESTION, answer) == answer


def test_a_run_of_five_words_is_a_copy_and_four_is_not() -> None:
    assert without_question_copies(QUESTION, "So is the sky blue during noon.") == "So  noon."
    four = "So the sky blue during noon."
    assert without_question_copies(QUESTION, four) == four


def test_a_short_question_counts_whole() -> None:
    assert without_question_copies("Who won?", "Who won? Spain did.") == "? Spain did."
