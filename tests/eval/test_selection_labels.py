"""Type labels (classifier, storage, distribution) and stratified selection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from eval.data.labels import (
    PAPER_TYPE_COUNTS,
    classify_questions,
    distribution_table,
    load_labels,
    save_labels,
)
from eval.data.selection import first_per_subset, select_questions, stratified_sample
from eval.data.wikinfqa import WikiNFQARecord, load_wikinfqa
from tests.eval.conftest import KeywordClassifier
from typed_rag.errors import UserError


def synthetic(n_per_subset: dict[str, int]) -> list[WikiNFQARecord]:
    out = []
    for subset, n in n_per_subset.items():
        for i in range(n):
            out.append(WikiNFQARecord(subset, f"{subset}_{i}", f"q{i}", ("a", "b"), (0, 3)))
    return out


def test_labels_round_trip_and_distribution(nfqa_dir: Path, tmp_path: Path) -> None:
    records = load_wikinfqa(nfqa_dir, "nq,squad").records
    labels = classify_questions(records, KeywordClassifier(), min_confidence=0.5, batch_size=4)
    assert labels["nq_2"].type == "COMPARISON" and labels["nq_1"].type == "INSTRUCTION"
    path = save_labels(labels, tmp_path / "labels.json", source="keywords")
    assert path.with_suffix(".csv").read_text().startswith("question_id,subset,type")
    assert load_labels(path) == labels
    table = distribution_table(labels)
    assert "| REASON | 3 |" in table
    assert f"| EVIDENCE-BASED | 0 | 0.0 | {PAPER_TYPE_COUNTS['EVIDENCE-BASED']} |" in table
    assert "| total | 9 | 100.0 | 945 | 100.0 |" in table


def test_bad_labels_file_is_a_user_error(tmp_path: Path) -> None:
    bad = tmp_path / "l.json"
    bad.write_text('{"labels": [{"question_id": "a", "type": "POEM"}]}')
    with pytest.raises(UserError, match="malformed"):
        load_labels(bad)
    with pytest.raises(UserError, match="not found"):
        load_labels(tmp_path / "missing.json")


def test_first_per_subset() -> None:
    recs = synthetic({"nq": 5, "squad": 2})
    assert [r.question_id for r in first_per_subset(recs, 3)] == [
        "nq_0",
        "nq_1",
        "nq_2",
        "squad_0",
        "squad_1",
    ]


def test_stratified_sample_is_even_over_subsets_and_proportional_over_types() -> None:
    recs = synthetic({"nq": 60, "squad": 40})
    from eval.data.labels import QuestionLabel

    # nq: 45 REASON + 15 DEBATE; squad: 40 REASON
    labels = {
        r.question_id: QuestionLabel(
            r.question_id,
            r.subset,
            "DEBATE" if r.subset == "nq" and int(r.question_id[3:]) < 15 else "REASON",
            0.9,
            True,
        )
        for r in recs
    }
    a = stratified_sample(recs, labels, 20, seed=1)
    b = stratified_sample(recs, labels, 20, seed=1)
    assert a == b and len(a) == 20
    cells = Counter((r.subset, labels[r.question_id].type) for r in a)
    # 10 per subset; nq's 10 split 3:1 between its types (7.5 : 2.5, tie to DEBATE by name)
    assert cells == {("nq", "REASON"): 7, ("nq", "DEBATE"): 3, ("squad", "REASON"): 10}
    assert stratified_sample(recs, labels, 20, seed=2) != a
    assert [r.question_id for r in a] == sorted(
        (r.question_id for r in a), key=[x.question_id for x in recs].index
    )  # input order kept
    assert len(select_questions(recs, labels, limit=10, sample=7)) == 7
    assert select_questions(recs, labels, sample=500) == recs
    with pytest.raises(UserError):
        stratified_sample(recs, labels, 0)


def test_stratified_sample_gives_a_small_subsets_unused_share_to_the_others() -> None:
    recs = synthetic({"nq": 50, "squad": 3, "trivia": 50})
    labels: dict = {}
    got = Counter(r.subset for r in stratified_sample(recs, labels, 30, seed=3))
    assert got == {"squad": 3, "nq": 14, "trivia": 13}


def test_types_keep_only_questions_with_those_labels() -> None:
    from eval.data.labels import QuestionLabel

    recs = synthetic({"nq": 6, "squad": 6})
    labels = {
        r.question_id: QuestionLabel(
            r.question_id, r.subset, "REASON" if i % 3 == 0 else "FACTOID", 0.9, True
        )
        for i, r in enumerate(recs)
    }
    got = select_questions(recs, labels, types=["reason"])
    assert [r.question_id for r in got] == ["nq_0", "nq_3", "squad_0", "squad_3"]
    with pytest.raises(UserError, match="DEBATE"):
        select_questions(recs, labels, types=["DEBATE"])


def test_first_n_grows_the_same_question_set(nfqa_dir) -> None:
    from eval.data.selection import select_questions
    from eval.data.wikinfqa import load_wikinfqa

    records = load_wikinfqa(nfqa_dir, "nq,squad").records
    three = select_questions(records, {}, first=3)
    six = select_questions(records, {}, first=6)
    assert len(three) == 3 and len(six) == 6
    assert {r.question_id for r in three} < {r.question_id for r in six}
