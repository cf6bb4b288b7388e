"""Judging protocols on a scripted engine, and the validity metrics on hand-made cases."""

from __future__ import annotations

import math

import pytest

from eval.judging.linkage import LinkageItem, Reference
from eval.judging.linkage_prob import LinkageProbScorer, expected_reciprocal_rank
from eval.judging.protocols import ensemble, judge, parse_protocol
from eval.judging.validity import (
    GRADED,
    NOGOLD,
    OFFTOPIC,
    PADDED,
    SCAFFOLDED,
    VOUCHED,
    Candidate,
    padding,
    probes,
    scaffolding,
    validity,
    vouching,
)
from typed_rag.engines.base import ChoiceRequest
from typed_rag.engines.fake import FakeEngine
from typed_rag.errors import UserError

REFS = [Reference("the best answer", 3), Reference("a middling one", 1), Reference("wrong", 0)]


def item(key: str, candidate: str) -> LinkageItem:
    return LinkageItem(key, "why is the sky blue?", REFS, candidate)


async def test_linkage_prob_reads_a_renormalised_distribution_and_its_mode() -> None:
    def chooser(req: ChoiceRequest) -> dict[str, float]:
        assert req.prefix == "[[" and req.choices == ("1", "2", "3", "4")
        return {"1": 0.1, "2": 0.3, "3": 0.05, "4": 0.05}  # the rest: other tokens

    (score,) = await LinkageProbScorer(FakeEngine(chooser=chooser)).score([item("a", "x")])
    assert score.rank == 2 and score.status == "ok"
    assert score.dist == pytest.approx([0.2, 0.6, 0.1, 0.1])
    assert expected_reciprocal_rank(score.dist) == pytest.approx(0.2 + 0.3 + 0.1 / 3 + 0.025)


async def test_empty_candidates_are_last_without_asking_the_engine() -> None:
    engine = FakeEngine()
    (score,) = await LinkageProbScorer(engine).score([item("a", "  ")])
    assert score.rank == 4 and score.dist == [0, 0, 0, 1] and engine.choice_calls == []


async def test_the_off_topic_rule_is_in_the_prompt() -> None:
    engine = FakeEngine(chooser=lambda r: {"4": 1.0})
    await LinkageProbScorer(engine).score([item("a", "x")])
    assert "does not address this question" in engine.choice_calls[0].messages[-1]["content"]


async def test_pairwise_prob_averages_both_orders() -> None:
    def chooser(req: ChoiceRequest) -> dict[str, float]:
        text = req.messages[-1]["content"]
        first = text.split("Answer A:")[1].split("Answer B:")[0]
        # Position bias: A preferred 0.7 whatever it is, unless A is the best reference.
        return {"A": 0.2, "B": 0.8} if "the best answer" in first else {"A": 0.7, "B": 0.3}

    (j,) = await judge("pairwise-prob", FakeEngine(chooser=chooser), [item("a", "cand")])
    # vs best: cand first 0.7, cand second P(B)=0.8 -> 0.75; vs others: 0.7 and 0.3 -> 0.5 each
    assert j.quality == pytest.approx((0.75 + 0.5 + 0.5) / 3)
    assert not j.worst


async def test_rubric_prob_maps_expected_score_to_unit_interval() -> None:
    (j,) = await judge(
        "rubric-prob", FakeEngine(chooser=lambda r: {"1": 0.5, "5": 0.5}), [item("a", "c")]
    )
    assert j.quality == pytest.approx(0.5)


def test_protocol_names_are_checked() -> None:
    assert parse_protocol("linkage-prob+rubric-prob") == ["linkage-prob", "rubric-prob"]
    with pytest.raises(UserError, match="unknown judge protocol"):
        parse_protocol("vibes")


def test_ensemble_averages_quality_and_needs_agreement_for_worst() -> None:
    from eval.judging.protocols import Judgement

    a = [Judgement("k", 0.2, True, False)]
    b = [Judgement("k", 0.4, False, False)]
    (m,) = ensemble([a, b])
    assert m.quality == pytest.approx(0.3) and not m.worst


def _cand(qid: str, kind: str, grade: int | None) -> Candidate:
    key = f"{qid}/{kind}/{grade}"
    return Candidate(key, qid, kind, grade, item(key, "c"))


def test_validity_counts_orderings_off_topic_and_no_gold() -> None:
    cands = [
        _cand("q1", GRADED, 3),
        _cand("q1", GRADED, 1),
        _cand("q1", GRADED, 0),
        _cand("q1", OFFTOPIC, None),
        _cand("q1", NOGOLD, None),
        _cand("q2", GRADED, 3),
        _cand("q2", GRADED, 0),
        _cand("q2", OFFTOPIC, None),
    ]
    quality = {
        "q1/graded/3": 0.9,
        "q1/graded/1": 0.5,
        "q1/graded/0": 0.95,  # 3 < 0: wrong
        "q1/offtopic/None": 0.0,
        "q1/nogold/None": 0.4,
        "q2/graded/3": 0.8,
        "q2/graded/0": 0.1,
        "q2/offtopic/None": 1.0,
    }
    worst = {k: v == 0.0 for k, v in quality.items()}
    best = {k: v == 1.0 for k, v in quality.items()}
    out = validity(cands, quality, worst, best, n_boot=20)
    assert out["acc_3v0"] == 0.5 and out["acc_3v1"] == 1.0
    assert out["acc_pairs"] == pytest.approx(2 / 4)  # q1: 3>1 ok, 3>0 no, 1>0 no; q2: 3>0 ok
    assert out["acc_offtopic"] == 0.5 and out["offtopic_first"] == 0.5
    assert out["acc_nogold"] == 1.0 and out["n"] == 2
    assert not math.isnan(out["spearman"])


def test_validity_reports_whether_padding_pays() -> None:
    cands = [_cand(q, GRADED, 1) for q in ("q1", "q2")] + [
        _cand(q, PADDED, 1) for q in ("q1", "q2")
    ]
    cands += [_cand(q, GRADED, 3) for q in ("q1", "q2")]
    quality = {"q1/graded/1": 0.5, "q1/padded/1": 0.7, "q2/graded/1": 0.5, "q2/padded/1": 0.5}
    quality |= {"q1/graded/3": 0.9, "q2/graded/3": 0.9}
    flags = dict.fromkeys(quality, False)
    out = validity(cands, quality, flags, flags, n_boot=20)
    # q1: the padded copy scores higher (length paid); q2: a tie counts half
    assert out["acc_padding"] == pytest.approx(0.25) and out["n_padding"] == 2
    assert out["mean_quality"]["padded"] == pytest.approx(0.6)
    copy = padding("Rayleigh scattering.", "Why is the sky blue?")
    assert copy.startswith("Rayleigh scattering. ") and "fuller picture" in copy


def test_validity_reports_whether_vouching_pays() -> None:
    cands = [_cand(q, kind, 1) for q in ("q1", "q2", "q3") for kind in (GRADED, VOUCHED)]
    quality = {"q1/graded/1": 0.5, "q1/vouched/1": 0.6, "q2/graded/1": 0.5}
    quality |= {"q2/vouched/1": 0.4, "q3/graded/1": 0.3, "q3/vouched/1": 0.9}
    flags = dict.fromkeys(quality, False)
    out = validity(cands, quality, flags, flags, n_boot=20)
    # only q2's vouched copy scores no higher than the answer as it was
    assert out["acc_vouching"] == pytest.approx(1 / 3, abs=1e-4) and out["n_vouching"] == 3
    assert out["n_padding"] == 0 and math.isnan(out["acc_padding"])
    assert out["mean_quality"]["vouched"] == pytest.approx(1.9 / 3, abs=1e-4)
    copy = vouching("Rayleigh scattering.", "Why is the sky blue?")
    assert copy.startswith("Rayleigh scattering. ") and copy.endswith("in the references.")


def test_the_scaffolded_probe_opens_the_answer_with_source_talk_the_guard_removes() -> None:
    from typed_rag.finishing.scaffolding import unscaffold

    answer = "Blue light is scattered more than red light by the air [1]."
    copy = scaffolding(answer, "Why is the sky blue?")
    assert copy == (
        "Based on the information provided in the references, blue light is scattered more "
        "than red light by the air [1]."
    )
    assert unscaffold(copy).answer == answer  # the copy is exactly what the guard undoes
    assert scaffolding("NASA says so.", "q").endswith(", NASA says so.")  # acronyms kept
    cands = [_cand(q, kind, 1) for q in ("q1", "q2") for kind in (GRADED, SCAFFOLDED)]
    quality = {"q1/graded/1": 0.5, "q1/scaffolded/1": 0.6, "q2/graded/1": 0.5}
    quality |= {"q2/scaffolded/1": 0.4}
    flags = dict.fromkeys(quality, False)
    out = validity(cands, quality, flags, flags, n_boot=20)
    assert out["acc_scaffolding"] == pytest.approx(0.5) and out["n_scaffolding"] == 2


def test_probes_are_named_in_a_comma_list() -> None:
    assert probes("scaffolded") == (SCAFFOLDED,)
    assert probes(" padded, vouched ") == (PADDED, VOUCHED)
    assert probes("none") == ()
    with pytest.raises(UserError, match="unknown probe padding: choose from padded"):
        probes("padding")


def test_judge_validity_command_is_resumable_and_writes_the_summary(
    tmp_path, nfqa_dir, settings
) -> None:
    from eval.data.labels import classify_questions
    from eval.data.wikinfqa import load_wikinfqa
    from eval.judging.validity_run import run_validity
    from eval.settings import load_lab_settings
    from tests.eval.conftest import KeywordClassifier

    s = load_lab_settings(
        None,
        **{"home": str(settings.home), "engine.backend": "fake"},
    )
    records = load_wikinfqa(nfqa_dir, "nq,squad").records
    labels = classify_questions(records, KeywordClassifier())
    out = tmp_path / "judge"
    kwargs = dict(questions=6, pool=4, protocols=["linkage-prob", "relevance-prob", "rubric-prob"])
    kwargs["pool_size"] = kwargs.pop("pool")
    first = run_validity(
        s,
        s,
        records,
        labels,
        out,
        **kwargs,
        ensembles=["linkage-prob+rubric-prob", "linkage-prob*relevance-prob"],
    )
    lines = (out / "judgements.jsonl").read_text().splitlines()
    again = run_validity(s, s, records, labels, out, **kwargs)
    assert (out / "judgements.jsonl").read_text().splitlines() == lines  # nothing re-judged
    assert {r["protocol"] for r in first} == {
        "linkage-prob",
        "relevance-prob",
        "rubric-prob",
        "linkage-prob+rubric-prob",
        "linkage-prob-gated",
    }
    assert {r["protocol"] for r in again} == {"linkage-prob", "relevance-prob", "rubric-prob"}
    # Without the copy probes: their candidates are neither judged nor summarized.
    bare = run_validity(s, s, records, labels, out, **kwargs, copies=probes("none"))
    assert (out / "judgements.jsonl").read_text().splitlines() == lines
    for probe in ("padding", "vouching", "scaffolding"):
        assert all(r[f"n_{probe}"] == 0 and math.isnan(r[f"acc_{probe}"]) for r in bare)
        assert all(r[f"n_{probe}"] > 0 for r in again)
    (row,) = [r for r in first if r["default"]]  # the default protocol on the generator's model
    assert row["protocol"] == "linkage-prob-gated"
    assert row["model"] == "fake:qwen2.5-coder-1.5b-instruct-q4km"
    for key in ("acc_3v0", "acc_3v1", "acc_offtopic", "acc_padding", "acc_vouching", "spearman"):
        assert key in row
    assert (
        row["n"] == 6 and (out / "summary.md").exists() and (out / "quality_by_grade.png").exists()
    )


async def test_the_relevance_gate_sends_off_topic_answers_last() -> None:
    def chooser(req: ChoiceRequest) -> dict[str, float]:
        text = req.messages[-1]["content"]
        if req.choices == ("yes", "no"):  # the gate: only the leaves answer is on topic
            return {"yes": 0.9, "no": 0.1} if "chlorophyll" in text else {"yes": 0.2, "no": 0.8}
        return {"1": 0.7, "2": 0.1, "3": 0.1, "4": 0.1}  # LINKAGE alone: both look best

    engine = FakeEngine(chooser=chooser)
    on, off = await LinkageProbScorer(engine, gated=True).score(
        [item("on", "chlorophyll breaks down"), item("off", "Rome fell to invaders")]
    )
    assert on.rank == 1 and on.relevance == pytest.approx(0.9)
    assert on.dist == pytest.approx([0.63, 0.09, 0.09, 0.09 + 0.1])
    assert off.rank == 4 and off.dist[-1] == pytest.approx(0.2 * 0.1 + 0.8)
    # The stored-parts combination gives the same quality and verdict.
    (j_on, j_off) = await judge(
        "linkage-prob-gated", engine, [item("on", "chlorophyll"), item("off", "Rome")]
    )
    parts = [
        await judge("linkage-prob", engine, [item("off", "Rome")]),
        await judge("relevance-prob", engine, [item("off", "Rome")]),
    ]
    from eval.judging.protocols import gated

    (combined,) = gated(*parts)
    assert combined.quality == pytest.approx(j_off.quality) and combined.worst and j_off.worst
    assert not j_on.worst


def test_a_doubtful_gate_cannot_place_an_answer_first() -> None:
    """The verdict is the mode of the gated distribution: LINKAGE's "first" at 0.5 behind a
    gate at P(relevant) = 0.6 loses to "off-topic or last" (0.4 + 0.6 x 0.2)."""
    from eval.judging.linkage_prob import gate
    from eval.judging.protocols import Judgement, gated

    dist = [0.5, 0.2, 0.1, 0.2]
    assert gate(dist, 0.6)[1] == 4
    assert gate(dist, 0.95)[1] == 1  # a confident gate keeps LINKAGE's verdict
    assert gate([0.0, 1.0, 0.0, 0.0], 0.5)[1] == 2  # an exact tie keeps the better rank
    linkage = Judgement("k", 0.7, worst=False, best=True, dist=dist)
    relevance = Judgement("k", 0.6, worst=False, best=True)
    (doubtful,) = gated([linkage], [relevance])
    assert doubtful.worst and not doubtful.best
    # A stored judgement without its distribution keeps the earlier rule.
    (legacy,) = gated([Judgement("k", 0.7, False, True)], [relevance])
    assert legacy.best and not legacy.worst
