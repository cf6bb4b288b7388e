"""``eval splice``: a run moves to a new type-scoped method option without re-answering the rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from eval.runs.splice import affected_types
from typed_rag.config import Settings
from typed_rag.method_settings import ROUTE_ONLY
from typed_rag.types import TYPED_TYPES

FP = {"scorer": {"model": "judge"}, "judge": {"protocol": "linkage"}, "reference_seed": 7}
# The method options of a run made before the draft (whatever today's default is).
DEFAULT = {
    **Settings().method.options().model_dump(mode="json"),
    "own_knowledge": "off",
    "own_knowledge_types": list(TYPED_TYPES),
}
DRAFT_ALL = {**DEFAULT, "own_knowledge": "draft"}
DRAFT_REASON = ["--set", "method.own_knowledge=draft", "--set", "method.own_knowledge_types=REASON"]


def _row(method: str, qid: str, qtype: str, **extra: Any) -> dict[str, Any]:
    return {"method": method, "question_id": qid, "subset": "nq", "type": qtype, **extra}


def _run(
    folder: Path, method: dict[str, Any], answers: list[dict], scores: list[dict], **fp
) -> Path:
    folder.mkdir(parents=True)
    manifest = {"methods": ["rag", "typed-rag"], "fingerprint": {**FP, **fp, "method": method}}
    (folder / "run.json").write_text(json.dumps(manifest))
    for name, rows in (("answers.jsonl", answers), ("scores.jsonl", scores)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_splice_takes_the_affected_types_and_removes_what_the_source_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = [
        _row("typed-rag", q, t, answer="old")
        for q, t in (("q1", "REASON"), ("q2", "REASON"), ("q3", "DEBATE"), ("q4", "REASON"))
    ]
    old.append(_row("rag", "q1", "REASON", answer="rag"))
    run = _run(tmp_path / "run", DEFAULT, old, [{**r, "rank": 3} for r in old])
    new = [_row("typed-rag", q, t, answer="draft") for q, t in (("q1", "REASON"), ("q2", "REASON"),
                                                                ("q3", "DEBATE"))]  # fmt: skip
    source = _run(tmp_path / "src", DRAFT_ALL, new, [{**new[0], "rank": 1}, {**new[2], "rank": 1}])

    assert main([*DRAFT_REASON, "eval", "splice", str(run), "--from", str(source)]) == 0
    assert "REASON: 2 taken" in capsys.readouterr().out
    answers = {(r["method"], r["question_id"]): r["answer"] for r in _read(run / "answers.jsonl")}
    # REASON answers come from the source, DEBATE (not affected) and RAG stay, q4 waits.
    assert answers == {("typed-rag", "q1"): "draft", ("typed-rag", "q2"): "draft",
                       ("typed-rag", "q3"): "old", ("rag", "q1"): "rag"}  # fmt: skip
    scores = {(r["method"], r["question_id"]): r["rank"] for r in _read(run / "scores.jsonl")}
    # q2's new answer was not judged in the source, so it is judged again.
    assert scores == {("typed-rag", "q1"): 1, ("typed-rag", "q3"): 3, ("rag", "q1"): 3}
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["fingerprint"]["method"]["own_knowledge"] == "draft"
    assert manifest["fingerprint"]["method"]["own_knowledge_types"] == ["REASON"]
    record = manifest["splices"][0]
    assert (record["types"], record["answers_taken"], record["answers_removed"]) == (
        ["REASON"],
        2,
        1,
    )
    assert record["method_options_before"]["own_knowledge"] == "off"
    # Nothing is lost: the rows replaced or removed are kept beside the run.
    before = run / record["rows_before"]
    assert record["rows_before"] == "spliced/1"
    for name in ("answers.jsonl", "scores.jsonl"):
        kept = {(r["question_id"], r["answer"]) for r in _read(before / name)}
        assert kept == {("q1", "old"), ("q2", "old"), ("q4", "old")}
    # Done once; a second splice has nothing to move.
    assert main([*DRAFT_REASON, "eval", "splice", str(run), "--from", str(source)]) == 2
    assert "already answers every type" in capsys.readouterr().err


def test_an_option_on_every_type_takes_every_answer_from_the_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    same = _row("typed-rag", "q3", "REASON", answer="same")
    old = [_row("typed-rag", q, t, answer="old") for q, t in (("q1", "REASON"), ("q2", "DEBATE"))]
    old += [same, _row("rag", "q1", "REASON", answer="rag")]
    run = _run(tmp_path / "run", DEFAULT, old, [{**r, "rank": 3} for r in old])
    cut = {**DEFAULT, "drop_echo": not DEFAULT["drop_echo"]}
    new = [_row("typed-rag", "q1", "REASON", answer="cut"), same]
    source = _run(tmp_path / "src", cut, new, [{**new[0], "rank": 1}])
    flag = ["--set", f"method.drop_echo={str(cut['drop_echo']).lower()}"]
    settings = [*flag, "--set", "method.own_knowledge=off"]

    assert main([*settings, "eval", "splice", str(run), "--from", str(source)]) == 0
    answers = {(r["method"], r["question_id"]): r["answer"] for r in _read(run / "answers.jsonl")}
    # every typed-rag answer moves (q2, which the source lacks, waits for the next run)
    assert answers == {
        ("typed-rag", "q1"): "cut",
        ("typed-rag", "q3"): "same",
        ("rag", "q1"): "rag",
    }
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["fingerprint"]["method"]["drop_echo"] is cut["drop_echo"]
    record = manifest["splices"][0]
    assert record["types"] == ["DEBATE", "REASON"]
    assert (record["answers_taken"], record["answers_removed"]) == (2, 1)
    # only the rows that changed or went are set aside (q3's is the same in both runs)
    aside = {r["question_id"] for r in _read(run / record["rows_before"] / "answers.jsonl")}
    assert aside == {"q1", "q2"}


@pytest.mark.parametrize(
    ("source_fp", "source_method", "args", "message"),
    # args: the settings, then (after "eval splice RUN --from SRC") any command options
    [
        (
            {"judge": {"protocol": "pairwise"}},
            DRAFT_ALL,
            DRAFT_REASON,
            "more than method options and routing: judge",
        ),
        ({}, {**DEFAULT, "own_knowledge": "allow"}, DRAFT_REASON, "own_knowledge='allow'"),
        ({}, {**DRAFT_ALL, "own_knowledge_types": ["DEBATE"]}, DRAFT_REASON, "answered REASON"),
        ({}, DRAFT_ALL, [*DRAFT_REASON, "--set", "method.max_sub_queries=4"], "max_sub_queries"),
        ({}, DRAFT_ALL, [*DRAFT_REASON, "|", "--method", "llm"], "no answers of method 'llm'"),
    ],
)
def test_splice_refuses_what_would_mix_answers(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    source_fp: dict,
    source_method: dict,
    args: list[str],
    message: str,
) -> None:
    row = _row("typed-rag", "q1", "REASON", answer="a")
    run = _run(tmp_path / "run", DEFAULT, [row], [])
    source = _run(tmp_path / "src", source_method, [row], [], **source_fp)
    settings, _, extra = " ".join(args).partition(" | ")
    assert (
        main([*settings.split(), "eval", "splice", str(run), "--from", str(source), *extra.split()])
        == 2
    )
    assert message in capsys.readouterr().err
    assert json.loads((run / "run.json").read_text())["fingerprint"]["method"] == DEFAULT


def test_affected_types_are_those_an_option_acts_on_before_or_after() -> None:
    reason = {**DEFAULT, "own_knowledge": "draft", "own_knowledge_types": ["REASON"]}
    assert affected_types(DEFAULT, reason) == {"REASON"}
    # REASON keeps its draft; the other types lose theirs.
    assert affected_types(DRAFT_ALL, reason) == set(TYPED_TYPES) - {"REASON"}
    assert affected_types(DRAFT_ALL, {**DRAFT_ALL, "own_knowledge": "allow"}) == set(TYPED_TYPES)
    assert affected_types(reason, reason) == set()
    # Off with a different type list answers exactly like off.
    assert affected_types(DEFAULT, {**DEFAULT, "own_knowledge_types": ["REASON"]}) == set()


def test_each_route_only_option_affects_its_route_only() -> None:
    other = {True: False, False: True, None: 2, "mediator": "reason"}  # a value each lacks now
    for route, options in ROUTE_ONLY.items():
        for option in options:
            # An option of that list which the method options lack would raise KeyError here.
            new = {**DEFAULT, option: other[DEFAULT[option]]}
            assert affected_types(DEFAULT, new) == {route}, option


def test_splice_moves_a_run_to_the_factoid_route_question_by_question(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``eval.route=labels-factoid``: the questions the classifier is confident are FACTOID
    change route whatever their label; the others keep their answers."""
    from typed_rag.classifier.base import TypePrediction
    from typed_rag.types import QuestionType

    def classify(questions: list[str]) -> list[TypePrediction | None]:
        return [
            TypePrediction(QuestionType.FACTOID, {}, confident=not q.startswith("unsure"))
            if "what" in q
            else None
            for q in questions
        ]

    monkeypatch.setattr("cli.lab.evaluation._classify", lambda settings: classify)
    draft = ["--set", "method.own_knowledge=draft", "--set", "method.own_knowledge_types=REASON"]
    reason = {**DEFAULT, "own_knowledge": "draft", "own_knowledge_types": ["REASON"]}
    factoid = {**reason, "own_knowledge_types": ["REASON", "FACTOID"]}
    asked = {"q1": "what is it", "q2": "why is it", "q3": "unsure what", "q4": "what else"}
    old = [
        _row("typed-rag", q, t, route=t, question=asked[q], answer="old")
        for q, t in (("q1", "DEBATE"), ("q2", "REASON"), ("q3", "DEBATE"), ("q4", "REASON"))
    ]
    run = _run(tmp_path / "run", reason, old, [{**r, "rank": 3} for r in old])
    new = [
        _row("typed-rag", "q1", "DEBATE", route="FACTOID", question=asked["q1"], answer="new"),
        _row("typed-rag", "q3", "DEBATE", route="DEBATE", question=asked["q3"], answer="same"),
    ]
    src = _run(tmp_path / "src", factoid, new, [{**new[0], "rank": 1}], route="labels-factoid")
    settings = [*draft, "--set", "method.own_knowledge_types=REASON,FACTOID"]
    routed = [*settings, "--set", "eval.route=labels-factoid"]

    # Without the route the source's FACTOID answers cannot be the run's.
    assert main([*settings, "eval", "splice", str(run), "--from", str(src)]) == 2
    assert main([*routed, "eval", "splice", str(run), "--from", str(src)]) == 0
    rows = {r["question_id"]: r for r in _read(run / "answers.jsonl")}
    # q1 moves (taken from the source), q4 moves (not in the source: answered next run),
    # q3 (not confident) and q2 (not FACTOID) keep their answers.
    assert {q: r["answer"] for q, r in rows.items()} == {"q1": "new", "q2": "old", "q3": "old"}
    assert {r["question_id"]: r["rank"] for r in _read(run / "scores.jsonl")} == {
        "q1": 1,
        "q2": 3,
        "q3": 3,
    }
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["fingerprint"]["route"] == "labels-factoid"
    assert manifest["fingerprint"]["method"]["own_knowledge_types"] == ["REASON", "FACTOID"]
    record = manifest["splices"][0]
    assert (record["types"], record["answers_taken"], record["answers_removed"]) == (
        ["FACTOID"],
        1,
        1,
    )
    assert (record["route_before"], record["route"]) == ("labels", "labels-factoid")


def test_new_routes_under_labels_classifier_take_confident_typed_predictions() -> None:
    """Moving a run to ``eval.route=labels-classifier``: a question changes route where the
    classifier is confident of FACTOID or a typed type, and keeps its label otherwise."""
    from eval.runs.splice import new_routes
    from typed_rag.classifier.base import TypePrediction
    from typed_rag.types import QuestionType as Q

    predicted = {
        "why": TypePrediction(Q.REASON, {}),
        "what": TypePrediction(Q.FACTOID, {}),
        "plain": TypePrediction(Q.EVIDENCE_BASED, {}),
        "unsure": TypePrediction(Q.INSTRUCTION, {}, confident=False),
    }
    rows = [{"question_id": q, "question": q, "type": "DEBATE"} for q in predicted]
    routes = new_routes(rows, "labels-classifier", lambda qs: [predicted[q] for q in qs])
    assert routes == {"why": "REASON", "what": "FACTOID", "plain": "DEBATE", "unsure": "DEBATE"}


def test_a_factoid_route_option_takes_only_the_factoid_routes_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``method.factoid_guidance`` (like the other factoid-only options) changes the factoid
    route's answers only: a run moves to it taking those from the source, and a source that
    answered the factoid route otherwise is refused."""
    from typed_rag.classifier.base import TypePrediction
    from typed_rag.types import QuestionType

    monkeypatch.setattr(
        "cli.lab.evaluation._classify",
        lambda settings: (
            lambda qs: [
                TypePrediction(QuestionType.FACTOID, {}) if "what" in q else None for q in qs
            ]
        ),
    )
    factoid = {
        **DEFAULT,
        "own_knowledge": "draft",
        "own_knowledge_types": ["REASON", "FACTOID"],
        "factoid_guidance": False,
    }
    guided = {**factoid, "factoid_guidance": True}
    asked = {"q1": "what is it", "q2": "why is it"}
    old = [
        _row("typed-rag", "q1", "DEBATE", route="FACTOID", question=asked["q1"], answer="old"),
        _row("typed-rag", "q2", "REASON", route="REASON", question=asked["q2"], answer="old"),
    ]
    fp = {"route": "labels-factoid"}
    run = _run(tmp_path / "run", factoid, old, [{**r, "rank": 3} for r in old], **fp)
    new = [{**r, "answer": "new"} for r in old]
    src = _run(tmp_path / "src", guided, new, [{**r, "rank": 1} for r in new], **fp)
    unguided = _run(tmp_path / "unguided", factoid, new, [], **fp)
    settings = [
        f"--set={kv}"
        for kv in (
            "method.own_knowledge=draft",
            "method.own_knowledge_types=REASON,FACTOID",
            "eval.route=labels-factoid",
            "method.factoid_guidance=true",
        )
    ]

    assert main([*settings, "eval", "splice", str(run), "--from", str(unguided)]) == 2
    assert "FACTOID route with other method options: factoid_guidance" in capsys.readouterr().err
    assert main([*settings, "eval", "splice", str(run), "--from", str(src)]) == 0
    rows = {r["question_id"]: r["answer"] for r in _read(run / "answers.jsonl")}
    assert rows == {"q1": "new", "q2": "old"}  # the REASON answer is not the option's to change
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["fingerprint"]["method"]["factoid_guidance"] is True
    assert manifest["splices"][0]["types"] == ["FACTOID"]
    assert affected_types(factoid, guided) == {"FACTOID"}


def test_a_list_of_types_answered_by_rag_moves_the_types_it_adds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``method.rag_types``: a run made with DEBATE's own pipeline moves to DEBATE as plain
    RAG by taking the DEBATE answers only; a source that answered DEBATE otherwise is refused."""
    now = Settings().method.options().model_dump(mode="json")
    mediator = {**now, "rag_types": []}
    assert affected_types(mediator, now) == set(now["rag_types"]) == {"DEBATE"}
    old = [_row("typed-rag", q, t, answer="old") for q, t in (("q1", "DEBATE"), ("q2", "REASON"))]
    run = _run(tmp_path / "run", mediator, old, [{**r, "rank": 4} for r in old])
    wrong = _run(tmp_path / "wrong", mediator, [_row("typed-rag", "q1", "DEBATE")], [])
    assert main(["eval", "splice", str(run), "--from", str(wrong)]) == 2
    assert "answered DEBATE with rag_types=[]" in capsys.readouterr().err

    new = [_row("typed-rag", "q1", "DEBATE", answer="rag"), _row("typed-rag", "q2", "REASON")]
    source = _run(tmp_path / "src", now, new, [{**new[0], "rank": 2}])
    assert main(["eval", "splice", str(run), "--from", str(source)]) == 0
    answers = {r["question_id"]: r["answer"] for r in _read(run / "answers.jsonl")}
    assert answers == {"q1": "rag", "q2": "old"}
    assert {r["question_id"]: r["rank"] for r in _read(run / "scores.jsonl")} == {"q1": 2, "q2": 4}
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["fingerprint"]["method"]["rag_types"] == ["DEBATE"]
