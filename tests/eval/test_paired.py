"""Paired comparisons: the bootstrap interval, groups, dropped questions, judge-free shares."""

from __future__ import annotations

import numpy as np
import pytest

from eval.reports.linkage_metrics import paired_difference
from eval.reports.paired import (
    cites_shown_passage,
    gold_test,
    paired_scores,
    paired_shares,
    row_scores,
)


def test_paired_bootstrap_matches_the_normal_interval_on_synthetic_scores() -> None:
    rng = np.random.default_rng(0)
    base = rng.uniform(0, 1, 2000)  # question difficulty: large, shared by both methods
    diff = rng.normal(0.05, 0.2, 2000)
    est = paired_difference(list(base + diff), list(base), n_boot=2000, seed=1)
    half = 1.96 * diff.std(ddof=1) / np.sqrt(diff.size)
    assert est.mean == pytest.approx(diff.mean(), abs=1e-12)
    assert est.low == pytest.approx(diff.mean() - half, abs=0.003)
    assert est.high == pytest.approx(diff.mean() + half, abs=0.003)
    # Pairing removes the shared difficulty: an unpaired interval would be ~2x wider.
    assert est.high - est.low < 0.03


def test_a_constant_difference_has_a_zero_width_interval() -> None:
    est = paired_difference([0.6, 0.9, 0.3], [0.5, 0.8, 0.2], n_boot=200)
    assert (est.mean, est.low, est.high) == pytest.approx((0.1, 0.1, 0.1))


def test_row_scores_use_the_verdict_distribution_when_present() -> None:
    assert row_scores({"n": 3, "rank": 2}) == pytest.approx((0.5, 100 * (1 - 1 / 3)))
    rr, pr = row_scores({"n": 2, "rank": 1, "dist": [0.5, 0.5, 0.0]})
    assert rr == pytest.approx(0.75) and pr == pytest.approx(75.0)
    assert row_scores({"n": 2, "rank": None}) is None
    assert row_scores({"n": 2, "rank": None}, unparsed="worst") == pytest.approx((1 / 3, 0.0))


def _row(method: str, qid: str, rank: int | None, t: str, subset: str = "nq") -> dict:
    return {"method": method, "question_id": qid, "n": 3, "rank": rank, "type": t, "subset": subset}


def test_paired_scores_keep_only_questions_every_method_scored_and_group_them() -> None:
    scores = [
        _row("typed-rag", "q1", 1, "REASON"),
        _row("rag", "q1", 2, "REASON"),
        _row("typed-rag", "q2", 2, "EVIDENCE-BASED", "squad"),
        _row("rag", "q2", 2, "EVIDENCE-BASED", "squad"),
        _row("typed-rag", "q3", 1, "DEBATE"),
        _row("rag", "q3", None, "DEBATE"),  # never parsed: q3 is dropped for every pair
    ]
    out = paired_scores(scores, ["rag", "typed-rag"], n_boot=50)
    assert out["questions"] == 2 and out["dropped"] == 1
    rows = {r["subset"]: r for r in out["rows"]}
    assert set(rows) == {"all", "typed", "nq", "squad", "REASON", "EVIDENCE-BASED"}
    assert rows["typed"]["n"] == 1 and rows["typed"]["mrr_diff"] == pytest.approx(0.5)
    assert rows["all"]["n"] == 2 and rows["all"]["mrr_diff"] == pytest.approx(0.25)
    assert all(r["a"] == "typed-rag" and r["b"] == "rag" for r in out["rows"])


def test_gold_and_citation_shares_are_paired() -> None:
    answers = [
        {
            "method": "rag",
            "question_id": "q1",
            "answer": "It is honey [1].",
            "result": {"passages": [{"citation": 1}]},
        },
        {
            "method": "typed-rag",
            "question_id": "q1",
            "answer": "A chariot [4].",
            "result": {"passages": [{"citation": 1}]},
        },
        {"method": "rag", "question_id": "q2", "answer": "Dyslexia, mostly.", "result": {}},
        {
            "method": "typed-rag",
            "question_id": "q2",
            "answer": "dyslexia [2]",
            "result": {"passages": [{"citation": 2}]},
        },
    ]
    gold = paired_shares(
        answers, ["rag", "typed-rag"], gold_test({"q1": ["honey"], "q2": ["dyslexia"]}), 50
    )
    assert gold["share"]["rag"]["mean"] == 1.0 and gold["share"]["typed-rag"]["mean"] == 0.5
    assert gold["paired"][0]["diff"] == pytest.approx(-0.5)
    assert [cites_shown_passage(a) for a in answers] == [True, False, False, True]


def test_the_judge_may_change_until_the_first_verdict_is_stored(tmp_path) -> None:
    from eval.runs.manifest import read_manifest, write_manifest
    from eval.settings import load_lab_settings
    from typed_rag.errors import UserError

    run = tmp_path / "run"
    kw = dict(methods=["rag"], subsets=["nq"], question_ids=["q1"], options={})
    first = load_lab_settings(None, **{"eval.judge_protocol": "linkage-prob"})
    gated = load_lab_settings(None, **{"eval.judge_protocol": "linkage-prob-gated"})
    write_manifest(run, first, first, **kw)
    write_manifest(run, gated, gated, **kw)  # answers only so far: allowed
    assert read_manifest(run)["scorer"]["protocol"] == "linkage-prob-gated"
    (run / "scores.jsonl").write_text('{"method": "rag", "question_id": "q1"}\n')
    with pytest.raises(UserError, match="different settings"):
        write_manifest(run, first, first, **kw)
    other_generator = load_lab_settings(None, **{"engine.model": "other"})
    (run / "scores.jsonl").unlink()
    with pytest.raises(UserError, match="different settings"):
        write_manifest(run, other_generator, gated, **kw)  # the generator never may


def test_a_run_made_with_the_merged_perspective_budget_resumes_at_its_value(tmp_path) -> None:
    """``sampling.perspective_max_tokens`` became ``sub_answer_max_tokens``: a run that
    recorded both equal resumes; one with its own perspective budget does not."""
    import json

    from eval.runs.manifest import write_manifest
    from eval.settings import load_lab_settings
    from typed_rag.errors import UserError

    kw = dict(methods=["typed-rag"], subsets=["nq"], question_ids=["q1"], options={})
    settings = load_lab_settings(None)
    for budget, resumes in ((512, True), (192, False)):
        run = tmp_path / str(budget)
        write_manifest(run, settings, settings, **kw)
        manifest = json.loads((run / "run.json").read_text())
        for key in ("generator_sampling", "scorer_sampling"):
            manifest["fingerprint"][key]["perspective_max_tokens"] = budget  # an older run
        (run / "run.json").write_text(json.dumps(manifest))
        if resumes:
            write_manifest(run, settings, settings, **kw)
        else:
            with pytest.raises(UserError, match="perspective_max_tokens"):
                write_manifest(run, settings, settings, **kw)


def test_a_run_cannot_mix_method_profiles(tmp_path) -> None:
    from eval.runs.manifest import write_manifest
    from eval.settings import load_lab_settings
    from typed_rag.errors import UserError

    kw = dict(methods=["typed-rag"], subsets=["nq"], question_ids=["q1"], options={})
    paper = load_lab_settings(None)
    improved = load_lab_settings(None, **{"method.profile": "paper"})
    write_manifest(tmp_path / "run", paper, paper, **kw)
    write_manifest(tmp_path / "run", paper, paper, **kw)
    with pytest.raises(UserError, match="method"):
        write_manifest(tmp_path / "run", improved, improved, **kw)


def test_a_run_cannot_mix_retrieval_configs(tmp_path) -> None:
    import json

    from eval.runs.manifest import write_manifest
    from eval.settings import load_lab_settings
    from typed_rag.errors import UserError

    kw = dict(methods=["rag"], subsets=["nq"], question_ids=["q1"], options={})
    bm25 = load_lab_settings(None, **{"retrieval.rerank_depth": 0})  # the paper's (and older runs')
    reranked = load_lab_settings(None)  # the default: every query reranked
    write_manifest(tmp_path / "run", bm25, bm25, **kw)
    assert "retrieval" not in json.loads((tmp_path / "run" / "run.json").read_text())["fingerprint"]
    with pytest.raises(UserError, match="retrieval.*bm25\\+minilm-rrf@20"):
        write_manifest(tmp_path / "run", reranked, reranked, **kw)
    write_manifest(tmp_path / "other", reranked, reranked, **kw)
    write_manifest(tmp_path / "other", reranked, reranked, **kw)  # the same config resumes
    with pytest.raises(UserError, match="retrieval"):
        write_manifest(tmp_path / "other", bm25, bm25, **kw)
    # typed-rag routed by the classifier is its own run too
    routed = load_lab_settings(None, **{"eval.route": "classifier"})
    write_manifest(tmp_path / "routed", routed, routed, **kw)
    with pytest.raises(UserError, match="route"):
        write_manifest(tmp_path / "routed", load_lab_settings(None), routed, **kw)
    # a run made with the paper's settings records neither; today's defaults must not resume it
    paper = load_lab_settings(None, **{"retrieval.rerank_depth": 0, "method.profile": "paper"})
    write_manifest(tmp_path / "paper", paper, paper, **kw)
    with pytest.raises(UserError, match="method.*retrieval"):
        write_manifest(tmp_path / "paper", load_lab_settings(None), paper, **kw)


def test_settings_added_after_a_run_was_made_do_not_block_resuming_it(tmp_path) -> None:
    import json

    from eval.runs.manifest import write_manifest
    from eval.settings import load_lab_settings
    from typed_rag.errors import UserError

    kw = dict(methods=["rag"], subsets=["nq"], question_ids=["q1"], options={})
    s = load_lab_settings(None)
    write_manifest(tmp_path / "run", s, s, **kw)
    path = tmp_path / "run" / "run.json"
    manifest = json.loads(path.read_text())
    del manifest["fingerprint"]["generator_sampling"]["sub_answer_max_tokens"]  # an older run
    path.write_text(json.dumps(manifest))
    write_manifest(tmp_path / "run", s, s, **kw)  # the new setting at its default: fine
    path.write_text(json.dumps(manifest))
    smaller = load_lab_settings(None, **{"sampling.sub_answer_max_tokens": 192})
    with pytest.raises(UserError, match="sub_answer_max_tokens"):
        write_manifest(tmp_path / "run", smaller, s, **kw)
    # The same for a method option: absent from the run's options means the paper's value.
    fast = load_lab_settings(None, **{"method.cite_min_share": 0.3})
    manifest["fingerprint"]["method"] = fast.method.options().model_dump(mode="json")
    del manifest["fingerprint"]["method"]["cite_min_share"]
    path.write_text(json.dumps(manifest))
    write_manifest(tmp_path / "run", fast, s, **kw)
    path.write_text(json.dumps(manifest))
    stricter = load_lab_settings(None, **{"method.cite_min_share": 0.9})
    with pytest.raises(UserError, match="cite_min_share"):
        write_manifest(tmp_path / "run", stricter, s, **kw)


def test_routes_pair_by_the_route_taken_and_score_a_rag_route_as_rag(tmp_path) -> None:
    import json

    from eval.reports.routes import route_rows
    from typed_rag.errors import UserError

    # q1 labelled DEBATE took the factoid route; q2, q3 took the mediator's (DEBATE) route
    routes = {"q1": "FACTOID", "q2": "DEBATE", "q3": "DEBATE"}
    answers = [
        {"method": "typed-rag", "question_id": q, "type": "DEBATE", "route": r}
        for q, r in routes.items()
    ]
    ranks = {"typed-rag": [1, 3, 4], "rag": [2, 1, 2], "llm": [2, 2, 2]}
    scores = [
        _row(m, f"q{i + 1}", rank, "DEBATE") for m, rs in ranks.items() for i, rank in enumerate(rs)
    ]
    for name, rows in (("answers.jsonl", answers), ("scores.jsonl", scores)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))

    rows = {(r["b"], r["subset"]): r for r in route_rows(tmp_path, n_boot=50)}
    assert rows[("rag", "route FACTOID")]["mrr_diff"] == pytest.approx(0.5)
    assert rows[("rag", "route DEBATE")]["mrr_diff"] == pytest.approx(
        (1 / 3 - 1 + 1 / 4 - 1 / 2) / 2, abs=1e-4
    )
    assert rows[("rag", "route DEBATE")]["n"] == 2 and ("rag", "DEBATE") not in rows

    as_rag = {(r["b"], r["subset"]): r for r in route_rows(tmp_path, ["DEBATE"], n_boot=50)}
    assert as_rag[("rag", "route DEBATE")]["mrr_diff"] == 0.0
    assert as_rag[("llm", "route DEBATE")]["mrr_diff"] == pytest.approx(
        (1 + 1 / 2) / 2 - 1 / 2, abs=1e-4
    )
    assert as_rag[("rag", "all")]["mrr_diff"] == pytest.approx(0.5 / 3, abs=1e-4)
    with pytest.raises(UserError, match="REASON"):
        route_rows(tmp_path, ["REASON"])
