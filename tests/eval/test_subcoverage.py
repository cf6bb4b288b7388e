"""Sub-question coverage (Xie et al.): each metric on hand-computed cases, the decomposition
parsing, the judge prompts, and the cached judging run on a scripted judge."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from eval.subcoverage import evaluate_subcoverage
from eval.subcoverage import metrics as m
from eval.subcoverage.decompose import Decomposer, normalise_kind, parse_labels, parse_list
from eval.subcoverage.inputs import answer_items
from eval.subcoverage.judge import addressing_position, p_yes, parse_fragment, verdict_request
from eval.subcoverage.metrics import AnswerCells
from eval.subcoverage.prompts import MAX_SUB_QUESTIONS, classify_messages, fragment_messages
from eval.subcoverage.summary import judge_validity
from typed_rag.engines.base import ChatRequest, ChoiceRequest
from typed_rag.engines.fake import FakeEngine, scripted_responder

T = 0.7  # the coverage threshold on P(yes); the scripted judge gives 0.9 or 0.2

# --------------------------------------------------------------------------- metrics by hand

# Q1: 3 core (answered T F F; chunks covering 2 1 0 of 4), 1 background (T, 0), 1 follow-up (T, 1).
Q1 = AnswerCells(
    kinds=["core", "core", "core", "background", "follow_up"],
    answered=[True, False, False, True, True],
    chunk_hits=[2, 1, 0, 0, 1],
    n_chunks=4,
    positions=[0.1, None, None, 0.3, 0.9],
)
# Q2: 2 core (T F; 0 0 of 2), 1 background (F, 1), 1 follow-up (F, 2).
Q2 = AnswerCells(
    kinds=["core", "core", "background", "follow_up"],
    answered=[True, False, False, False],
    chunk_hits=[0, 0, 1, 2],
    n_chunks=2,
    positions=[0.5, None, None, None],
)


def pooled(stat: m.Stat) -> float:
    est = m.cluster_bootstrap([m.counts(Q1), m.counts(Q2)], stat, n_boot=200)
    assert est is not None and est.low <= est.mean + 1e-12 and est.mean <= est.high + 1e-12
    return est.mean


def test_scenarios_pool_every_sub_question_of_a_type() -> None:
    # Core: 5 sub-questions; neither: Q1c3, Q2c2; retrieved only: Q1c2; answered only: Q2c1;
    # both: Q1c1.
    got = {s: pooled(m.scenario("core", s)) for s in m.SCENARIOS}
    assert got == pytest.approx(
        {
            "not_answered_not_retrieved": 2 / 5,
            "not_answered_retrieved": 1 / 5,
            "answered_not_retrieved": 1 / 5,
            "answered_retrieved": 1 / 5,
        }
    )
    assert pooled(m.scenario("follow_up", "answered_retrieved")) == pytest.approx(1 / 2)
    assert pooled(m.scenario("background", "not_answered_retrieved")) == pytest.approx(1 / 2)


def test_metrics_one_to_four_by_hand() -> None:
    assert pooled(m.metric1("core")) == pytest.approx(2 / 5)
    assert pooled(m.metric1("background")) == pytest.approx(1 / 2)
    assert pooled(m.metric2("core")) == pytest.approx(2 / 5)
    assert pooled(m.metric2("follow_up")) == pytest.approx(1.0)
    assert pooled(m.metric3) == pytest.approx(1 / 2)  # P(a, r) / P(r) = (1/5) / (2/5)
    assert pooled(m.metric4) == pytest.approx(2 / 3)  # P(!a, !r) / P(!a) = (2/5) / (3/5)


def test_metric_five_compares_chunk_shares_of_covered_and_missed_core() -> None:
    # Covered core: Q1c1 2/4, Q2c1 0/2 -> 0.25; missed core: 1/4, 0/4, 0/2 -> 1/12.
    assert pooled(m.p_covered) == pytest.approx(0.25)
    assert pooled(m.p_not_covered) == pytest.approx(1 / 12)
    assert pooled(m.metric5) == pytest.approx(0.25 - 1 / 12)


def test_metric_six_is_follow_up_position_minus_core_background_mean() -> None:
    assert pooled(m.position("core")) == pytest.approx(0.3)  # (0.1 + 0.5) / 2
    assert pooled(m.metric6) == pytest.approx(0.9 - (0.3 + 0.3) / 2)


def test_weighted_rating_uses_per_type_coverage_rates() -> None:
    assert m.coverage_rates(Q1) == pytest.approx(
        {"core": 1 / 3, "background": 1.0, "follow_up": 1.0}
    )
    assert m.rating(m.coverage_rates(Q1)) == pytest.approx(1 / 3 + 0.5 - 1)
    assert m.rating(m.coverage_rates(Q2)) == pytest.approx(0.5)
    only_core = AnswerCells(["core", "core"], [True, False], [0, 0], 0, [0.2, None])
    assert m.coverage_rates(only_core)["background"] is None
    assert m.rating(m.coverage_rates(only_core)) == pytest.approx(0.5)  # absent types add 0


def test_undefined_statistics_are_none_and_one_question_has_no_spread() -> None:
    no_chunks = AnswerCells(["core"], [False], [0], 0, [None])
    assert m.cluster_bootstrap([m.counts(no_chunks)], m.metric5) is None
    assert m.cluster_bootstrap([m.counts(no_chunks)], m.metric3) is None  # nothing retrieved
    one = m.cluster_bootstrap([m.counts(Q1)], m.metric1("core"))
    assert one is not None and one.low == one.mean == one.high == pytest.approx(1 / 3)
    assert m.cluster_bootstrap([], m.metric1("core")) is None


def test_win_rates_count_ties_apart() -> None:
    ratings = {
        "a": {"q1": 0.5, "q2": 0.2, "q3": 0.1, "q4": 1.0},
        "b": {"q1": 0.4, "q2": 0.2, "q3": 0.3},  # q4 unanswered by b: not compared
        "c": {"q1": 0.0},
    }
    ab, ac, bc = m.win_rates(ratings)
    assert (ab.a, ab.b, ab.wins, ab.losses, ab.ties) == ("a", "b", 1, 1, 1)
    assert ab.to_dict()["win_rate"] == pytest.approx(1 / 3)
    assert ab.to_dict()["tie_rate"] == pytest.approx(1 / 3)
    assert (ac.n, ac.wins) == (1, 1) and (bc.wins, bc.losses) == (1, 0)


def test_addressing_position_is_the_fragments_first_word_over_answer_length() -> None:
    answer = " ".join(f"w{i}" for i in range(1, 101))
    assert addressing_position(answer, "w20 w21 w22") == pytest.approx(0.2)  # the paper's example
    text = "Cities are warm. Paved surfaces, it turns out, soak up heat by day!"
    # Case and punctuation do not matter; a paraphrased tail is found by its first words.
    assert addressing_position(text, "paved surfaces it turns out soak") == pytest.approx(4 / 13)
    assert addressing_position(text, "Paved surfaces, it turns out, keep heat") == pytest.approx(
        4 / 13
    )
    # Reordered words: the window sharing most of them.
    assert addressing_position(text, "soak heat up by day") == pytest.approx(9 / 13)
    assert addressing_position(text, "nothing like this at all") is None
    assert addressing_position("", "x") is None


# --------------------------------------------------------------------------- parsing and prompts


def test_list_parsing_tolerates_chatter_and_drops_duplicates() -> None:
    got = parse_list(
        'Sure!\n```json\n{"sub_questions": ["What is A?", "what is a?", "", 3, "B?"]}```'
    )
    assert got.ok and got.value == ["What is A?", "B?"]
    many = json.dumps({"sub_questions": [f"Q{i}?" for i in range(20)]})
    assert len(parse_list(many).value or []) == MAX_SUB_QUESTIONS
    assert parse_list('["Only a list?"]').value == ["Only a list?"]
    assert parse_list("not json at all").status == "no-json"
    assert parse_list('{"sub_questions": []}').status == "empty"
    assert parse_list('{"sub_questions": "one"}').status == "bad-shape"


def test_label_parsing_needs_every_id_once_and_known_kinds() -> None:
    ok = '{"labels": [{"id": 2, "type": "Follow-up"}, {"id": "1", "type": "core"}]}'
    assert parse_labels(ok, 2).value == ["core", "follow_up"]
    assert parse_labels('{"labels": [{"id": 1, "type": "core"}]}', 2).status == "incomplete"
    assert parse_labels('{"labels": [{"id": 3, "type": "core"}]}', 2).status == "bad-shape"
    assert parse_labels('{"labels": [{"id": 1, "type": "central"}]}', 1).status == "bad-shape"
    assert parse_labels('{"labels": [{"id": true, "type": "core"}]}', 1).status == "bad-shape"
    assert parse_labels('{"labels": {"id": 1}}', 1).status == "bad-shape"
    assert parse_labels("{oops", 1).status == "no-json"
    assert normalise_kind("Background sub-question") == "background"
    assert normalise_kind("follow up") == "follow_up"


def test_fragment_parsing_reads_none_as_no_fragment() -> None:
    assert parse_fragment('{"fragment": "Paved surfaces soak up heat"}').value == (
        "Paved surfaces soak up heat"
    )
    assert parse_fragment('{"fragment": "None"}').value == ""
    assert parse_fragment('{"fragment": 3}').status == "bad-shape"
    assert parse_fragment("None").status == "no-json"


def test_judge_prompts_put_the_text_before_the_sub_question() -> None:
    """Consecutive judgements of one text share the engine's cached prompt prefix."""
    a, b = (
        verdict_request("Leaves lose chlorophyll.", "Why?"),
        verdict_request("Leaves lose chlorophyll.", "When?"),
    )
    common = os.path.commonprefix([a.messages[-1]["content"], b.messages[-1]["content"]])
    assert common.endswith("Leaves lose chlorophyll.\n\nQuestion: Wh")
    assert (a.prefix, a.choices) == ("[[", ("yes", "no"))
    frag = fragment_messages("Leaves lose chlorophyll.", "Why?")[-1]["content"]
    assert os.path.commonprefix([frag, a.messages[-1]["content"]]).endswith("Question: Why?\n\n")
    assert p_yes({"yes": math.log(0.3), "no": math.log(0.1)}) == pytest.approx(0.75)
    assert p_yes({}) == 0.5


def test_classification_prompt_has_definitions_examples_and_numbered_sub_questions() -> None:
    text = classify_messages("Why?", ["A?", "B?"])[-1]["content"]
    assert "core:" in text and "background:" in text and "follow_up:" in text
    assert "Worked examples" in text and text.endswith(
        "Question: Why?\nSub-questions:\n1. A?\n2. B?"
    )


async def test_decomposer_resamples_bad_json_and_missing_ids() -> None:
    engine = FakeEngine(
        scripted_responder(
            {
                "sub_question_list": ["no json", '{"sub_questions": ["A?", "B?"]}'],
                "sub_question_labels": [
                    '{"labels": [{"id": 1, "type": "core"}]}',
                    '{"labels": [{"id": 1, "type": "core"}, {"id": 2, "type": "background"}]}',
                ],
            }
        )
    )
    judge = Decomposer(engine, max_resamples=2, temperature=0.0)
    (listed,) = await judge.list_sub_questions(["Why?"])
    assert listed.ok and listed.value == ["A?", "B?"] and listed.attempts == 2
    (labels,) = await judge.classify(["Why?"], [["A?", "B?"]])
    assert labels.ok and labels.value == ["core", "background"] and labels.attempts == 2


# --------------------------------------------------------------------------- the cached run

SUBS = {
    "How does Rayleigh scattering work?": ("core", "Rayleigh"),
    "Why does blue light scatter more than red?": ("core", "blue"),
    "What is visible light?": ("background", "Light is"),
    "Why are sunsets red?": ("follow_up", "Sunsets"),
}
ORDER = list(SUBS)
PASSAGES = {
    "p1": "Rayleigh scattering by air molecules is strongest for short wavelengths.",
    "p2": "Light is electromagnetic radiation that the eye can see.",
    "p3": "The Eiffel Tower is in Paris.",
}


def text_and_question(messages: list[dict[str, str]]) -> tuple[str, str]:
    body, question = messages[-1]["content"].rsplit("Text:\n", 1)[1].split("\n\nQuestion: ", 1)
    return body, question.split("\n\n", 1)[0]


def judge_engine() -> FakeEngine:
    def respond(req: ChatRequest) -> str:
        title = (req.json_schema or {}).get("title")
        if title == "sub_question_list":
            return json.dumps({"sub_questions": ORDER})
        if title == "sub_question_labels":
            kinds = [SUBS[q][0] for q in ORDER]
            return json.dumps({"labels": [{"id": i, "type": k} for i, k in enumerate(kinds, 1)]})
        body, question = text_and_question(req.messages)
        key = SUBS[question][1]
        sentence = next((s for s in body.split(". ") if key in s), None)
        return json.dumps({"fragment": sentence or "None"})

    def choose(req: ChoiceRequest) -> dict[str, float]:
        body, question = text_and_question(req.messages)
        return {"yes": 0.9, "no": 0.1} if SUBS[question][1] in body else {"yes": 0.2, "no": 0.8}

    return FakeEngine(respond, chooser=choose)


def passage(pid: str, citation: int, text: bool = True) -> dict[str, object]:
    row: dict[str, object] = {"citation": citation, "id": pid, "title": ""}
    if text:
        row["text"] = PASSAGES[pid]
    return row


# rag: 8 words; "Rayleigh" starts at word 1, "Sunsets" at word 6.
RAG_ANSWER = "Rayleigh scattering makes skies look. Sunsets are red."
ROWS = [
    {
        "method": "rag",
        "question_id": "q1",
        "question": "Why is the sky blue?",
        "type": "REASON",
        "answer": RAG_ANSWER,
        "result": {"passages": [passage("p3", 2), passage("p1", 1, text=False)]},
    },
    {
        "method": "typed-rag",
        "question_id": "q1",
        "question": "Why is the sky blue?",
        "type": "REASON",
        "answer": "Light is what we see; blue light scatters most.",
        "result": {"passages": [passage("p1", 1), passage("p2", 2)]},
    },
    {
        "method": "llm",
        "question_id": "q1",
        "question": "Why is the sky blue?",
        "type": "REASON",
        "answer": "",
        "result": {"passages": []},
    },
]


def lookup(ids: list[str]) -> dict[str, tuple[str, str]]:
    return {pid: ("", PASSAGES[pid]) for pid in ids}


async def test_run_judges_each_cell_once_reports_and_resumes_without_calls(tmp_path: Path) -> None:
    engine = judge_engine()
    summary = await evaluate_subcoverage(
        engine,
        ROWS,
        tmp_path,
        judge_model="judge-x",
        lookup=lookup,
        n_boot=50,
        batch_size=5,
        threshold=T,
    )
    # One list call and one label call; chunks p1, p3 (rag) and p2 (typed-rag) judged once
    # each, plus two non-empty answers: 5 texts x 4 sub-questions.
    titles = [(r.json_schema or {}).get("title") for r in engine.calls]
    assert titles.count("sub_question_list") == 1 and titles.count("sub_question_labels") == 1
    assert len(engine.choice_calls) == 20
    # Each text's judgements are consecutive (they share the prompt prefix).
    texts = [text_and_question(r.messages)[0] for r in engine.choice_calls]
    assert all(len(set(texts[i : i + 4])) == 1 for i in range(0, 20, 4))
    # Fragments only for covered answer cells: rag 2 (Rayleigh, Sunsets), typed-rag 2.
    assert titles.count("coverage_fragment") == 4

    assert summary["judge_model"] == "judge-x" and summary["questions"] == 1
    rag = summary["metrics"]["rag"]["overall"]
    assert rag["metric1"]["core"]["mean"] == pytest.approx(0.5)
    assert rag["metric1"]["follow_up"]["mean"] == pytest.approx(1.0)
    assert rag["metric2"]["core"]["mean"] == pytest.approx(0.5)  # p1 covers Rayleigh only
    assert rag["metric3"]["mean"] == pytest.approx(1.0)
    assert rag["metric4"]["mean"] == pytest.approx(1.0)  # "blue" missed and not retrieved
    assert rag["metric5"]["mean"] == pytest.approx(0.5 - 0.0)
    assert rag["addressing_position"]["core"]["mean"] == pytest.approx(1 / 8)
    assert rag["addressing_position"]["follow_up"]["mean"] == pytest.approx(6 / 8)
    assert rag["metric6"] is None  # no background addressed: undefined
    assert rag["rating"]["mean"] == pytest.approx(0.5 - 1.0)
    typed = summary["metrics"]["typed-rag"]
    assert typed["overall"]["rating"]["mean"] == pytest.approx(0.5 + 0.5)
    assert typed["by_type"]["REASON"]["metric1"]["background"]["mean"] == pytest.approx(1.0)
    llm = summary["metrics"]["llm"]["overall"]
    assert llm["retrieval"] is False and llm["metric2"] is None and llm["scenarios"] is None
    assert llm["rating"]["mean"] == 0.0  # the empty answer covers nothing, unjudged
    pairs = {(w["a"], w["b"]): w for w in summary["win_rates"]["overall"]}
    assert pairs[("rag", "typed-rag")]["losses"] == 1
    assert pairs[("rag", "typed-rag")]["rating_difference"]["mean"] == pytest.approx(-1.5)
    assert pairs[("typed-rag", "llm")]["wins"] == 1 and pairs[("rag", "llm")]["losses"] == 1
    assert summary["judgements"]["answers_pending"] == 0
    assert summary["judgements"]["positions_located"] == 4
    assert (summary["judgements"]["verdicts"], summary["judgements"]["fragments"]) == (20, 4)
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    report = (tmp_path / "report.md").read_text()
    assert "judge judge-x" in report and "| rag | 1 | 0.50 [0.50, 0.50] |" in report
    assert "| rag vs typed-rag | 1 | 0 | 1 | 0 | -1.50 [-1.50, -1.50] |" in report

    # A rerun asks the engine for nothing and reports the same, even when the cache holds
    # another question's verdicts (a run grown past this one's --limit).
    other = {"question_id": "q-later", "target": "answer:rag:x", "sub_question": "?", "p_yes": 1}
    with (tmp_path / "verdicts.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps(other) + "\n")
    again = judge_engine()
    assert (
        await evaluate_subcoverage(
            again, ROWS, tmp_path, judge_model="judge-x", lookup=lookup, n_boot=50, threshold=T
        )
        == summary
    )
    assert again.calls == [] and again.choice_calls == []

    # A regenerated answer is judged afresh; nothing else is.
    changed = [dict(ROWS[0], answer="Sunsets are red.")] + ROWS[1:]
    third = judge_engine()
    await evaluate_subcoverage(third, changed, tmp_path, lookup=lookup, n_boot=50, threshold=T)
    assert len(third.choice_calls) == 4 and len(third.calls) == 1  # one new fragment


async def test_graded_references_get_verdicts_only_and_measure_the_judge(tmp_path: Path) -> None:
    from eval.data.wikinfqa import WikiNFQARecord
    from eval.subcoverage.inputs import reference_items

    record = WikiNFQARecord(
        "nq",
        "q1",
        "Why is the sky blue?",
        answers=("Paris is big.", "Rayleigh scattering sends blue light.", "Light is blue."),
        labels=(0, 3, 1),
    )
    refs = reference_items([record], {"q1": "REASON"})
    assert [(r.method, r.answer, r.type, r.chunks) for r in refs] == [
        ("reference:3", "Rayleigh scattering sends blue light.", "REASON", []),
        ("reference:0", "Paris is big.", "REASON", []),
    ]
    engine = judge_engine()
    summary = await evaluate_subcoverage(
        engine, ROWS[1:2], tmp_path, references=refs, n_boot=50, threshold=T
    )
    titles = [(r.json_schema or {}).get("title") for r in engine.calls]
    assert titles.count("coverage_fragment") == 2  # the typed-rag answer's, none for references
    assert len(engine.choice_calls) == 5 * 4  # answer, p1, p2 and two references
    validity = summary["judge_validity"]
    # Core coverage: grade 3 covers both core sub-questions (Rayleigh, blue), grade 0 none.
    assert validity["n"] == 1 and validity["grade3_above_grade0"]["mean"] == 1.0
    assert validity["grade3_core_coverage"]["mean"] == 1.0
    assert validity["grade0_core_coverage"]["mean"] == 0.0
    assert list(summary["metrics"]) == ["typed-rag"]  # references are no method
    assert "Judge validity (1 questions)" in (tmp_path / "report.md").read_text()

    # The threshold is applied when verdicts are read: a stricter one needs no new calls
    # and here makes every cell uncovered (the judge's P(yes) is 0.9 or 0.2).
    strict = judge_engine()
    summary = await evaluate_subcoverage(
        strict, ROWS[1:2], tmp_path, references=refs, n_boot=50, threshold=0.95
    )
    assert strict.calls == [] and strict.choice_calls == []
    assert summary["threshold"] == 0.95
    assert summary["metrics"]["typed-rag"]["overall"]["rating"]["mean"] == 0.0
    assert summary["judge_validity"]["grade3_above_grade0"]["mean"] == 0.5  # a tie
    assert summary["judge_validity"]["by_threshold"]["0.85"] == 1.0
    assert "covered when P(yes) > 0.95" in (tmp_path / "report.md").read_text()


def test_judge_validity_orders_graded_references_at_each_threshold() -> None:
    # Two questions' core P(yes) in their grade-3 and grade-0 references.
    pairs = [([0.9, 0.6], [0.6, 0.4]), ([0.8], [0.75])]
    validity = judge_validity(pairs, threshold=0.7, n_boot=20)
    assert validity is not None and validity["n"] == 2
    # 0.7: q1 covers 1/2 vs 0/2 (ordered), q2 1 vs 1 (a tie, half).
    assert validity["grade3_above_grade0"]["mean"] == pytest.approx(0.75)
    assert validity["grade3_core_coverage"]["mean"] == pytest.approx(0.75)
    assert validity["grade0_core_coverage"]["mean"] == pytest.approx(0.5)
    curve = validity["by_threshold"]
    assert curve["0.50"] == pytest.approx(0.75)  # q1 1 vs 1/2; q2 tie
    assert curve["0.75"] == pytest.approx(1.0)  # q2: 0.8 covers, 0.75 does not
    assert curve["0.90"] == pytest.approx(0.5)  # nothing covered: two ties
    assert judge_validity([], threshold=0.7) is None


async def test_failed_decomposition_is_cached_and_reported(tmp_path: Path) -> None:
    engine = FakeEngine(scripted_responder({"sub_question_list": "never json"}))
    rows = [dict(ROWS[1])]
    summary = await evaluate_subcoverage(
        engine, rows, tmp_path, max_resamples=1, n_boot=10, threshold=T
    )
    assert len(engine.calls) == 2 and engine.choice_calls == []
    assert summary["decomposition"]["failed"] == {"list:no-json": 1}
    assert summary["judgements"]["answers_pending"] == 1 and summary["questions"] == 0
    again = FakeEngine(scripted_responder({"sub_question_list": "never json"}))
    await evaluate_subcoverage(again, rows, tmp_path, max_resamples=1, n_boot=10, threshold=T)
    assert again.calls == []


def test_answer_items_order_chunks_by_citation_and_count_missing_texts() -> None:
    (rag,) = answer_items(ROWS[:1])
    assert [c.id for c in rag.chunks] == ["p3"] and rag.missing_texts == 1
    (rag,) = answer_items(ROWS[:1], lookup)
    assert [c.id for c in rag.chunks] == ["p1", "p3"] and rag.missing_texts == 0
    assert [it.method for it in answer_items(ROWS, methods=["llm"])] == ["llm"]
