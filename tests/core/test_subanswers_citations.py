"""The pure helpers of issue 15: uninformative sub-answers and citation checks."""

from __future__ import annotations

import pytest

from typed_rag.finishing.citations import (
    attach_citations,
    check_citations,
    citation_share,
    cited_sentences,
    strip_invalid,
)
from typed_rag.finishing.subanswers import anchor, body, uninformative
from typed_rag.messages import cited_numbers
from typed_rag.result import CitedPassage, Result


@pytest.mark.parametrize(
    "query,answer,reason",
    [
        ("benefits of coffee", "", "empty"),
        ("benefits of coffee", "  \n ", "empty"),
        # The DEBATE perspective: the query restated, then a references list.
        (
            "coffee gives an energy boost",
            "Energy boost from coffee\n\nReferences:\n[6]",
            "restates-query",
        ),
        ("why do cats purr", "References:\n[6]\n[7]", "references-only"),
        ("why do cats purr", "[1][2]", "references-only"),
        ("why do cats purr", "**Sources:** [3]", "references-only"),
        ("why do cats purr", "Cats purr [2].", "restates-query"),
        ("benefits of nuclear power", "The benefits of nuclear power.", "restates-query"),
        (
            "why do cats purr",
            "The provided passages do not contain information about why cats purr.",
            "no-information",
        ),
        ("why do cats purr", "I cannot answer this from the references.", "no-information"),
        (
            "why do cats purr",
            "I cannot answer this based on the references. They discuss dogs only.",
            "no-information",
        ),
        (
            "why do cats purr",
            "There is no relevant information in the passages [1].",
            "no-information",
        ),
    ],
)
def test_uninformative_names_the_reason(query: str, answer: str, reason: str) -> None:
    assert uninformative(query, answer) == reason


@pytest.mark.parametrize(
    "query,answer",
    [
        (
            "why do cats purr",
            "Cats purr by vibrating the muscles of the larynx, which signals contentment [1].",
        ),
        # A disclaimer beside real content keeps the answer.
        (
            "what is chlorophyll",
            "Chlorophyll is the green pigment used in photosynthesis [2]. "
            "The passages do not mention its colour in autumn.",
        ),
        # "unknown" as content is information.
        (
            "why did Rome fall",
            "Historians cite economic decline and invasions; the exact cause is unknown [3].",
        ),
        (
            "how to bake bread",
            "1. Mix flour and water.\n2. Knead.\n3. Bake hot.\n\nReferences:\n[7]",
        ),
    ],
)
def test_informative_answers_are_kept(query: str, answer: str) -> None:
    assert uninformative(query, answer) is None


def test_body_cuts_only_a_trailing_references_block() -> None:
    assert (
        body("Tea has less caffeine [6].\n\nReferences:\n[6] Tea") == "Tea has less caffeine [6]."
    )
    assert body("Sources of caffeine include tea.") == "Sources of caffeine include tea."


def test_cited_numbers_reads_lists_small_models_write() -> None:
    assert cited_numbers("a [2, 3] b [3;1] c [4][2] d [x] e [1000]") == [2, 3, 1, 4]


def test_check_and_strip_invalid_citations() -> None:
    answer = "Tea has less caffeine [2, 9]. Coffee wakes you up [9]. Both are drinks [1][7]."
    check = check_citations(answer, {1, 2, 3})
    assert check.valid == [2, 1] and check.invalid == [9, 7]
    assert strip_invalid(answer, {1, 2, 3}) == (
        "Tea has less caffeine [2]. Coffee wakes you up. Both are drinks [1]."
    )
    assert strip_invalid("No citations here.", {1}) == "No citations here."


def test_cited_sentences_attach_trailing_citations() -> None:
    answer = "Tea has less caffeine [2]. Coffee is roasted. [5]\n1. Brew it [1, 3].\nDone."
    assert cited_sentences(answer) == [
        ("Tea has less caffeine [2].", [2]),
        ("Coffee is roasted. [5]", [5]),
        ("1. Brew it [1, 3].", [1, 3]),
    ]


def _result(answer: str, shown: list[int], check: bool) -> Result:
    r = Result(question="q", mode="typed-rag", answer=answer)
    r.passages = [
        CitedPassage(citation=n, id=f"p{n}", title="t", text="x", score=1.0) for n in shown
    ]
    if check:
        c = check_citations(answer, set(shown))
        r.citations, r.invalid_citations = c.valid, c.invalid
    return r


def test_citation_share_counts_answers_citing_a_shown_passage() -> None:
    rows = [
        _result("Cited [1].", [1, 2], check=True),
        _result("Wrong number [5].", [1, 2], check=True),
        _result("No citation.", [1], check=True),
        _result("Old trace without the fields [2].", [1, 2], check=False),
    ]
    assert citation_share(rows) == pytest.approx(0.5)
    # answers.jsonl stores the trace as a dict; an old dict has no "citations" key.
    dicts = [r.model_dump(mode="json") for r in rows]
    del dicts[3]["citations"], dicts[3]["invalid_citations"]
    assert citation_share(dicts) == pytest.approx(0.5)
    assert citation_share([]) is None


def test_anchor_attaches_the_question_to_vague_sub_queries() -> None:
    q = "Why did the Radicals and Tories oppose the bill about the constitution of Jamaica?"
    assert anchor(q, "why did the radicals and Tories oppose the bill?") == (
        "why did the radicals and Tories oppose the bill?"
    )
    assert anchor(q, "what was the bill about?") == f"what was the bill about? (context: {q})"
    assert anchor("Why?", "anything at all") == "anything at all"  # nothing to share


def test_attach_citations_keeps_layout_and_skips_weak_matches() -> None:
    passages = [
        CitedPassage(
            citation=4,
            id="b",
            title="Bread",
            score=1.0,
            text=("To bake bread, mix flour, water, salt and yeast, knead the dough, let it rise."),
        ),
        CitedPassage(
            citation=2,
            id="t",
            title="Tea",
            score=1.0,
            text=("Tea is an aromatic drink; it contains less caffeine than coffee."),
        ),
    ]
    answer = (
        "Steps:\n1. Mix flour, water, salt and yeast.\n2. Knead the dough [9].\n"
        "3. Enjoy it with friends.\nTea contains less caffeine than coffee! It is aromatic"
    )
    recited = attach_citations(answer, passages)
    assert recited.answer == (
        "Steps:\n1. Mix flour, water, salt and yeast [4].\n2. Knead the dough [9].\n"
        "3. Enjoy it with friends.\nTea contains less caffeine than coffee [2]! It is aromatic"
    )
    assert recited.added == [4, 2] and recited.dropped == []
    assert attach_citations(answer, []).answer == answer


def _coffee_and_tea() -> list[CitedPassage]:
    tea = "Green tea leaves are steamed, rolled and dried before brewing in hot water."
    return [
        CitedPassage(
            citation=1, id="c", title="Coffee", score=1.0, text="Coffee contains caffeine."
        ),
        CitedPassage(citation=3, id="t", title="Tea", score=1.0, text=tea),
    ]


def test_attach_citations_drops_or_moves_citations_whose_passage_shares_too_few_words() -> None:
    passages = _coffee_and_tea()
    answer = (
        "Green tea leaves are steamed and dried [1]. Tea leaves are rolled before brewing [3]. "
        "Monks grew orchards near temples [1]."
    )
    recited = attach_citations(answer, passages)
    assert recited.answer == (
        "Green tea leaves are steamed and dried [3]. Tea leaves are rolled before brewing [3]. "
        "Monks grew orchards near temples."
    )
    assert recited.added == [3] and recited.dropped == [1, 1]
    # Citations written into the wording are the model's and stay.
    wording = "The sources on monks and orchards include [1] and [3]. Per [1], monks grew orchards."
    assert attach_citations(wording, passages).answer == wording


def test_a_run_of_groups_ending_or_opening_a_sentence_is_checked_like_one_group() -> None:
    passages = _coffee_and_tea()
    answer = (
        "Monks grew orchards near temples [1][3]. Tea leaves are rolled before brewing [1], [3].\n"
        "[1] [3] Monks grew orchards near temples."
    )
    recited = attach_citations(answer, passages)
    # No passage holds the monks: their runs go; the tea sentence's run holds through [3].
    assert recited.answer == (
        "Monks grew orchards near temples. Tea leaves are rolled before brewing [1], [3].\n"
        "Monks grew orchards near temples."
    )
    assert recited.dropped == [1, 3, 1, 3] and recited.added == []
    # Groups apart in the wording are not one run: the model's, and they stay.
    wording = "Monks grew orchards [1] near temples [3]."
    assert attach_citations(wording, passages).answer == wording


def test_attach_citations_min_share_is_the_bar_for_adding_and_keeping() -> None:
    passages = [
        CitedPassage(
            citation=2,
            id="b",
            title="Bread",
            score=1.0,
            text="Knead the dough, let it rise, then bake it in a hot oven.",
        )
    ]
    # 3 of the 5 content words (knead, dough, oven) are in the passage: share 0.6.
    answer = "Knead the dough slowly beside the oven."
    assert attach_citations(answer, passages, min_share=0.6).added == [2]
    assert attach_citations(answer, passages, min_share=0.7).added == []
    cited = "Knead the dough slowly beside the oven [2]."
    kept, dropped = (attach_citations(cited, passages, min_share=s) for s in (0.6, 0.7))
    assert kept.answer == cited and kept.dropped == []
    assert dropped.answer == answer and dropped.dropped == [2]


def test_re_citing_at_a_higher_share_equals_citing_there_first() -> None:
    """What benchmarks/cite_share_sweep.py relies on to re-cite committed answers."""
    passages = _coffee_and_tea()
    answer = (
        "Green tea leaves are steamed and dried slowly by farmers.\n"
        "Tea leaves are rolled before brewing. Coffee drinkers like caffeine in tea leaves.\n"
        "Sources include [1] and [3]."
    )
    for low, high in ((0.3, 0.5), (0.3, 0.8), (0.5, 0.6)):
        once = attach_citations(answer, passages, high).answer
        assert (
            attach_citations(attach_citations(answer, passages, low).answer, passages, high).answer
            == once
        )
    assert (
        attach_citations(answer, passages, 0.3).answer
        != attach_citations(answer, passages, 0.8).answer
    )


def test_floor_share_gives_an_answer_citing_nothing_its_best_match_only() -> None:
    passages = _coffee_and_tea()
    # Shares with the tea passage: 3 of 6 words (0.5) and 3 of 7 (0.43).
    answer = (
        "Green tea tastes grassy when dried carefully. "
        "Monks steamed tea leaves in quiet mountain temples."
    )
    assert attach_citations(answer, passages, 0.7).answer == answer  # no floor: nothing
    floored = attach_citations(answer, passages, 0.7, floor_share=0.4)
    assert floored.answer == (
        "Green tea tastes grassy when dried carefully [3]. "
        "Monks steamed tea leaves in quiet mountain temples."
    )
    assert floored.added == [3]
    assert attach_citations(answer, passages, 0.7, floor_share=0.65).answer == answer  # below
    # An answer that already cites a shown passage gets nothing more from the floor.
    strong = "Green tea leaves are steamed, rolled and dried. Monks steamed tea leaves in temples."
    assert attach_citations(strong, passages, 0.7, floor_share=0.3).answer == (
        "Green tea leaves are steamed, rolled and dried [3]. Monks steamed tea leaves in temples."
    )
    # Re-citing at a stricter share with the floor equals citing there first (the sweep).
    for low, high in ((0.3, 0.7), (0.5, 0.8)):
        once = attach_citations(answer, passages, high, 0.4).answer
        assert (
            attach_citations(
                attach_citations(answer, passages, low).answer, passages, high, 0.4
            ).answer
            == once
        )


def test_post_citing_reads_a_group_after_the_full_stop_as_the_sentence_before_it() -> None:
    passages = _coffee_and_tea()
    answer = "Green tea leaves are steamed, rolled and dried. [3] Monks grew orchards near temples."
    recited = attach_citations(answer, passages, 0.5)
    assert recited.answer == (
        "Green tea leaves are steamed, rolled and dried [3]. Monks grew orchards near temples."
    )
    assert recited.added == recited.dropped == []


def test_a_leading_group_is_checked_like_a_trailing_one() -> None:
    passages = _coffee_and_tea()
    answer = "[1] Green tea leaves are steamed and dried.\n[3] Monks grew orchards near temples."
    recited = attach_citations(answer, passages, 0.5)
    # The first line's passage shares too few words and moves; the second has no match.
    assert (
        recited.answer
        == "Green tea leaves are steamed and dried [3].\nMonks grew orchards near temples."
    )
    assert recited.dropped == [1, 3] and recited.added == [3]
    held = "1. [3] Green tea leaves are steamed and dried."
    assert attach_citations(held, passages, 0.5).answer == held


def test_lines_that_only_point_at_passages_are_removed() -> None:
    passages = _coffee_and_tea()
    answer = (
        "- Green tea leaves are steamed and dried [3].\n- **Reference:** [1]\nSources: [1][3]\n"
        "- [1] 6 days"
    )
    recited = attach_citations(answer, passages, 0.5)
    assert recited.answer == "- Green tea leaves are steamed and dried [3].\n- [1] 6 days"
    assert recited.dropped == [1, 1, 3]


def test_a_group_repeated_after_the_full_stop_or_on_its_own_line_is_written_once() -> None:
    """The small model's stray duplicates: "dried [3]. [3]" at a line's end and a bare
    "[3]" line after the answer; a different number after the stop still moves in."""
    passages = _coffee_and_tea()
    answer = (
        "Green tea leaves are steamed and dried [3]. [3]\n"
        "Green tea leaves are rolled and dried. [3][3]\n\n[3]"
    )
    recited = attach_citations(answer, passages, 0.5)
    assert recited.answer == (
        "Green tea leaves are steamed and dried [3].\nGreen tea leaves are rolled and dried [3].\n"
    )
    assert recited.added == [] and recited.dropped == [3]
    moved = attach_citations("Green tea leaves are steamed and dried [3]. [1]", passages, 0.0)
    assert moved.answer == "Green tea leaves are steamed and dried [3] [1]."
    listed = "1. [3]\n2. Green tea leaves are steamed and dried [3]."
    assert attach_citations(listed, passages, 0.5).answer == listed
    # Under a paragraph that cites nothing, a reference line is its citation.
    bare = attach_citations("Green tea leaves are steamed.\n\n[3][1]\nSources: [2]", passages, 1.0)
    assert bare.answer == "Green tea leaves are steamed [3][1].\n"
    assert bare.dropped == [2]
    spaced = attach_citations("Green tea leaves are steamed. \n[3]", passages, 1.0)
    assert spaced.answer == "Green tea leaves are steamed [3]. "


def test_without_citations_removes_every_group_and_the_space_before_punctuation() -> None:
    from typed_rag.finishing.citations import without_citations

    answer = "Tea is good [1]. Coffee [2, 3], milk [4]; water. [5]\n1. Step [6]"
    assert without_citations(answer) == "Tea is good. Coffee, milk; water.\n1. Step"


def test_code_copied_into_an_answer_keeps_its_indexes_and_gets_no_citations() -> None:
    """The C++ Annotations answer of the grounding devset: ``char name[80];`` lost its [80]
    as a citation of an unshown passage, and the line was then post-cited ``name [2];``."""
    page = (
        "An imaginary C header file showing this concept is: typedef struct { char name[80]; "
        "char address[80]; } PERSON; void initialize(PERSON *p, char const *nm, char const "
        "*adr); In C++ the declarations of the involved functions are put inside the struct."
    )
    passages = [CitedPassage(citation=2, id="c", title="Structs in C", score=1.0, text=page)]
    answer = (
        "A C header shows this concept [2]:\n"
        "typedef struct { char name[80];\n"
        "char address[80];\n"
        "void initialize(PERSON *p, char const *nm, char const *adr);\n"
        "```c\nvoid initialize(PERSON *p, char const *nm, char const *adr)\n```\n"
        "In C++ the declarations of the functions are put inside the struct."
    )
    assert cited_numbers(answer) == [2]
    assert strip_invalid(answer, {2}) == answer
    recited = attach_citations(answer, passages)
    lines = recited.answer.splitlines()
    assert lines[1:6] == answer.splitlines()[1:6]  # code lines and the fenced block unchanged
    assert lines[-1].endswith("inside the struct [2].")  # the prose line is still cited
    assert recited.added == [2]
