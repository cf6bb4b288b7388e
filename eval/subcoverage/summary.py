"""The coverage report: Metrics #1-#6, scenarios and ratings per method and question type,
and the pairwise win rates by rating; plain JSON (no NaN) for results/coverage/summary.json."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from eval.reports.linkage_metrics import Estimate, estimate, ordered
from eval.subcoverage import metrics as m
from eval.subcoverage.decompose import KINDS
from eval.subcoverage.inputs import REFERENCE, AnswerItem
from eval.subcoverage.judge import addressing_position
from eval.subcoverage.metrics import AnswerCells
from eval.subcoverage.run import SubCoverageRun


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """NaN -> None: the summary is strict JSON."""
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}


def _est(value: Estimate | None) -> dict[str, Any] | None:
    return None if value is None or math.isnan(value.mean) else _plain(value.to_dict())


def metrics_block(
    cells: Sequence[AnswerCells], retrieves: bool, n_boot: int = 1000, seed: int = 42
) -> dict[str, Any]:
    """Every metric over a group of answers. Pooled metrics (the paper's) carry a cluster
    bootstrap interval; per-answer means (coverage rates c_type, rating) a plain one.
    Retrieval metrics (#2-#5, scenarios) are None for a method that retrieves nothing."""
    rows = [m.counts(c) for c in cells]

    def boot(stat: m.Stat) -> dict[str, Any] | None:
        return _est(m.cluster_bootstrap(rows, stat, n_boot, seed))

    rates = [m.coverage_rates(c) for c in cells]
    block: dict[str, Any] = {
        "n": len(rows),
        "sub_questions": {k: int(sum(r[f"n_{k}"] for r in rows)) for k in KINDS},
        "retrieval": retrieves,
        "metric1": {k: boot(m.metric1(k)) for k in KINDS},
        "coverage_rate": {
            k: _est(estimate([r[k] for r in rates if r[k] is not None], n_boot, seed))
            for k in KINDS
        },
        "rating": _est(estimate([m.rating(r) for r in rates], n_boot, seed)),
        "addressing_position": {k: boot(m.position(k)) for k in KINDS},
        "metric6": boot(m.metric6),
        "scenarios": None,
        "metric2": None,
        "metric3": None,
        "metric4": None,
        "metric5": None,
        "p_covered": None,
        "p_not_covered": None,
    }
    if retrieves:
        block["scenarios"] = {k: {s: boot(m.scenario(k, s)) for s in m.SCENARIOS} for k in KINDS}
        block["metric2"] = {k: boot(m.metric2(k)) for k in KINDS}
        block["metric3"] = boot(m.metric3)
        block["metric4"] = boot(m.metric4)
        block["metric5"] = boot(m.metric5)
        block["p_covered"] = boot(m.p_covered)
        block["p_not_covered"] = boot(m.p_not_covered)
    return block


def _win_rates(
    ratings: dict[str, dict[str, float]], n_boot: int = 1000, seed: int = 42
) -> list[dict[str, Any]]:
    """Each pair's win counts, and its mean rating difference a - b over the questions
    both answered with a paired bootstrap interval."""
    return [
        _plain(w.to_dict()) | {"rating_difference": _est(estimate(w.diffs, n_boot, seed))}
        for w in m.win_rates(ratings)
    ]


def summarise(
    items: Sequence[AnswerItem],
    run: SubCoverageRun,
    judge_model: str,
    n_boot: int = 1000,
    seed: int = 42,
) -> dict[str, Any]:
    """The whole report from what ``run`` has on disk; answers not fully judged are counted
    as pending and left out."""
    methods = list(dict.fromkeys(it.method for it in items))
    judged: dict[str, list[tuple[AnswerItem, AnswerCells]]] = defaultdict(list)
    pending = 0
    for it in items:
        cells = run.cells(it)
        if cells is None:
            pending += 1
        else:
            judged[it.method].append((it, cells))
    retrieves = {
        meth: any(it.chunks or it.missing_texts for it in items if it.method == meth)
        for meth in methods
    }
    per_method: dict[str, Any] = {}
    ratings: dict[str, dict[str, float]] = {}
    type_ratings: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    for meth in methods:
        pairs = judged.get(meth, [])
        by_type: dict[str, list[AnswerCells]] = defaultdict(list)
        for it, cells in pairs:
            by_type[it.type].append(cells)
        per_method[meth] = {
            "overall": metrics_block([c for _, c in pairs], retrieves[meth], n_boot, seed),
            "by_type": {
                t: metrics_block(cs, retrieves[meth], n_boot, seed)
                for t, cs in sorted(by_type.items())
            },
        }
        ratings[meth] = {it.question_id: m.rating(m.coverage_rates(c)) for it, c in pairs}
        for it, _ in pairs:
            rated = ratings[meth][it.question_id]
            type_ratings[it.type].setdefault(meth, {})[it.question_id] = rated
    return {
        "judge_model": judge_model,
        "threshold": run.threshold,
        "weights": dict(m.WEIGHTS),
        "questions": len({it.question_id for pairs in judged.values() for it, _ in pairs}),
        "methods": methods,
        "decomposition": _decomposition_stats(items, run),
        "judgements": _judgement_stats(items, run, pending),
        "metrics": per_method,
        "win_rates": {
            "overall": _win_rates(ratings, n_boot, seed),
            "by_type": {t: _win_rates(r, n_boot, seed) for t, r in sorted(type_ratings.items())},
        },
    }


# Thresholds on P(yes) at which the judge-validity curve is reported.
CURVE = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)

# One question's core sub-questions as P(yes) in its grade-3 and its grade-0 reference.
GradedPair = tuple[Sequence[float], Sequence[float]]


def reference_pairs(references: Sequence[AnswerItem], run: SubCoverageRun) -> list[GradedPair]:
    """Per question with both references judged and core sub-questions: the judge's
    P(yes) for each core sub-question in the grade-3 reference and in the grade-0 one."""
    core: dict[str, dict[int, list[float]]] = defaultdict(dict)
    for it in references:
        subs = [sq for sq in run.decomposition_of(it.question_id) or [] if sq.kind == "core"]
        ps = [run.p_yes(it.question_id, it.answer_target, sq.text) for sq in subs]
        if subs and all(p is not None for p in ps):
            grade = int(it.method.removeprefix(f"{REFERENCE}:"))
            core[it.question_id][grade] = [float(p) for p in ps if p is not None]
    return [(g[3], g[0]) for g in core.values() if 3 in g and 0 in g]


def _ordered(pairs: Sequence[GradedPair], threshold: float) -> tuple[list[float], ...]:
    """Per pair: 1 if grade 3 has the higher core coverage at ``threshold``, 0.5 if tied,
    else 0; and the two coverages."""
    above, cov3, cov0 = [], [], []
    for p3, p0 in pairs:
        a = sum(p > threshold for p in p3) / len(p3)
        b = sum(p > threshold for p in p0) / len(p0)
        above.append(ordered(a, b))
        cov3.append(a)
        cov0.append(b)
    return above, cov3, cov0


def judge_validity(
    pairs: Sequence[GradedPair], threshold: float, n_boot: int = 1000, seed: int = 42
) -> dict[str, Any] | None:
    """How often the judge finds more core sub-questions covered in a question's grade-3
    reference than in its grade-0 one (ties count half), with each grade's mean core
    coverage, at ``threshold``; and the same ordering rate at each threshold of
    :data:`CURVE`, which is what the threshold is calibrated on."""
    if not pairs:
        return None
    above, cov3, cov0 = _ordered(pairs, threshold)
    return {
        "n": len(pairs),
        "threshold": threshold,
        "grade3_above_grade0": _est(estimate(above, n_boot, seed)),
        "grade3_core_coverage": _est(estimate(cov3, n_boot, seed)),
        "grade0_core_coverage": _est(estimate(cov0, n_boot, seed)),
        "by_threshold": {f"{t:.2f}": sum(_ordered(pairs, t)[0]) / len(pairs) for t in CURVE},
    }


def _decomposition_stats(items: Sequence[AnswerItem], run: SubCoverageRun) -> dict[str, Any]:
    qids = sorted({it.question_id for it in items})
    failures: Counter[str] = Counter()
    per_kind: Counter[str] = Counter()
    ok = 0
    for q in qids:
        subs = run.decomposition_of(q)
        if subs is not None:
            ok += 1
            per_kind.update(s.kind for s in subs)
            continue
        listed, labelled = run.subquestions.get(q), run.labels.get(q)
        if listed and listed.get("status") != "ok":
            failures[f"list:{listed['status']}"] += 1
        elif labelled and labelled.get("status") != "ok":
            failures[f"classify:{labelled['status']}"] += 1
        else:
            failures["not-run"] += 1
    return {
        "questions": len(qids),
        "ok": ok,
        "failed": dict(failures),
        "mean_per_question": {k: (per_kind[k] / ok if ok else None) for k in KINDS},
    }


def _judgement_stats(
    items: Sequence[AnswerItem], run: SubCoverageRun, pending: int
) -> dict[str, int]:
    """Counts of what the report rests on; the cache may hold more questions (a run grown
    past ``--limit``), so verdicts and fragments are counted for these questions only."""
    qids = {it.question_id for it in items}
    covered_cells = located = failed = 0
    for it in items:
        if not it.answer.strip():
            continue
        for sq in run.decomposition_of(it.question_id) or []:
            if run.covered(it.question_id, it.answer_target, sq.text):
                covered_cells += 1
                row = run.fragments.get(f"{it.question_id}\t{it.answer_target}\t{sq.text}")
                frag = run.fragment(it.question_id, it.answer_target, sq.text)
                if row is not None and row.get("status") != "ok":
                    failed += 1
                elif frag and addressing_position(it.answer, frag) is not None:
                    located += 1
    return {
        "verdicts": sum(str(v["question_id"]) in qids for v in run.verdicts),
        "fragments": sum(str(f["question_id"]) in qids for f in run.fragments),
        "covered_answer_cells": covered_cells,
        "positions_located": located,
        "fragment_failures": failed,
        "answers_pending": pending,
        "chunks_without_text": sum(it.missing_texts for it in items),
    }
