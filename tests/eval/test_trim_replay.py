"""The replay leaves a run as ``method.trim_cut_off`` / ``method.factoid_sentences`` would have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.trim_replay import replay


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


LONG = "It is the crust [1]. The draft answer is correct [2]."


def _row(method: str, qid: str, route: str, answer: str = LONG, finish: str = "stop") -> dict:
    passages = [{"citation": 1}, {"citation": 2}]
    result = {"answer": answer, "type": route, "passages": passages, "finish_reason": finish}
    return {"method": method, "question_id": qid, "answer": answer, "result": result}


@pytest.mark.parametrize("sentences", [None, 1])
def test_replay_trims_cut_answers_and_shortens_factoid_route_ones(
    tmp_path: Path, sentences: int | None
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    answers = [
        _row("typed-rag", "q1", "FACTOID"),
        _row("typed-rag", "q2", "REASON", LONG + " And the man", "length"),
        _row("typed-rag", "q3", "FACTOID", "Short [1]."),
        _row("rag", "q1", "FACTOID"),
    ]
    _write(run / "answers.jsonl", answers)
    _write(run / "scores.jsonl", [{**a, "rank": 1} for a in answers])

    total, changed = replay(run, tmp_path / "out", {"typed-rag"}, sentences)

    out = _read(tmp_path / "out/answers.jsonl")
    assert total == 3 and changed == (2 if sentences else 1)
    assert out[1]["answer"] == out[1]["result"]["answer"] == LONG  # cut off: trimmed
    assert out[1]["result"]["trimmed"] and "shortened" not in out[1]["result"]
    assert out[2]["answer"] == "Short [1]."
    if sentences:
        assert out[0]["answer"] == out[0]["result"]["answer"] == "It is the crust [1]."
        assert out[0]["result"]["shortened"] and out[0]["result"]["citations"] == [1]
    else:
        assert out[0]["answer"] == LONG and "shortened" not in out[0]["result"]
    # verdicts are kept only where the answer is unchanged; other methods are not copied
    kept = {s["question_id"] for s in _read(tmp_path / "out/scores.jsonl")}
    assert kept == ({"q3"} if sentences else {"q1", "q3"})
    assert _read(run / "answers.jsonl")[0]["answer"] == LONG  # the source is untouched
    with pytest.raises(SystemExit, match="exists"):
        replay(run, tmp_path / "out", {"typed-rag"}, sentences)


def test_replay_drops_copied_prompt_sections(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    answer = "The crust is the outer layer of the planet, made of rock [1]."
    echoed = answer + "\n\n### References\n[2] A made-up entry."
    answers = [_row("typed-rag", "q1", "REASON", echoed), _row("typed-rag", "q2", "REASON")]
    _write(run / "answers.jsonl", answers)
    _write(run / "scores.jsonl", [{**a, "rank": 1} for a in answers])

    assert replay(run, tmp_path / "out", {"typed-rag"}, drop_echo=True) == (2, 1)

    out = _read(tmp_path / "out/answers.jsonl")
    assert out[0]["answer"] == out[0]["result"]["answer"] == answer
    assert out[0]["result"]["unechoed"] and out[0]["result"]["citations"] == [1]
    assert out[1]["answer"] == LONG
    assert [s["question_id"] for s in _read(tmp_path / "out/scores.jsonl")] == ["q2"]


def test_match_length_cuts_to_the_other_methods_word_count(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    three = "One two three [1]. Four five six [2]. Seven eight nine."
    answers = [
        _row("typed-rag", "q1", "REASON", three),
        _row("typed-rag", "q2", "REASON", three),
        _row("typed-rag", "q3", "REASON", three),
        _row("rag", "q1", "REASON", "Six words [1] in the rag answer."),  # markers not counted
        _row("rag", "q2", "REASON", "Two words."),  # shorter than one sentence: keep the first
        _row("rag", "q3", "REASON", " ".join(["w"] * 20)),  # longer: unchanged
    ]
    _write(run / "answers.jsonl", answers)
    _write(run / "scores.jsonl", [{**a, "rank": 1} for a in answers])

    assert replay(run, tmp_path / "out", {"typed-rag"}, match_length="rag") == (3, 2)

    out = {r["question_id"]: r["answer"] for r in _read(tmp_path / "out/answers.jsonl")}
    assert out == {
        "q1": "One two three [1]. Four five six [2].",
        "q2": "One two three [1].",
        "q3": three,
    }
    assert [s["question_id"] for s in _read(tmp_path / "out/scores.jsonl")] == ["q3"]


def test_replay_drops_draft_talk_only_from_answers_written_from_a_draft(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    answers = [_row("typed-rag", "q1", "FACTOID"), _row("typed-rag", "q2", "DEBATE")]
    answers[0]["result"]["plan"] = {"draft": "The crust."}
    _write(run / "answers.jsonl", answers)
    _write(run / "scores.jsonl", [{**a, "rank": 1} for a in answers])

    assert replay(run, tmp_path / "out", {"typed-rag"}, drop_draft_talk=True) == (2, 1)

    out = _read(tmp_path / "out/answers.jsonl")
    assert out[0]["answer"] == "It is the crust [1]." and out[0]["result"]["undrafted"]
    assert out[0]["result"]["citations"] == [1]
    assert out[1]["answer"] == LONG  # no draft: a sentence about "the draft" is the model's
    assert [s["question_id"] for s in _read(tmp_path / "out/scores.jsonl")] == ["q2"]


def test_replay_drops_copied_passages_and_their_citations(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    copied = "It is the crust [1].\n\n[2] Crust\nThe crust is the outer layer [2]."
    answers = [_row("typed-rag", "q1", "FACTOID", copied), _row("typed-rag", "q2", "REASON")]
    _write(run / "answers.jsonl", answers)
    _write(run / "scores.jsonl", [{**a, "rank": 1} for a in answers])

    assert replay(run, tmp_path / "out", {"typed-rag"}, drop_passage_copies=True) == (2, 1)

    out = _read(tmp_path / "out/answers.jsonl")
    assert out[0]["answer"] == "It is the crust [1]." and out[0]["result"]["uncopied"]
    assert out[0]["result"]["citations"] == [1]  # the copy's [2] went with it
    assert out[1]["answer"] == LONG
    assert [s["question_id"] for s in _read(tmp_path / "out/scores.jsonl")] == ["q2"]


@pytest.mark.parametrize(
    ("option", "flag", "answer", "expected"),
    [
        (
            "drop_repeats",
            "unrepeated",
            "It is the crust of the planet, its outer layer [1].\n" * 3,
            "It is the crust of the planet, its outer layer [1].",
        ),
        (
            "drop_source_talk",
            "unsourced",
            "It is the crust [1]. This can be found in references [1] and [2].",
            "It is the crust [1].",
        ),
    ],
)
def test_replay_drops_sentences(
    tmp_path: Path, option: str, flag: str, answer: str, expected: str
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    answers = [_row("typed-rag", "q1", "REASON", answer), _row("typed-rag", "q2", "REASON")]
    _write(run / "answers.jsonl", answers)
    _write(run / "scores.jsonl", [{**a, "rank": 1} for a in answers])

    assert replay(run, tmp_path / "out", {"typed-rag"}, **{option: True}) == (2, 1)

    out = _read(tmp_path / "out/answers.jsonl")
    assert out[0]["answer"] == expected and out[0]["result"][flag]
    assert out[1]["answer"] == LONG
    assert [s["question_id"] for s in _read(tmp_path / "out/scores.jsonl")] == ["q2"]
