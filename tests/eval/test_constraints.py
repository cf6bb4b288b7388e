"""Coverage-conditioned questions: set building, the compliance judge, metrics, resume, report."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import typed_rag.engines
from cli.main import main
from eval.constraints import (
    ANSWERS,
    BAD_SHAPE,
    EMPTY_ANSWER,
    JUDGEMENTS,
    LENGTH_MISMATCH,
    LINKAGE,
    NO_JSON,
    OVERLAPPING,
    SUBTOPICS_SCHEMA,
    TEMPLATES,
    TOO_FEW,
    ComplianceItem,
    ComplianceJudge,
    ConstraintItem,
    ConstraintRunner,
    SharedTypedRAG,
    arm_settings,
    build_constraint_set,
    build_constraints_report,
    candidate_order,
    check_run_set,
    compliance,
    compose_question,
    detection_match,
    load_set,
    make_item,
    parse_arms,
    parse_judgement,
    parse_subtopics,
    topics_overlap,
    write_constraints_report,
    write_set,
)
from eval.data.labels import QuestionLabel
from eval.data.wikinfqa import WikiNFQARecord, load_wikinfqa
from eval.settings import load_lab_settings
from tests.core.conftest import FixedClassifier, MemoryRetriever
from typed_rag.config import Settings
from typed_rag.engines.base import ChatRequest, ChoiceRequest
from typed_rag.engines.fake import FakeEngine
from typed_rag.errors import UserError
from typed_rag.request import AnswerRequest
from typed_rag.result import LLMCall, Result
from typed_rag.system import TypedRAG
from typed_rag.types import QuestionType

SUBTOPICS = ["historical origins", "modern industrial uses", "health effects", "cultural meaning"]


class TracedResult(Result):
    """A Result with the feature's ``constraints`` trace field (present once the lead lands it)."""

    constraints: dict[str, Any] | None = None


@pytest.fixture
def eval_settings(settings: Settings, nfqa_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    import eval.constraints.runner as constraint_runner
    import eval.judging.resample as resample

    monkeypatch.setattr(constraint_runner, "BATCH_SIZE", 2)  # several batches per arm
    monkeypatch.setattr(constraint_runner, "SCORE_BATCH_SIZE", 3)
    monkeypatch.setattr(resample, "MAX_RESAMPLES", 2)
    return load_lab_settings(
        None,
        **{
            "home": str(settings.home),
            "engine.backend": "fake",
            "eval.data_dir": str(nfqa_dir),
        },
    )


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def rec(qid: str, subset: str = "nq", question: str = "why is coffee popular") -> WikiNFQARecord:
    return WikiNFQARecord(subset, qid, question, ("a", "b"), (3, 0))


def subtopic_responder(bad_for: Sequence[str] = ()) -> Any:
    """Subtopics JSON for every question, except garbage for questions containing ``bad_for``."""

    def respond(req: ChatRequest) -> str:
        text = req.messages[-1]["content"]
        if any(b in text for b in bad_for):
            return "I cannot help with that."
        return json.dumps({"subtopics": SUBTOPICS})

    return respond


# --------------------------------------------------------------------------- set building


def test_parse_subtopics_accepts_variants_and_cleans() -> None:
    ok = parse_subtopics(
        '```json\n{"subtopics": ["1. History.", "uses", "USES", "  ", "Risks"]}\n```'
    )
    assert ok.ok and ok.value == ["history", "uses", "risks"]  # numbering, dots, dupes, blanks
    cased = parse_subtopics(
        json.dumps(["Climate", "Mexico basin", "Roman Empire", "NASA missions"]),
        "Why is Mexico wet",
    )
    assert cased.value == ["climate", "Mexico basin", "Roman Empire", "NASA missions"]
    bare = parse_subtopics('["a one", "b two", "c three", "d four", "e five"]')
    assert bare.ok and bare.value == ["a one", "b two", "c three", "d four"]  # at most 4
    assert parse_subtopics("no json").status == NO_JSON
    assert parse_subtopics('{"subtopics": "history"}').status == BAD_SHAPE
    assert parse_subtopics('{"subtopics": ["a", 2, "c"]}').status == BAD_SHAPE
    long = "word " * 20
    assert parse_subtopics(json.dumps(["history", "uses", long])).status == TOO_FEW
    # a restatement of the whole question is not a subtopic
    restated = parse_subtopics(
        json.dumps(["why coffee is popular", "history", "uses", "taste"]), "why is coffee popular"
    )
    assert restated.ok and restated.value == ["history", "uses", "taste"]


def test_compose_question_and_templates_carry_a_cue() -> None:
    q = compose_question("why is coffee popular", "its history", "health effects", "cover-skip")
    assert q == "why is coffee popular? Please cover its history, but skip health effects."
    for name in TEMPLATES:
        text = compose_question("Q.", "INC", "EXC", name)
        assert text.startswith("Q. ") and "INC" in text and "EXC" in text
    with pytest.raises(UserError, match="unknown constraint template"):
        compose_question("q", "a", "b", "nope")


def test_make_item_picks_distinct_non_overlapping_topics_from_a_seed() -> None:
    r = rec("q1")
    a = make_item(r, SUBTOPICS, seed=7, type_="REASON")
    assert a is not None and a == make_item(r, SUBTOPICS, seed=7, type_="REASON")
    assert a.include[0] in SUBTOPICS and a.exclude[0] in SUBTOPICS
    assert a.include != a.exclude and a.type == "REASON"
    assert a.conditioned_question == compose_question(
        r.question, a.include[0], a.exclude[0], a.template
    )
    picks = {
        (m.include[0], m.exclude[0], m.template)
        for s in range(20)
        if (m := make_item(r, SUBTOPICS, s))
    }
    assert len(picks) > 5  # the seed really varies the choice
    # every pair overlaps -> no item (never "cover X but skip X")
    assert (
        make_item(r, ["roman history", "history of the roman empire", "roman history facts"], 1)
        is None
    )
    assert topics_overlap("health effects", "effects on health") and not topics_overlap(
        "health effects", "historical origins"
    )


def test_candidate_order_prefers_non_factoid_and_spreads_subsets_and_types() -> None:
    records = [rec(f"nq_{i}", "nq") for i in range(6)] + [rec(f"sq_{i}", "squad") for i in range(6)]
    types = ["FACTOID", "REASON", "REASON", "EVIDENCE-BASED", "DEBATE", "NOT-A-QUESTION"]
    labels = {
        r.question_id: QuestionLabel(r.question_id, r.subset, types[i % 6], 0.9, True)
        for i, r in enumerate(records)
    }
    order = candidate_order(records, labels, seed=3)
    assert sorted(r.question_id for r in order) == sorted(r.question_id for r in records)
    kinds = [labels[r.question_id].type for r in order]
    assert set(kinds[-4:]) == {"FACTOID", "NOT-A-QUESTION"}  # factoid-like only at the end
    assert [r.subset for r in order[:8]] == ["nq", "squad"] * 4  # alternating subsets
    assert set(kinds[:3]) == {"REASON", "EVIDENCE-BASED", "DEBATE"}  # types spread first
    assert order == candidate_order(records, labels, seed=3)
    assert order != candidate_order(records, labels, seed=4)


async def test_build_set_skips_bad_output_after_resampling_and_tops_up(
    eval_settings: Settings,
) -> None:
    records = load_wikinfqa(eval_settings.eval.data_dir, "nq,squad").records
    order = candidate_order(records, {}, seed=1)
    bad = order[0].question  # the first candidate never gives usable subtopics
    engine = FakeEngine(subtopic_responder([bad]))
    made = await build_constraint_set(engine, records, 3, seed=1, max_resamples=2)
    assert [i.question_id for i in made.items] == [r.question_id for r in order[1:4]]
    assert made.asked == 4 and len(made.skipped) == 1
    skipped = made.skipped[0]
    assert skipped["question_id"] == order[0].question_id and skipped["status"] == NO_JSON
    assert skipped["attempts"] == 3 and len(skipped["outputs"]) == 3  # 1 + 2 resamples
    # rounds: 3 asked, resample the bad one twice, then one top-up question
    assert [len(b) for b in engine.batches] == [3, 1, 1, 1]
    assert engine.batches[0][0].json_schema == SUBTOPICS_SCHEMA
    assert [b[0].seed for b in engine.batches[:3]] == [42, 43, 44]
    for item in made.items:
        assert item.subtopics == SUBTOPICS and item.include != item.exclude
        assert item.conditioned_question.startswith(item.question)


async def test_build_set_is_deterministic_and_bounded(eval_settings: Settings) -> None:
    records = load_wikinfqa(eval_settings.eval.data_dir, "nq,squad").records
    a = await build_constraint_set(FakeEngine(subtopic_responder()), records, 4, seed=5)
    b = await build_constraint_set(FakeEngine(subtopic_responder()), records, 4, seed=5)
    assert [i.to_dict() for i in a.items] == [i.to_dict() for i in b.items]
    c = await build_constraint_set(FakeEngine(subtopic_responder()), records, 4, seed=6)
    assert [i.to_dict() for i in a.items] != [i.to_dict() for i in c.items]
    # a model that never answers well: at most 2 x n questions asked, nothing invented
    engine = FakeEngine(lambda req: "{}")
    none = await build_constraint_set(engine, records, 2, seed=5, max_resamples=0)
    assert none.items == [] and none.asked == 4 and len(none.skipped) == 4
    assert sum(len(b) for b in engine.batches) == 4


async def test_build_set_counts_overlapping_subtopics_as_skipped() -> None:
    same = json.dumps(
        {"subtopics": ["roman history", "history of rome roman", "roman history era"]}
    )
    made = await build_constraint_set(FakeEngine(lambda r: same), [rec("q1")], 1)
    assert made.items == [] and made.skipped[0]["status"] == OVERLAPPING


def test_set_file_roundtrip_and_errors(tmp_path: Path) -> None:
    item = make_item(rec("q1"), SUBTOPICS, seed=1, type_="REASON")
    assert item is not None
    path = write_set(tmp_path / "set.jsonl", [item])
    assert load_set(path) == [item]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps(item.to_dict()) + "\n" + json.dumps({**item.to_dict(), "include": []}) + "\n"
    )
    with pytest.raises(UserError, match=r"bad.jsonl:2: field 'include'"):
        load_set(bad)
    bad.write_text(json.dumps(item.to_dict()) + "\n" + json.dumps(item.to_dict()) + "\n")
    with pytest.raises(UserError, match="duplicate question_id 'q1' \\(first on line 1\\)"):
        load_set(bad)
    bad.write_text("{not json\n")
    with pytest.raises(UserError, match="bad.jsonl:1: not valid JSON"):
        load_set(bad)
    with pytest.raises(UserError, match="constraint set not found"):
        load_set(tmp_path / "missing.jsonl")


# --------------------------------------------------------------------------- judge


def test_parse_judgement_edge_cases() -> None:
    ok = parse_judgement(
        '{"include": [{"id": 2, "covered": false}, {"id": 1, "covered": true}], '
        '"exclude": [{"id": 1, "discussed": true}]}',
        2,
        1,
    )
    assert ok.ok and ok.value.covered == [True, False] and ok.value.discussed == [True]
    positional = parse_judgement('{"include": [{"covered": true}], "exclude": [false]}', 1, 1)
    assert (
        positional.ok
        and positional.value.covered == [True]
        and positional.value.discussed == [False]
    )
    assert parse_judgement("nothing", 1, 1).status == NO_JSON
    assert parse_judgement("[true, false]", 1, 1).status == BAD_SHAPE
    assert parse_judgement('{"include": [{"id": 1, "covered": true}]}', 1, 1).status == BAD_SHAPE
    too_many = (
        '{"include": [{"covered": true}, {"covered": true}], "exclude": [{"discussed": false}]}'
    )
    assert parse_judgement(too_many, 1, 1).status == LENGTH_MISMATCH
    assert parse_judgement(too_many, 3, 1).status == LENGTH_MISMATCH
    strings = (
        '{"include": [{"id": 1, "covered": "true"}], "exclude": [{"id": 1, "discussed": false}]}'
    )
    assert parse_judgement(strings, 1, 1).status == BAD_SHAPE
    dup_ids = (
        '{"include": [{"id": 1, "covered": true}, {"id": 1, "covered": false}], '
        '"exclude": [{"id": 1, "discussed": false}]}'
    )
    assert parse_judgement(dup_ids, 2, 1).status == BAD_SHAPE
    bool_id = (
        '{"include": [{"id": true, "covered": true}], "exclude": [{"id": 1, "discussed": false}]}'
    )
    assert parse_judgement(bool_id, 1, 1).status == BAD_SHAPE


def judge_responder(verdicts: dict[str, tuple[list[bool], list[bool]]], bad_first: bool = False):
    """Verdicts by a marker in the answer text; with ``bad_first`` the first try (seed 42) is junk."""

    def respond(req: ChatRequest) -> str:
        if bad_first and req.seed == 42:
            return '{"include": []}'
        answer = req.messages[-1]["content"].rsplit("Answer:", 1)[-1]
        for marker, (cov, dis) in verdicts.items():
            if marker in answer:
                return json.dumps(
                    {
                        "include": [{"id": i + 1, "covered": c} for i, c in enumerate(cov)],
                        "exclude": [{"id": i + 1, "discussed": d} for i, d in enumerate(dis)],
                    }
                )
        return "no idea"

    return respond


async def test_judge_resamples_counts_unparsed_and_skips_empty_answers() -> None:
    engine = FakeEngine(judge_responder({"GOOD": ([True], [False])}, bad_first=True))
    judge = ComplianceJudge(engine, max_resamples=2)
    items = [
        ComplianceItem("a", "q", ["history"], ["health"], "GOOD answer"),
        ComplianceItem("b", "q", ["history"], ["health"], "rambling"),
        ComplianceItem("c", "q", ["history"], ["health"], "   "),
    ]
    a, b, c = await judge.judge(items)
    assert a.ok and a.covered == [True] and a.discussed == [False] and a.attempts == 2
    assert not b.ok and b.status == NO_JSON and b.attempts == 3 and b.covered is None
    assert c.status == EMPTY_ANSWER and c.covered == [False] and c.discussed == [False]
    assert c.attempts == 0
    assert [len(x) for x in engine.batches] == [2, 2, 1]  # the empty answer was never sent
    schema = engine.batches[0][0].json_schema
    assert schema["properties"]["include"]["minItems"] == 1
    prompt = engine.batches[0][0].messages[-1]["content"]
    assert (
        "Topics to include:\n1. history" in prompt and "Topics to leave out:\n1. health" in prompt
    )


# --------------------------------------------------------------------------- metrics


def test_compliance_on_hand_computed_cases() -> None:
    assert compliance([True], [False]) == {
        "include_covered": 1.0,
        "exclude_avoided": 1.0,
        "both_ok": 1.0,
    }
    assert compliance([True], [True]) == {
        "include_covered": 1.0,
        "exclude_avoided": 0.0,
        "both_ok": 0.0,
    }
    assert compliance([True, False], [False, True, False]) == pytest.approx(
        {"include_covered": 0.5, "exclude_avoided": 2 / 3, "both_ok": 0.0}
    )


def test_detection_match_by_topic_overlap() -> None:
    got = {"include": ["the history of coffee"], "exclude": ["health effects"]}
    assert detection_match(got, ["coffee history"], ["effects on health"])["both"]
    partial = detection_match(got, ["coffee history"], ["price"])
    assert partial == {"any": True, "include": True, "exclude": False, "both": False}
    assert detection_match(None, ["a"], ["b"]) == {
        "any": False,
        "include": False,
        "exclude": False,
        "both": False,
    }
    assert detection_match({"include": [], "exclude": []}, ["a"], ["b"])["any"] is False


def test_parse_arms() -> None:
    assert parse_arms("off, CUE,off") == ["off", "cue"]
    with pytest.raises(UserError, match="unknown arm"):
        parse_arms("off,sometimes")


# --------------------------------------------------------------------------- runner


def make_items(n: int = 4) -> list[ConstraintItem]:
    topics = [
        ("historical origins", "health effects"),
        ("modern uses", "cultural meaning"),
        ("trade routes", "brewing methods"),
        ("caffeine chemistry", "famous cafes"),
    ]
    out = []
    for i in range(n):
        inc, exc = topics[i % len(topics)]
        q = f"question number {i}"
        out.append(
            ConstraintItem(
                question_id=f"q{i}",
                subset="nq" if i % 2 == 0 else "squad",
                type="REASON" if i < 2 else "EVIDENCE-BASED",
                question=q,
                include=[inc],
                exclude=[exc],
                conditioned_question=compose_question(q, inc, exc, "cover-skip"),
                template="cover-skip",
                subtopics=[inc, exc],
            )
        )
    return out


class ArmStandIn:
    """An answerer per arm: with constraints on it detects them and obeys (answer says COMPLY);
    off, it covers everything (answer says IGNORE). Records what it was asked."""

    def __init__(self, settings: Settings, items: Sequence[ConstraintItem], log: list, fail: bool):
        self.mode = settings.constraints.mode
        self.by_q = {it.conditioned_question: it for it in items}
        self.log = log
        self.fail = fail

    def _one(self, question: str) -> TracedResult:
        if self.fail:
            raise RuntimeError("generator crashed")
        self.log.append((self.mode, question))
        it = self.by_q[question]
        on = self.mode != "off"
        return TracedResult(
            question=question,
            mode="typed-rag",
            answer=("COMPLY " if on else "IGNORE ") + question,
            type=it.type,
            constraints={"include": it.include, "exclude": it.exclude} if on else None,
            calls=[
                LLMCall(step="answer", round=1, prompt_tokens=100, completion_tokens=20 + on * 5)
            ],
            timings={"total": 2.0 if on else 1.0},
        )

    async def answer(self, question: AnswerRequest) -> TracedResult:
        return self._one(question.question)

    async def answer_many(self, questions: Sequence[AnswerRequest]):
        assert all(q.mode == "typed-rag" for q in questions)
        return [self._one(q.question) for q in questions]


class StandInAnswerers:
    def __init__(self, items: Sequence[ConstraintItem], fail_arms: Sequence[str] = ()) -> None:
        self.items = items
        self.fail_arms = set(fail_arms)
        self.asked: list[tuple[str, str]] = []
        self.got: list[str] = []
        self.closed = 0

    async def get(self, settings: Settings) -> ArmStandIn:
        mode = settings.constraints.mode
        self.got.append("outline" if settings.constraints.outline else mode)
        return ArmStandIn(settings, self.items, self.asked, mode in self.fail_arms)

    async def close(self) -> None:
        self.closed += 1


COMPLIANCE = {"COMPLY": ([True], [False]), "IGNORE": ([True], [True])}


async def test_run_answers_each_arm_then_judges_and_reports(
    eval_settings: Settings, tmp_path: Path
) -> None:
    items = make_items(4)
    answerers = StandInAnswerers(items)
    engine = FakeEngine(judge_responder(COMPLIANCE))
    runner = ConstraintRunner(
        eval_settings, tmp_path / "run", answerers=answerers, scorer_engine=engine, progress=False
    )
    stats = await runner.run(items, ["off", "cue"])
    assert answerers.got == ["off", "cue"] and answerers.closed == 1
    assert stats.answers["off"].computed == 4 and stats.answers["cue"].computed == 4
    assert stats.judgements.computed == 8 and stats.judgements.failed == 0
    assert [len(b) for b in engine.batches] == [3, 3, 2]  # score_batch_size 3
    answers = lines(tmp_path / "run" / ANSWERS)
    cue = next(a for a in answers if a["arm"] == "cue" and a["question_id"] == "q0")
    assert cue["constraints"] == {"include": ["historical origins"], "exclude": ["health effects"]}
    assert cue["result"]["question"] == items[0].conditioned_question
    assert cue["latency_s"] == 2.0 and cue["tokens"] == 125
    judged = lines(tmp_path / "run" / JUDGEMENTS)
    assert {(j["arm"], j["both_ok"]) for j in judged} == {("off", 0.0), ("cue", 1.0)}

    write_constraints_report(tmp_path / "run", eval_settings)
    rep = json.loads((tmp_path / "run" / "report.json").read_text())
    off, on = rep["arms"]["off"], rep["arms"]["cue"]
    assert off["include_covered"]["mean"] == 1.0 and off["exclude_avoided"]["mean"] == 0.0
    assert on["both_ok"]["mean"] == 1.0 and on["both_ok"]["count"] == 4
    assert off["detected_match"] == 0.0 and on["detected_match"] == 1.0
    assert on["mean_latency_s"] == 2.0 and off["mean_tokens"] == 120.0
    assert rep["paired"]["cue"]["both_ok"]["mean"] == 1.0 and rep["paired"]["cue"]["n"] == 4
    md = (tmp_path / "run" / "report.md").read_text()
    assert (
        "| cue | 4 | 100.0 [100.0, 100.0] | 100.0 [100.0, 100.0] | 100.0 [100.0, 100.0] | 100.0 |"
        in md
    )
    assert "| cue - off | 4 |" in md and "| REASON | 0.0 (2) | 100.0 (2) |" in md


async def test_outline_arm_is_cue_with_outlines_and_every_pair_is_reported(
    eval_settings: Settings, tmp_path: Path
) -> None:
    items = make_items(4)
    answerers = StandInAnswerers(items)
    runner = ConstraintRunner(
        eval_settings,
        tmp_path / "run",
        answerers=answerers,
        scorer_engine=FakeEngine(judge_responder(COMPLIANCE)),
        progress=False,
    )
    await runner.run(items, parse_arms("cue,outline,off"))
    assert answerers.got == ["cue", "outline", "off"]
    outline = arm_settings(eval_settings, "outline").constraints
    assert outline.mode == "cue" and outline.outline
    assert not arm_settings(outline_settings(eval_settings), "cue").constraints.outline

    write_constraints_report(tmp_path / "run", eval_settings)
    rep = json.loads((tmp_path / "run" / "report.json").read_text())
    pairs = {(p["arm"], p["baseline"]): p for p in rep["pairs"]}
    assert set(pairs) == {("cue", "off"), ("outline", "off"), ("outline", "cue")}
    assert pairs[("outline", "cue")]["both_ok"]["mean"] == 0.0
    assert (
        pairs[("outline", "off")]["both_ok"]["mean"] == 1.0 and pairs[("outline", "off")]["n"] == 4
    )
    md = (tmp_path / "run" / "report.md").read_text()
    assert "| outline - cue | 4 |" in md and "| outline - off | 4 |" in md


def linkage_chooser(req: ChoiceRequest) -> dict[str, float]:
    """Relevance: yes. Rank: a COMPLY answer beats every reference, an IGNORE one is 2nd of 3."""
    if req.choices == ("yes", "no"):
        return {"yes": 1.0}
    candidate = req.messages[-1]["content"]
    return {"1": 1.0} if "COMPLY question" in candidate else {"2": 1.0}


async def test_linkage_ranks_every_arm_among_the_base_questions_references(
    eval_settings: Settings, tmp_path: Path
) -> None:
    items = make_items(4)
    refs = {it.question_id: WikiNFQARecord(it.subset, it.question_id, it.question,
                                           ("best ref", "bad ref"), (3, 0)) for it in items}  # fmt: skip
    engine = FakeEngine(judge_responder(COMPLIANCE), chooser=linkage_chooser)
    run_dir = tmp_path / "run"

    def runner(references: dict[str, WikiNFQARecord]) -> ConstraintRunner:
        return ConstraintRunner(
            eval_settings, run_dir, answerers=StandInAnswerers(items), scorer_engine=engine,
            progress=False, references=references,
        )  # fmt: skip

    with pytest.raises(UserError, match="1 question.* not in the Wiki-NFQA data"):
        await runner({k: v for k, v in refs.items() if k != "q2"}).run(items, ["off", "cue"])
    assert not (run_dir / ANSWERS).exists()  # refused before answering anything

    stats = await runner(refs).run(items, ["off", "cue"])
    assert stats.linkage is not None and stats.linkage.computed == 8
    asked = [c for c in engine.choice_calls if c.choices != ("yes", "no")]
    assert len(asked) == 8
    assert all("Question: question number" in c.messages[-1]["content"] for c in asked)
    assert not any("Cover" in c.messages[-1]["content"].split("Answer")[0] for c in asked)
    rows = lines(run_dir / LINKAGE)
    assert {(r["arm"], r["rank"], r["type"]) for r in rows if r["question_id"] == "q0"} == {
        ("off", 2, "REASON"),
        ("cue", 1, "REASON"),
    }
    rep = build_constraints_report(run_dir, eval_settings)["linkage"]
    assert rep["arms"]["cue"]["mrr"]["mean"] == 1.0 and rep["arms"]["off"]["mrr"]["mean"] == 0.5
    (pair,) = rep["pairs"]
    assert (pair["a"], pair["b"], pair["n"], pair["mrr_diff"]) == ("cue", "off", 4, 0.5)
    write_constraints_report(run_dir, eval_settings)
    assert "| cue - off | 4 | +0.500 [+0.500, +0.500]" in (run_dir / "report.md").read_text()

    again = await runner(refs).run(items, ["off", "cue"])  # resumed: nothing ranked twice
    assert again.linkage is not None and again.linkage.done_before == 8
    assert again.linkage.computed == 0 and len(lines(run_dir / LINKAGE)) == 8


def outline_settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={"constraints": settings.constraints.model_copy(update={"outline": True})}
    )


async def test_interrupted_run_resumes_without_recomputing(
    eval_settings: Settings, tmp_path: Path
) -> None:
    items = make_items(4)
    run_dir = tmp_path / "run"
    # 1) the generator dies in the second arm: the first arm's answers are kept
    first = StandInAnswerers(items, fail_arms=["cue"])
    with pytest.raises(RuntimeError, match="every question of a batch failed in arm 'cue'"):
        await ConstraintRunner(
            eval_settings, run_dir, answerers=first, scorer_engine=FakeEngine(), progress=False
        ).run(items, ["off", "cue"])
    assert first.closed == 1  # closed even on failure
    assert [(a["arm"], a["question_id"]) for a in lines(run_dir / ANSWERS)] == [
        ("off", f"q{i}") for i in range(4)
    ]
    assert len(lines(run_dir / "errors.jsonl")) == 2  # one batch of 2, retried one by one

    # 2) answers complete, but the judge crashes after its first batch of 3
    calls = {"n": 0}
    good = judge_responder(COMPLIANCE)

    def flaky(req: ChatRequest) -> str:
        calls["n"] += 1
        if calls["n"] > 3:
            raise RuntimeError("judge crashed")
        return good(req)

    second = StandInAnswerers(items)
    with pytest.raises(RuntimeError, match="judge crashed"):
        await ConstraintRunner(
            eval_settings,
            run_dir,
            answerers=second,
            scorer_engine=FakeEngine(flaky),
            progress=False,
        ).run(items, ["off", "cue"])
    assert {m for m, _ in second.asked} == {"cue"} and len(second.asked) == 4
    assert len(lines(run_dir / JUDGEMENTS)) == 3

    # 3) the rerun judges only the 5 missing answers and answers nothing
    third = StandInAnswerers(items)
    engine = FakeEngine(good)
    stats = await ConstraintRunner(
        eval_settings, run_dir, answerers=third, scorer_engine=engine, progress=False
    ).run(items, ["off", "cue"])
    assert third.asked == [] and third.got == []
    assert stats.answers["off"].done_before == 4 and stats.answers["cue"].done_before == 4
    assert stats.judgements.done_before == 3 and stats.judgements.computed == 5
    assert sum(len(b) for b in engine.batches) == 5
    judged = lines(run_dir / JUDGEMENTS)
    assert len(judged) == len({(j["arm"], j["question_id"]) for j in judged}) == 8
    rep = build_constraints_report(run_dir, eval_settings)
    assert rep["arms"]["cue"]["answer_errors"] == 0  # the failed questions were answered later


async def test_report_counts_unparsed_verdicts_and_leaves_them_out(
    eval_settings: Settings, tmp_path: Path
) -> None:
    items = make_items(4)
    # q3's answers get no parseable verdict
    verdicts = {"COMPLY question number 3": ([], []), **COMPLIANCE}

    def respond(req: ChatRequest) -> str:
        if "number 3" in req.messages[-1]["content"].rsplit("Answer:", 1)[-1]:
            return "sorry"
        return judge_responder(verdicts)(req)

    runner = ConstraintRunner(
        eval_settings,
        tmp_path / "run",
        answerers=StandInAnswerers(items),
        scorer_engine=FakeEngine(respond),
        progress=False,
    )
    stats = await runner.run(items, ["off", "always"])
    assert stats.judgements.failed == 2
    rep = build_constraints_report(tmp_path / "run", eval_settings)
    assert rep["arms"]["always"]["judged"] == 3 and rep["arms"]["always"]["unparsed"] == 1
    assert rep["arms"]["always"]["judge_status"] == {"ok": 3, NO_JSON: 1}
    assert rep["arms"]["always"]["both_ok"]["count"] == 3
    assert rep["paired"]["always"]["n"] == 3


def test_run_refuses_a_different_set(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_set(a, make_items(2))
    write_set(b, make_items(3))
    check_run_set(tmp_path / "run", a)
    check_run_set(tmp_path / "run", a)  # same set: fine
    with pytest.raises(UserError, match="different constraint set"):
        check_run_set(tmp_path / "run", b)


async def test_shared_typed_rag_loads_once_and_gives_each_arm_its_settings(
    settings: Settings,
) -> None:
    built: list[TypedRAG] = []

    def build(s: Settings) -> TypedRAG:
        rag = TypedRAG(
            s, FakeEngine(), MemoryRetriever(), None, FixedClassifier(QuestionType.EVIDENCE_BASED)
        )
        built.append(rag)
        return rag

    shared = SharedTypedRAG(build)
    from eval.constraints import arm_settings

    off = await shared.get(arm_settings(settings, "off"))
    cue = await shared.get(arm_settings(settings, "cue"))
    assert len(built) == 1 and off is built[0]
    assert cue.engine is off.engine and cue.retriever is off.retriever
    assert cue.settings.constraints.mode == "cue" and off.settings.constraints.mode == "off"
    # the real request path answers the conditioned question (retrieval over the tiny corpus)
    (res,) = await cue.answer_many(
        ["why do leaves change color? Skip chlorophyll."], mode="typed-rag"
    )
    assert res.answer and res.question.endswith("Skip chlorophyll.")
    await shared.close()


# --------------------------------------------------------------------------- CLI


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> dict:
    """The real CLI; engines are FakeEngines that write subtopics/verdicts."""
    made: dict = {"engine_settings": []}

    def respond(req: ChatRequest) -> str:
        if req.json_schema and req.json_schema.get("title") == "constraint_subtopics":
            return json.dumps({"subtopics": SUBTOPICS})
        return judge_responder(COMPLIANCE)(req)

    def build_engine(s: Settings) -> FakeEngine:
        made["engine_settings"].append(s)
        return FakeEngine(respond)

    monkeypatch.setattr(typed_rag.engines, "build_engine", build_engine, raising=False)
    return made


def test_cli_builds_a_set_runs_it_and_reports(
    tmp_path: Path,
    nfqa_dir: Path,
    cli: dict,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    base = [
        "--set",
        f"home={tmp_path / 'home'}",
        "--set",
        "engine.backend=fake",
        "--set",
        f"eval.data_dir={nfqa_dir}",
    ]
    set_file = tmp_path / "set.jsonl"
    argv = [*base, "eval", "constraints-set", "--n", "3", "--out", str(set_file)]
    assert main([*argv, "--subsets", "nq,squad", "--seed", "3", "--scorer-model", "writer"]) == 0
    out = capsys.readouterr().out
    assert "wrote 3 item(s)" in out and "skipped 0" in out
    assert cli["engine_settings"][0].engine.model == "writer"
    items = load_set(set_file)
    assert len(items) == 3 and {i.subset for i in items} == {"nq", "squad"}
    # refuses to overwrite without --force
    assert main([*argv, "--subsets", "nq,squad"]) == 2
    assert "exists; pass --force" in capsys.readouterr().err

    import eval.constraints

    seen: list[str] = []

    class Answerers(StandInAnswerers):
        async def get(self, settings: Settings) -> ArmStandIn:
            seen.append(settings.constraints.mode)
            return await super().get(settings)

    monkeypatch.setattr(eval.constraints, "SharedTypedRAG", lambda: Answerers(items))
    run_dir = tmp_path / "run"
    run = [*base, "eval", "constraints-run", "--set", str(set_file), "--out", str(run_dir)]
    assert main([*run, "--arms", "off,cue", "--scorer-model", "judge", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert seen == ["off", "cue"]
    assert "answers cue: 3 new, 0 resumed, 0 failed" in out
    assert "| cue | 3 | 100.0 [100.0, 100.0]" in out and "Judge: fake:judge" in out
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["methods"] == ["off", "cue"] and len(manifest["question_ids"]) == 3
    # a rerun resumes; a bad arm is a clear error
    assert main([*run, "--scorer-model", "judge", "--no-progress"]) == 0
    assert "answers off: 0 new, 3 resumed" in capsys.readouterr().out
    # --linkage ranks the stored answers against the Wiki-NFQA references, nothing else
    assert main([*run, "--scorer-model", "judge", "--no-progress", "--linkage"]) == 0
    out = capsys.readouterr().out
    assert "linkage: 6 new, 0 resumed" in out and "| cue - off | 3 |" in out
    assert "Answer quality: LINKAGE rank" in out and seen == ["off", "cue"]
    assert main([*run, "--arms", "offf"]) == 2
    assert "unknown arm(s) offf" in capsys.readouterr().err
    assert main([*base, "eval", "constraints-report", str(run_dir)]) == 0
    assert "# Coverage-conditioned questions" in capsys.readouterr().out


def test_cli_set_with_an_unusable_model_is_a_clear_error(
    tmp_path: Path, nfqa_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(
        typed_rag.engines, "build_engine", lambda s: FakeEngine(lambda r: "{}"), raising=False
    )
    rc = main(
        [
            "--set",
            f"home={tmp_path / 'home'}",
            "--set",
            f"eval.data_dir={nfqa_dir}",
            "eval",
            "constraints-set",
            "--subsets",
            "nq,squad",
            "--n",
            "2",
            "--out",
            str(tmp_path / "set.jsonl"),
        ]
    )
    assert rc == 2
    assert "no usable subtopics for any of 4 question(s)" in capsys.readouterr().err
    assert not (tmp_path / "set.jsonl").exists()


def test_cli_run_that_aborts_says_how_to_resume(
    tmp_path: Path, cli: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    import eval.constraints

    items = make_items(2)
    set_file = write_set(tmp_path / "set.jsonl", items)
    monkeypatch.setattr(
        eval.constraints, "SharedTypedRAG", lambda: StandInAnswerers(items, fail_arms=["off"])
    )
    run_dir = tmp_path / "run"
    argv = ["--set", f"home={tmp_path / 'home'}", "eval", "constraints-run"]
    rc = main([*argv, "--set", str(set_file), "--out", str(run_dir), "--no-progress"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "every question of a batch failed in arm 'off'" in err and "rerun the same" in err
    assert len(lines(run_dir / "errors.jsonl")) == 2


# --------------------------------------------------------------------------- with the real feature


def test_every_template_carries_a_cue_the_feature_recognises() -> None:
    from typed_rag.constraints import has_cue

    for name in TEMPLATES:
        assert has_cue(compose_question("why do leaves change color", "a", "b", name)), name
    assert not has_cue("why do leaves change color in autumn")


async def test_real_typed_rag_arms_detect_and_the_report_counts_it(
    eval_settings: Settings, tmp_path: Path
) -> None:
    """TypedRAG over a scripted FakeEngine: the cue arm runs the detector, the off arm does not."""
    from typed_rag.engines.fake import scripted_responder

    detected = json.dumps(
        {
            "question": "why do leaves change color in autumn?",
            "include": ["leaf pigments"],
            "exclude": ["chlorophyll breakdown"],
        }
    )
    respond = scripted_responder({"coverage_constraints": detected})
    engines: list[FakeEngine] = []

    def build(s: Settings) -> TypedRAG:
        engines.append(FakeEngine(respond))
        return TypedRAG(
            s, engines[-1], MemoryRetriever(), None, FixedClassifier(QuestionType.EVIDENCE_BASED)
        )

    q = "why do leaves change color in autumn"
    item = ConstraintItem(
        question_id="nq_0",
        subset="nq",
        type="REASON",
        question=q,
        include=["autumn leaf pigments"],
        exclude=["chlorophyll breakdown"],
        conditioned_question=compose_question(
            q, "autumn leaf pigments", "chlorophyll breakdown", "cover-skip"
        ),
        template="cover-skip",
    )
    runner = ConstraintRunner(
        eval_settings,
        tmp_path / "run",
        answerers=SharedTypedRAG(build),
        scorer_engine=FakeEngine(judge_responder({"fake answer": ([True], [False])})),
        progress=False,
    )
    await runner.run([item], ["off", "cue"])
    assert len(engines) == 1  # one model for both arms
    answers = {a["arm"]: a for a in lines(tmp_path / "run" / ANSWERS)}
    assert answers["off"]["constraints"] is None
    cue = answers["cue"]["constraints"]
    assert cue["include"] == ["leaf pigments"] and cue["exclude"] == ["chlorophyll breakdown"]
    titles = [r.json_schema.get("title") for r in engines[0].calls if r.json_schema]
    assert titles.count("coverage_constraints") == 1  # only the cue arm asked
    rep = build_constraints_report(tmp_path / "run", eval_settings)
    assert rep["arms"]["off"]["detector_ran"] == 0.0 and rep["arms"]["cue"]["detector_ran"] == 1.0
    assert (
        rep["arms"]["cue"]["detected_match"] == 1.0
    )  # "leaf pigments" within "autumn leaf pigments"
    assert rep["arms"]["off"]["both_ok"]["mean"] == 1.0


# --------------------------------------------------------------------------- real engine (slow)


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_real_engine_writes_subtopics_and_judges_or_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SmolLM2-135M under llama.cpp's grammar: every output parses or is counted, never guessed."""
    import eval.constraints.judge as compliance_judge
    import eval.judging.resample as resample
    from typed_rag.engines import build_engine

    monkeypatch.setattr(resample, "MAX_RESAMPLES", 1)  # a 135M model: few, short rounds
    monkeypatch.setattr(compliance_judge, "COVERAGE_MAX_TOKENS", 120)
    real = load_lab_settings(
        None,
        **{
            "engine.backend": "llamacpp",
            "engine.model": "smollm2-135m-instruct-q4_1",
            "engine.n_ctx": 4096,
            "engine.n_threads": 1,
        },
    )
    if not real.eval.data_dir.is_dir():
        pytest.skip("Wiki-NFQA data not present")
    records = load_wikinfqa(real.eval.data_dir, "nq").records[:6]
    engine = build_engine(real)
    await engine.start()
    try:
        made = await build_constraint_set(
            engine, records, 2, seed=1, max_resamples=1, max_tokens=120
        )
        assert len(made.items) + len(made.skipped) == made.asked <= 4
        for item in made.items:
            assert item.include[0] in item.subtopics and item.exclude[0] in item.subtopics
            assert item.include != item.exclude
        for s in made.skipped:
            assert s["status"] in {NO_JSON, BAD_SHAPE, TOO_FEW, OVERLAPPING}
        judge = ComplianceJudge.from_settings(engine, real)
        verdicts = await judge.judge(
            [
                ComplianceItem(
                    "a",
                    "why do leaves change color in autumn",
                    ["pigments"],
                    ["tree species"],
                    "Leaves turn yellow and red because chlorophyll breaks down in autumn, "
                    "revealing carotenoid and anthocyanin pigments.",
                )
            ]
        )
        (v,) = verdicts
        assert 1 <= v.attempts <= 2 and v.prompt_tokens > 0
        if v.ok:
            assert len(v.covered or []) == 1 and len(v.discussed or []) == 1
        else:
            assert v.status in {NO_JSON, BAD_SHAPE, LENGTH_MISMATCH}
    finally:
        await engine.close()


def test_lexical_compliance_counts_named_topics() -> None:
    from eval.constraints.report import lexical_compliance

    rows = [
        {
            "answer": "Recent trends in AI include agents.",
            "include": ["history"],
            "exclude": ["recent trends"],
        },
        {
            "answer": "Its history starts in the 1950s.",
            "include": ["history"],
            "exclude": ["recent trends"],
        },
    ]
    assert lexical_compliance(rows) == {"include_named": 0.5, "exclude_named": 0.5}
    assert lexical_compliance([]) == {"include_named": None, "exclude_named": None}
