"""The Wiki-NFQA loader: the real files, and bad records reported by id and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.data.wikinfqa import SUBSETS, load_wikinfqa, parse_subsets
from eval.settings import load_lab_settings
from tests.eval.conftest import make_record, write_subset
from typed_rag.errors import UserError


def test_real_benchmark_loads_945_valid_questions() -> None:
    data_dir = load_lab_settings().eval.data_dir
    if not data_dir.is_dir():
        pytest.skip(f"Wiki-NFQA not present at {data_dir}")
    data = load_wikinfqa(data_dir)
    assert len(data) == 945 and not data.bad
    assert data.counts() == {
        "nq": 126,
        "squad": 300,
        "trivia": 296,
        "2wikimultihopqa": 79,
        "hotpotqa": 62,
        "musique": 82,
    }
    assert all(2 <= r.levels <= 4 for r in data.records)


def test_loads_the_fixture(nfqa_dir: Path) -> None:
    data = load_wikinfqa(nfqa_dir, "nq,squad")
    assert len(data) == 9 and not data.bad
    first = data.records[0]
    assert (first.subset, first.question_id, first.line) == ("nq", "nq_0", 1)
    assert len(first.answers) == len(first.labels) == 8


def bad_rows() -> list[tuple[object, str]]:
    good = make_record("nq", 0, "why?")
    rows: list[tuple[object, str]] = []

    def variant(reason: str, **changes: object) -> None:
        row = json.loads(json.dumps(good))
        row["question_id"] = f"bad_{len(rows)}"
        for k, v in changes.items():
            if v is KeyError:
                row.pop(k)
            else:
                row[k] = v
        rows.append((row, reason))

    rows.append(("{not json", "not valid JSON"))
    rows.append(("[1, 2]", "not a JSON object"))
    variant("missing or empty question_id", question_id="")
    variant("missing or empty question_text", question_text=KeyError)
    variant("answer_label[1]=4 is not an integer in 0..3", answer_label=[0, 4, 1, 2, 0, 1, 3, 2])
    variant("answer_label[0]=True", answer_label=[True, 3, 1, 2, 0, 1, 3, 2])
    variant("has 8 answers but answer_label has 7", answer_label=[0, 3, 1, 2, 0, 1, 3])
    variant("num_answers=9", num_answers=9)
    variant("only 1 distinct quality label", answer_label=[3] * 8)
    variant(
        "answer_list[2] is not a non-empty string",
        answer_list=["x", "y", " ", "a", "b", "c", "d", "e"],
        answer_dict=KeyError,
    )
    variant("does not match answer_dict", answer_list=[f"z{i}" for i in range(8)])
    return rows


def test_bad_records_are_skipped_and_reported_by_id_and_line(tmp_path: Path) -> None:
    rows = bad_rows()
    good = [
        make_record("nq", 100, "how to cook rice"),
        make_record("nq", 101, "why is the sea salty"),
    ]
    write_subset(tmp_path, "nq", [good[0], *(r for r, _ in rows), good[1]])
    data = load_wikinfqa(tmp_path, "nq")
    assert [r.question_id for r in data.records] == ["nq_100", "nq_101"]
    assert len(data.bad) == len(rows)
    for bad, (_row, reason) in zip(data.bad, rows, strict=True):
        assert reason in bad.reason, (bad, reason)
    # lines count from 1 and the good record took line 1
    assert [b.line for b in data.bad] == list(range(2, 2 + len(rows)))
    assert data.bad[4].question_id == "bad_4"
    assert "nq/annotated_odqa_nf_test.jsonl:6: bad_4: answer_label[1]=4" in str(data.bad[4])


def test_on_error_stop_names_file_line_and_id(tmp_path: Path) -> None:
    row = make_record("nq", 0, "why?")
    row["answer_label"] = [0] * 8
    write_subset(tmp_path, "nq", [make_record("nq", 1, "ok"), row])
    with pytest.raises(UserError, match=r"annotated_odqa_nf_test.jsonl:2: nq_0: only 1 distinct"):
        load_wikinfqa(tmp_path, "nq", on_error="stop")


def test_duplicate_ids_across_subsets_are_bad(tmp_path: Path) -> None:
    write_subset(tmp_path, "nq", [make_record("x", 0, "q one")])
    write_subset(tmp_path, "squad", [make_record("x", 0, "q two")])
    data = load_wikinfqa(tmp_path, ["nq", "squad"])
    assert len(data) == 1 and "duplicate question_id" in data.bad[0].reason


def test_missing_dir_subset_file_and_unknown_subset(tmp_path: Path, nfqa_dir: Path) -> None:
    with pytest.raises(UserError, match="data directory not found"):
        load_wikinfqa(tmp_path / "nope")
    with pytest.raises(UserError, match="subset 'trivia' not found"):
        load_wikinfqa(nfqa_dir, "trivia")
    with pytest.raises(UserError, match="unknown Wiki-NFQA subset"):
        parse_subsets("nq,wikipedia")
    assert parse_subsets("all") == list(SUBSETS)
    assert parse_subsets(" NQ , nq ") == ["nq"]
