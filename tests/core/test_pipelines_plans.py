"""Tolerant plan parsing: fences, prose, Python literals, paper key spellings, clipping."""

from __future__ import annotations

import json

import pytest

from typed_rag.json_reply import PlanError, extract_json
from typed_rag.pipelines.comparison import COMPARISON_SCHEMA, parse_comparison
from typed_rag.pipelines.debate import DEBATE_SCHEMA, parse_debate
from typed_rag.pipelines.decomposition import SUB_QUERY_SCHEMA, parse_sub_queries
from typed_rag.pipelines.experience import KEYWORD_SCHEMA, parse_keywords


def test_extract_json_from_fences_prose_and_python_literals() -> None:
    assert extract_json('```json\n{"a": [1, 2]}\n```') == {"a": [1, 2]}
    assert extract_json('Sure! Here it is: ["x", "y"] hope it helps') == ["x", "y"]
    assert extract_json("Answer: ['x', 'y']") == ["x", "y"]
    assert extract_json('text [not json {"k": true} tail') == {"k": True}
    with pytest.raises(PlanError, match="no JSON"):
        extract_json("I cannot help with that.")
    with pytest.raises(PlanError, match="empty"):
        extract_json("   ")


def test_sub_queries_bare_list_object_and_paper_key() -> None:
    assert parse_sub_queries('["a", "b"]').sub_queries == ["a", "b"]
    assert parse_sub_queries('{"sub_queries": ["a", "b", "c"]}').sub_queries == ["a", "b", "c"]
    assert parse_sub_queries('{"sub-queries": ["a", "b"]}').sub_queries == ["a", "b"]
    assert parse_sub_queries('{"whatever": ["a", "b"]}').sub_queries == ["a", "b"]


def test_sub_queries_clipped_deduplicated_and_empties_dropped() -> None:
    text = json.dumps({"sub_queries": ["a", " ", "A", "b", "", "c", "d", "e", "f", "g"]})
    assert parse_sub_queries(text).sub_queries == ["a", "b", "c", "d", "e"]
    with pytest.raises(PlanError, match="at least 2"):
        parse_sub_queries('{"sub_queries": ["only one", "ONLY ONE", ""]}')
    with pytest.raises(PlanError):
        parse_sub_queries('{"sub_queries": "not a list", "x": 1}')


def test_template_placeholders_copied_by_weak_models_are_not_a_plan() -> None:
    with pytest.raises(PlanError, match="0 usable"):
        parse_sub_queries('{"sub_queries": ["sub_query 1", "Sub-query 2", "..."]}')
    assert parse_sub_queries('["sub-query 1", "why cats purr", "when cats purr"]').sub_queries == [
        "why cats purr",
        "when cats purr",
    ]
    with pytest.raises(PlanError):
        parse_debate('{"debate_topic": "t", "sub_queries": {"a": "query 1", "b": "query 2"}}')


def test_comparison_coerces_type_case_and_forms() -> None:
    plan = parse_comparison(
        '{"is_compare": true, "compare_type": "Differences", "keywords_list": ["a", "b"]}'
    )
    assert (plan.is_compare, plan.compare_type, plan.keywords) == (True, "differences", ["a", "b"])
    assert (
        parse_comparison(
            '{"is_compare": "true", "compare_type": "SIMILARITY", "keywords_list": ["a"]}'
        ).compare_type
        == "similarities"
    )
    assert (
        parse_comparison(
            '{"is_compare": true, "compare_type": "superior", "keywords_list": ["a"]}'
        ).compare_type
        == "superiority"
    )


def test_comparison_single_keyword_bare_list_and_not_a_comparison() -> None:
    assert parse_comparison(
        '{"is_compare": true, "compare_type": "differences", "keywords_list": ["tea"]}'
    ).keywords == ["tea"]
    bare = parse_comparison('["tea", "coffee"]')
    assert bare.is_compare and bare.keywords == ["tea", "coffee"]
    no = parse_comparison('{"is_compare": false, "compare_type": "", "keywords_list": []}')
    assert no.is_compare is False and no.keywords == []


def test_comparison_rejects_unknown_type_and_missing_keywords() -> None:
    with pytest.raises(PlanError, match="compare_type"):
        parse_comparison('{"is_compare": true, "compare_type": "vibes", "keywords_list": ["a"]}')
    with pytest.raises(PlanError, match="keywords_list"):
        parse_comparison('{"is_compare": true, "compare_type": "differences", "keywords_list": []}')


def test_keywords_accepts_list_object_and_single_string() -> None:
    assert parse_keywords('["Portuguese wines", "best"]').keywords == ["Portuguese wines", "best"]
    assert parse_keywords('{"keywords": ["x"]}').keywords == ["x"]
    assert parse_keywords('{"keywords": "x"}').keywords == ["x"]
    with pytest.raises(PlanError):
        parse_keywords('{"keywords": []}')


def test_debate_paper_shape_and_our_shape() -> None:
    paper = {
        "debate_topic": "homework",
        "dist_opinion": ["for", "against", "neutral"],
        "sub-queries": {
            "for": "homework helps",
            "against": "homework harms",
            "neutral": "homework evidence",
        },
    }
    plan = parse_debate(json.dumps(paper))
    assert plan.topic == "homework"
    assert [(p.perspective, p.query) for p in plan.perspectives] == [
        ("for", "homework helps"),
        ("against", "homework harms"),
        ("neutral", "homework evidence"),
    ]
    ours = dict(paper, sub_queries=paper.pop("sub-queries"))
    assert parse_debate(json.dumps(ours)).perspectives == plan.perspectives


def test_debate_tolerates_list_pairs_renamed_keys_and_missing_opinions() -> None:
    pairs = {
        "debate_topic": "t",
        "sub_queries": [{"opinion": "pro", "query": "q1"}, {"perspective": "con", "query": "q2"}],
    }
    assert [p.perspective for p in parse_debate(json.dumps(pairs)).perspectives] == ["pro", "con"]
    renamed = {
        "debate_topic": "t",
        "dist_opinion": ["Pro", "Con"],
        "sub_queries": {"opinion1": "q1", "opinion2": "q2"},
    }
    assert [(p.perspective, p.query) for p in parse_debate(json.dumps(renamed)).perspectives] == [
        ("Pro", "q1"),
        ("Con", "q2"),
    ]
    keys_only = {"debate_topic": "t", "sub_queries": {"pro": "q1", "con": "q2"}}
    assert len(parse_debate(json.dumps(keys_only)).perspectives) == 2


def test_debate_needs_two_perspectives() -> None:
    with pytest.raises(PlanError, match="at least 2"):
        parse_debate('{"debate_topic": "t", "dist_opinion": ["pro"], "sub_queries": {"pro": "q"}}')
    with pytest.raises(PlanError, match="not an object"):
        parse_debate('["a", "b"]')


@pytest.mark.parametrize(
    "schema", [COMPARISON_SCHEMA, KEYWORD_SCHEMA, SUB_QUERY_SCHEMA, DEBATE_SCHEMA]
)
def test_schemas_are_titled_json_objects(schema: dict) -> None:
    assert schema["type"] == "object" and schema["title"].endswith("_plan")
    json.dumps(schema)
