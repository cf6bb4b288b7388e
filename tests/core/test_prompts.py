"""Prompts: numbered passages with titles, the cite rule, and each step's inputs present."""

from __future__ import annotations

from typed_rag.messages import cited_numbers
from typed_rag.pipelines.comparison import comparison_messages, comparison_plan_messages
from typed_rag.pipelines.debate import debate_plan_messages, mediator_messages
from typed_rag.pipelines.decomposition import aggregation_messages, decomposition_plan_messages
from typed_rag.pipelines.experience import experience_plan_messages
from typed_rag.pipelines.prompting import CITE_RULE, llm_messages, rag_messages
from typed_rag.result import CitedPassage


def cited(n: int, title: str, text: str) -> CitedPassage:
    return CitedPassage(citation=n, id=f"p{n}", title=title, text=text, score=1.0)


PASSAGES = [cited(1, "Tea", "Tea has less caffeine."), cited(2, "Coffee", "Coffee has caffeine.")]


def test_every_builder_returns_system_then_user() -> None:
    builders = [
        llm_messages("q?"),
        rag_messages("q?", PASSAGES),
        comparison_plan_messages("q?"),
        comparison_messages("q?", "differences", ["tea", "coffee"], PASSAGES),
        experience_plan_messages("q?"),
        decomposition_plan_messages("q?", "REASON"),
        aggregation_messages("q?", [("a?", "b")]),
        debate_plan_messages("q?"),
        mediator_messages("q?", "topic", [("pro", "yes")]),
    ]
    for messages in builders:
        assert [m["role"] for m in messages] == ["system", "user"]
        assert "q?" in messages[1]["content"]


def test_passages_are_numbered_with_titles_and_answers_told_to_cite() -> None:
    user = rag_messages("Which has more caffeine?", PASSAGES)[1]["content"]
    assert "[1] Tea\nTea has less caffeine." in user
    assert "[2] Coffee\nCoffee has caffeine." in user
    assert "[1]" in CITE_RULE and "cite" in user.lower()
    assert user.index("### References") < user.index("### Question")


def test_rag_without_passages_is_the_llm_prompt() -> None:
    assert rag_messages("Why?", []) == llm_messages("Why?")
    assert "References" not in llm_messages("Why?")[1]["content"]


def test_comparison_prompt_carries_type_and_keywords() -> None:
    user = comparison_messages("Tea or coffee?", "superiority", ["tea", "coffee"], PASSAGES)
    user = user[1]["content"]
    assert "superiority" in user and "tea; coffee" in user and "[2] Coffee" in user


def test_decomposition_prompt_depends_on_type() -> None:
    reason = decomposition_plan_messages("q?", "REASON")[1]["content"]
    instruction = decomposition_plan_messages("q?", "INSTRUCTION")[1]["content"]
    assert reason != instruction
    assert "why" in reason and "how to" in instruction
    assert "2 and 5" in reason


def test_aggregator_and_mediator_see_every_pair() -> None:
    agg = aggregation_messages("Why?", [("a1?", "x [1]"), ("a2?", "y [2]")])[1]["content"]
    assert "Question 1: a1?\nAnswer 1: x [1]" in agg and "Question 2: a2?" in agg
    med = mediator_messages("Q?", "nuclear", [("pro", "good"), ("con", "bad")])[1]["content"]
    assert "nuclear" in med and "(perspective: pro)" in med and "(perspective: con)" in med
    assert "Response 1" in med and "### Responses" in med


def test_cited_numbers_in_order_of_first_use() -> None:
    assert cited_numbers("a [2] b [1][2] c [10]") == [2, 1, 10]
    assert cited_numbers("no citations") == []
