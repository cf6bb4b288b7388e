"""Tree parsing and the quality check, outline connectedness and trimming, instructions, judge."""

from __future__ import annotations

import json
import math

import pytest

from tests.qtree.helpers import tree_dict
from training.qtree.judge import SCORES, judge_outlines, to_score
from typed_rag.engines.fake import FakeEngine
from typed_rag.qtree.coverage import (
    conditioned_question,
    draw_background,
    instruction_schema,
    parse_instructions,
)
from typed_rag.qtree.outlines import (
    check_outline,
    follows_rule,
    is_connected,
    outline_schema,
    parse_outlines,
    trim,
)
from typed_rag.qtree.prompts import instruction_messages, outline_messages
from typed_rag.qtree.tree import QTree, TreeError, parse_tree, tree_schema


@pytest.fixture
def tree() -> QTree:
    return parse_tree(json.dumps(tree_dict()), "Tell me about tea.")


def test_tree_has_39_numbered_nodes_in_preorder(tree: QTree) -> None:
    assert len(tree.nodes) == 3 + 9 + 27
    ids = list(tree.nodes)
    assert ids[:5] == ["1", "1.1", "1.1.1", "1.1.2", "1.1.3"]
    assert tree.text("2.3.1") == "What about tea aspect 2.3.1?"
    assert tree.children("2") == ["2.1", "2.2", "2.3"]
    assert len(tree.descendants("3")) == 12
    assert "  1.1. What about tea aspect 1.1?" in tree.render().splitlines()
    assert QTree.from_dict(tree.to_dict()) == tree


def test_schema_fixes_width_at_every_level() -> None:
    schema = tree_schema(3, 3)
    top = schema["properties"]["subqueries"]
    assert top["minItems"] == top["maxItems"] == 3
    leaves = top["items"]["properties"]["children"]["items"]["properties"]["children"]
    assert leaves["minItems"] == 3 and leaves["items"]["type"] == "string"


def test_paper_dict_shape_and_fences_are_accepted() -> None:
    paper = {
        f"{i}. Top {i}?": {
            f"{i}.{j}. Mid {i}.{j}?": [f"{i}.{j}.{k}. Leaf {i}.{j}.{k}?" for k in (1, 2, 3)]
            for j in (1, 2, 3)
        }
        for i in (1, 2, 3)
    }
    tree = parse_tree("Here:\n```json\n" + json.dumps(paper) + "\n```", "q")
    assert tree.text("1") == "Top 1?" and tree.text("3.2.1") == "Leaf 3.2.1?"


def test_extra_children_are_cut_and_missing_ones_fail() -> None:
    data = tree_dict()
    data["subqueries"].append({"question": "extra?", "children": []})
    assert len(parse_tree(json.dumps(data), "q").nodes) == 39
    data = tree_dict()
    data["subqueries"][1]["children"][2]["children"].pop()
    with pytest.raises(TreeError, match="2.3 has 2 children"):
        parse_tree(json.dumps(data), "q")


def test_repeated_subqueries_fail_the_quality_check() -> None:
    data = tree_dict()
    data["subqueries"][2]["children"][0]["children"][1] = "what about TEA aspect 1.1?"
    with pytest.raises(TreeError, match="repeats 1.1"):
        parse_tree(json.dumps(data), "q")
    with pytest.raises(TreeError, match="no JSON"):
        parse_tree("I cannot do that.", "q")


@pytest.mark.parametrize(
    ("ids", "connected"),
    [
        (["1", "1.1", "1.1.1", "1.1.2"], True),  # a branch
        (["1.1", "1.2", "1.1.1", "1.2.3"], True),  # siblings stand in for the missing parent
        (["1", "2", "2.1", "3"], True),  # top-level nodes are siblings
        (["1.1.1", "1.1.2", "1.2", "2"], False),  # 2 joins nothing
        (["1.1.1", "2.1.1", "1.1", "2.1"], False),  # two pieces
        ([], False),
    ],
)
def test_connectedness(ids: list[str], connected: bool) -> None:
    assert is_connected(ids) is connected


def test_trim_drops_deepest_leaves_and_keeps_the_outline_connected() -> None:
    assert trim(["1", "1.1", "1.1.1", "1.1.2", "1.1.3", "1.2"]) == ["1", "1.1", "1.1.1", "1.2"]
    assert trim(["1.1.2", "1", "1.1"], 4) == ["1", "1.1", "1.1.2"]


def test_check_outline_rule_and_size(tree: QTree) -> None:
    assert check_outline(["1", "1.1. text", "1.1.1", "1.1.2"], tree).ids == (
        "1",
        "1.1",
        "1.1.1",
        "1.1.2",
    )
    with pytest.raises(TreeError, match="unknown node"):
        check_outline(["1", "1.4", "1.1.1", "1.1.2"], tree)
    with pytest.raises(TreeError, match="not connected"):
        check_outline(["1.1.1", "2.1.1", "1.1", "2.1"], tree)
    with pytest.raises(TreeError, match="wants 4"):
        check_outline(["1", "1.1"], tree)
    with pytest.raises(TreeError, match="exclude node 1.1"):
        check_outline(["1", "1.1", "1.1.1", "1.1.2"], tree, "1.1", "exclude")
    assert follows_rule(["1", "1.2", "1.3", "2"], "1.1", "exclude")
    assert not follows_rule(["1", "1.2", "1.3", "2"], "1.1", "include")


def test_parse_outlines_wants_distinct_valid_candidates(tree: QTree) -> None:
    good = {
        "outlines": [
            ["1", "1.1", "1.1.1", "1.1.2"],
            ["2", "2.1", "2.2", "2.3"],
            ["3", "3.1", "3.2", "3.3"],
        ]
    }
    out = parse_outlines(json.dumps(good), tree, None, None, n=2)
    assert [o.ids[0] for o in out] == ["1", "2"]
    with pytest.raises(TreeError, match="include node 1"):
        parse_outlines(json.dumps(good), tree, "1", "include")
    same = {"outlines": [good["outlines"][0]] * 3}
    with pytest.raises(TreeError, match="same"):
        parse_outlines(json.dumps(same), tree, None, None)
    assert outline_schema()["properties"]["outlines"]["minItems"] == 3


def test_every_qtree_schema_is_a_grammar_llama_cpp_can_parse(tree: QTree) -> None:
    """A ``\\d`` in the outline pattern once made every outline request of `qtree build`
    fail on llama.cpp; the outline ids are now the tree's own (an enum)."""
    pytest.importorskip("llama_cpp")
    from typed_rag.engines.grammar import gbnf_of_schema

    by_tree = outline_schema(node_ids=list(tree))
    assert by_tree["properties"]["outlines"]["items"]["items"]["enum"][:2] == ["1", "1.1"]
    for schema in (tree_schema(), instruction_schema(5), outline_schema(), by_tree):
        assert "root ::=" in gbnf_of_schema(json.dumps(schema))


def test_outline_prompt_states_the_rule_and_shows_the_tree(tree: QTree) -> None:
    user = outline_messages(tree, "Tea? Skip 1.2.", "1.2", "exclude")[-1]["content"]
    assert "must not contain (nor anything below) node 1.2" in user
    assert "    1.2.3. What about tea aspect 1.2.3?" in user
    assert "Request: Tea? Skip 1.2." in user


def test_instructions_parse_and_prompt_intent() -> None:
    assert parse_instructions('{"instructions": [" Skip  it. ", "Skip it.", "", "Cover X."]}') == [
        "Skip it.",
        "Cover X.",
    ]
    assert parse_instructions("Since I know A, skip A. && I want B.") == [
        "Since I know A, skip A.",
        "I want B.",
    ]
    with pytest.raises(TreeError):
        parse_instructions('{"instructions": []}')
    assert instruction_schema(5)["properties"]["instructions"]["minItems"] == 5
    inc = instruction_messages("Tea?", "How is tea grown?", "include")[-1]["content"]
    exc = instruction_messages("Tea?", "How is tea grown?", "exclude")[-1]["content"]
    assert "does NOT yet know" in inc and "ALREADY knows" in exc
    assert "Sub-question: How is tea grown?" in exc


def test_background_draw_is_reproducible_per_question(tree: QTree) -> None:
    a = draw_background(tree, 42, "q1")
    assert a == draw_background(tree, 42, "q1")
    assert a.node in tree and a.intent in ("include", "exclude")
    drawn = {draw_background(tree, 42, f"q{i}") for i in range(40)}
    assert {b.intent for b in drawn} == {"include", "exclude"} and len({b.node for b in drawn}) > 5
    assert (
        conditioned_question("Tell me about tea", "Skip history.")
        == "Tell me about tea? Skip history."
    )


def test_to_score_argmax_and_expectation() -> None:
    s = to_score({"1": math.log(0.1), "4": math.log(0.6), "5": math.log(0.3)})
    assert s.score == 4 and s.expected == pytest.approx((0.1 + 2.4 + 1.5) / 1.0)
    tie = to_score({"2": math.log(0.5), "3": math.log(0.5)})
    assert tie.score == 2 and tie.expected == pytest.approx(2.5)


async def test_judge_scores_over_the_digits_in_one_call() -> None:
    engine = FakeEngine(
        chooser=lambda req: {"5": 1.0} if "boil" in req.messages[-1]["content"] else {"2": 1.0}
    )
    scores = await judge_outlines(
        engine, [("Tea, skip history.", ["How to boil water?"]), ("Tea.", ["History?"])]
    )
    assert [s.score for s in scores] == [5, 2]
    assert len(engine.choice_calls) == 2 and not engine.calls
    req = engine.choice_calls[0]
    assert req.choices == SCORES and "- How to boil water?" in req.messages[-1]["content"]
    assert "Request: Tea, skip history." in req.messages[-1]["content"]
