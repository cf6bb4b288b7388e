"""The layout after finishing's removals (typed_rag.finishing.layout): ordered lists numbered
consecutively again, question headings left with nothing under them dropped, code untouched.
The answers are shortened from the stored documentation runs (runs/g6r)."""

from __future__ import annotations

import time

import pytest

from typed_rag.finishing.finish import finish
from typed_rag.finishing.layout import (
    drop_empty_questions,
    drop_repeated_lines,
    renumber_lists,
    uncite_non_claims,
)
from typed_rag.method_settings import MethodOptions
from typed_rag.result import CitedPassage, Result


def test_a_list_whose_first_item_was_removed_starts_at_one() -> None:
    # nodejs http.md: "1. **URL**: ..." was removed by the verification
    answer = (
        "It sends a request [1].\n\n2. **Options**: such as [1]:\n   - **timeout**: a number [1].\n"
        "3. **Callback**: runs on the response.\n4. **Return Value**: a `ClientRequest` [1]."
    )
    assert renumber_lists(answer) == (
        "It sends a request [1].\n\n1. **Options**: such as [1]:\n   - **timeout**: a number [1].\n"
        "2. **Callback**: runs on the response.\n3. **Return Value**: a `ClientRequest` [1]."
    )


def test_a_gap_is_closed_across_a_paragraph_and_a_new_list_starts_again() -> None:
    # reportlab bookmarkPage: "2. **Context and Usage**" was removed
    answer = (
        "1. **The attribute**: fits a rectangle [1].\n\nIt sets the zoom.\n\n"
        "3. **Use cases**:\n   1. A table.\n   3. A paragraph.\n4. **Drawbacks**: zoom.\n\n"
        "Steps:\n1. Open.\n3. Close."
    )
    assert renumber_lists(answer) == (
        "1. **The attribute**: fits a rectangle [1].\n\nIt sets the zoom.\n\n"
        "2. **Use cases**:\n   1. A table.\n   2. A paragraph.\n3. **Drawbacks**: zoom.\n\n"
        "Steps:\n1. Open.\n2. Close."
    )


def test_numbers_inside_a_code_block_are_never_touched() -> None:
    answer = "2. Write:\n```text\n5. not a list\n7. still code\n```\n3. Run it."
    assert (
        renumber_lists(answer)
        == "1. Write:\n```text\n5. not a list\n7. still code\n```\n2. Run it."
    )


def test_a_consecutive_list_is_left_as_it_is() -> None:
    answer = "1. One [1].\n2. Two.\n\n- a\n- b\n\n1. Again.\n2. And again."
    assert renumber_lists(answer) == answer


def test_question_headings_with_nothing_under_them_are_dropped() -> None:
    # c++-annotations tuples, a DEBATE answer whose sub-answers the verification removed
    answer = (
        "- **Should the user use tuples?** Tuples offer structured bindings.\n"
        "- **Why are tuples powerful?**\n"
        "- **When should tuples be used?** When the types differ [5].\n"
        "- **What are the drawbacks of using tuples?**\n"
        "- **How can the drawbacks be mitigated?**"
    )
    assert drop_empty_questions(answer) == (
        "- **Should the user use tuples?** Tuples offer structured bindings.\n"
        "- **When should tuples be used?** When the types differ [5]."
    )


def test_a_numbered_question_heading_before_the_next_one_goes_and_the_list_is_renumbered() -> None:
    # c++-annotations std::string vs std::wstring
    answer = (
        "- `std::string` holds `char` [1].\n\n"
        "2. **When should I use `std::wstring` [2]?**\n\n"
        "3. **What are the characteristics of `std::wstring`?**\n"
        "   - It holds `wchar_t` [2].\n\n"
        "4. **What are the characteristics of `std::string`?**\n"
        "   - It holds `char` [1]."
    )
    passages = [
        CitedPassage(citation=1, id="a", title="T", text="std::string holds char.", score=1.0),
        CitedPassage(citation=2, id="b", title="T", text="std::wstring holds wchar_t.", score=1.0),
    ]
    result = Result(
        question="string or wstring?", mode="typed-rag", answer=answer, passages=passages
    )
    done = finish(result, MethodOptions(), time.perf_counter())
    assert done.answer == (
        "- `std::string` holds `char` [1].\n\n"
        "1. **What are the characteristics of `std::wstring`?**\n"
        "   - It holds `wchar_t` [2].\n\n"
        "2. **What are the characteristics of `std::string`?**\n"
        "   - It holds `char` [1]."
    )


@pytest.mark.parametrize(
    "answer",
    [
        "**What are the advantages of X?**\n\nX is fast [1].",
        "1. **How does Y work?**\n   - It caches results [2].\n2. **Why?** Speed [2].",
        "Ask yourself:\n- Is X needed?\n- Is Y available?",  # plain questions are content
        "**What is X?**",  # never emptied
        "```text\n**What is X?**\n**What is Y?**\n```",
    ],
)
def test_question_headings_with_content_stay(answer: str) -> None:
    assert drop_empty_questions(answer) == answer


PASSAGES = [
    CitedPassage(
        citation=1,
        id="p",
        title="git",
        text="To undo the last commit but keep its changes, run git reset --soft HEAD^.",
        score=1.0,
    )
]
STEPS = (
    "1. Run `git reset --soft HEAD^` [1].\n2. Then run `git commit -a` to commit again [1].\n"
    "3. The changes stay in the working tree [1]."
)


def test_finish_renumbers_after_the_verification_removes_an_item() -> None:
    result = Result(
        question="How do I undo the last commit?",
        mode="typed-rag",
        corpus="documents",
        answer=STEPS,
        passages=PASSAGES,
    )
    done = finish(result, MethodOptions(drop_unshown_spans=True), time.perf_counter())
    assert done.answer == (
        "1. Run `git reset --soft HEAD^` [1].\n2. The changes stay in the working tree [1]."
    )


def test_a_streamed_answer_keeps_the_layout_it_was_sent_with() -> None:
    sent = "2. Run `git reset --soft HEAD^` [1].\n3. The changes stay in the working tree [1]."
    result = Result(question="Q?", mode="typed-rag", answer=sent, passages=PASSAGES)
    done = finish(result, MethodOptions(), time.perf_counter(), streamed=True)
    assert done.answer == sent


def test_headings_and_code_comments_lose_their_citations_and_sentences_keep_theirs() -> None:
    # cplusplus.pdf destructors (DEBATE) and unique_copy (INSTRUCTION), shortened
    answer = (
        "## Main perspectives on destructors [4]\n\n### Reasons to avoid destructors [3]\n"
        "- They run late [3].\n\n5. **Reference [5]**:\n**Options**: such as `timeout` [1].\n"
        "// Copy elements in reversed order [3]\n```cpp\nint a [2]; // kept [1]\n```"
    )
    assert uncite_non_claims(answer) == (
        "## Main perspectives on destructors\n\n### Reasons to avoid destructors\n"
        "- They run late [3].\n\n**Options**: such as `timeout` [1].\n"
        "// Copy elements in reversed order\n```cpp\nint a [2]; // kept [1]\n```"
    )


def test_a_heading_naming_only_sources_goes_and_what_stands_under_it_stays() -> None:
    # nodejs fs.open 'wx' (REASON): the model headed each paragraph "### Reference"
    answer = (
        "Opening fails if the path exists [1].\n\n### Reference\nUse `fs.open` [2].\n**Sources**"
    )
    assert (
        uncite_non_claims(answer) == "Opening fails if the path exists [1].\n\nUse `fs.open` [2]."
    )
    assert uncite_non_claims("### Referencing a member\nUse `this` [1].") == (
        "### Referencing a member\nUse `this` [1]."
    )


def test_a_lead_in_to_steps_loses_its_citation_and_a_claim_ending_in_a_colon_keeps_it() -> None:
    # cplusplus templates (INSTRUCTION): the judge read the lead-in as a claim of [1]
    answer = "The template can be used as follows [1]:\n1. Declare it [1].\nIt returns `x` [2]:"
    assert uncite_non_claims(answer) == (
        "The template can be used as follows:\n1. Declare it [1].\nIt returns `x` [2]:"
    )


def test_an_answer_that_is_only_a_cited_label_is_kept() -> None:
    assert uncite_non_claims("**Reference [2]**") == "**Reference [2]**"


def test_a_list_item_written_again_is_dropped_and_code_and_short_lines_stay() -> None:
    # cplusplus21 polymorphous wrappers: the same item three times, the citation aside
    item = "can refer to functions or functors having prototypes with standard conversions"
    answer = (
        f"- Wrappers {item} [3].\n- Wrappers {item} [3].\n2. wrappers {item}.\n"
        "- They are `std::function` objects [2].\n}\n}\n```\nint a; int b; int c; int d;\n"
        "int a; int b; int c; int d;\n```"
    )
    assert drop_repeated_lines(answer) == (
        f"- Wrappers {item} [3].\n- They are `std::function` objects [2].\n"
        "}\n}\n```\n"
        "int a; int b; int c; int d;\nint a; int b; int c; int d;\n```"
    )
