"""From the graded matrix to CRUX's table: per configuration coverage, alpha-nDCG, density,
final-answer coverage and relevance metrics, and their Kendall correlations."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from eval.context import metrics as m
from eval.context.run import (
    ContextQuestion,
    ContextRun,
    answer_target,
    passage_target,
    pool_of,
    reference_name,
)
from eval.data.gold import contains_gold, gold_aliases
from eval.reports.linkage_metrics import estimate, ordered, paired_difference

CONTEXT_METRICS: tuple[str, ...] = ("coverage", "alpha_ndcg", "density", "hit", "ap", "ndcg")


def tokens(text: str) -> int:
    """Whitespace tokens: density is a ratio to the oracle's count, so the unit cancels."""
    return len(text.split())


@dataclass
class Matrix:
    """One question's graded pool: each passage's grades and the answerable sub-questions."""

    sub_questions: list[str]
    grades: Callable[[str], list[int] | None]  # a target's grade per sub-question, if all graded
    passages: dict[str, dict[str, Any]]  # the pool: passage target -> passage, first seen first
    pool: dict[str, list[int]]  # passage target -> grades, in the same order
    keep: list[int]  # the answerable sub-questions


def matrix_of(run: ContextRun, q: ContextQuestion, threshold: int) -> Matrix | None:
    """``q``'s graded pool; None while its sub-questions or a passage's grades are missing."""
    subs = run.sub_questions_of(q.question_id)
    if not subs:
        return None

    def grades(target: str) -> list[int] | None:
        row = [run.grade_of(q.question_id, target, s) for s in subs]
        return None if any(g is None for g in row) else [int(g) for g in row if g is not None]

    passages = pool_of(q)
    pool = {t: grades(t) for t in passages}
    if any(v is None for v in pool.values()):
        return None
    graded = {t: v or [] for t, v in pool.items()}
    return Matrix(subs, grades, passages, graded, m.answerable(list(graded.values()), threshold))


def question_rows(
    run: ContextRun, q: ContextQuestion, threshold: int = m.THRESHOLD
) -> list[dict[str, Any]]:
    """One row per configuration of ``q``; empty when its sub-questions or grades are missing."""
    mx = matrix_of(run, q, threshold)
    if mx is None:
        return []
    keep, texts = mx.keep, mx.passages
    pool_ids = list(texts)
    pool = list(mx.pool.values())
    oracle = m.required_subset(pool, keep, threshold)
    oracle_tokens = sum(tokens(str(texts[pool_ids[i]].get("text", ""))) for i in oracle)
    aliases = gold_aliases(q.gold) if q.gold else []
    relevant_pool = sum(
        1 for t in pool_ids if aliases and contains_gold(str(texts[t].get("text", "")), aliases)
    )
    rows = []
    for config, passages in q.contexts.items():
        ranked = [mx.pool[passage_target(p)] for p in passages]
        ctx_tokens = sum(tokens(str(p.get("text", ""))) for p in passages)
        answer = mx.grades(answer_target(config)) if config in q.answers else None
        relevant = [
            bool(aliases) and contains_gold(str(p.get("text", "")), aliases) for p in passages
        ]
        row: dict[str, Any] = {
            "question_id": q.question_id,
            "config": config,
            "sub_questions": len(mx.sub_questions),
            "answerable": len(keep),
            "passages": len(passages),
            "coverage": m.coverage(ranked, keep, threshold),
            "alpha_ndcg": m.alpha_ndcg(ranked, pool, keep, None, threshold),
            "density": m.density(ranked, ctx_tokens, keep, oracle_tokens, threshold),
            "answer_coverage": m.coverage([answer], keep, threshold) if answer else None,
        }
        if aliases:
            row.update(m.relevance_metrics(relevant, relevant_pool))
        rows.append(row)
    return rows


def reference_pair(
    run: ContextRun, q: ContextQuestion, threshold: int = m.THRESHOLD
) -> tuple[float, float] | None:
    """Final-answer coverage of ``q``'s better graded reference and of its grade-0 one (the
    answerable sub-questions either answers, as for a configuration's answer); None when
    the question has no such pair, nothing answerable, or a grade is missing."""
    zero = reference_name(0)
    better = next((name for name in q.references if name != zero), None)
    mx = matrix_of(run, q, threshold)
    if mx is None or not mx.keep or better is None or zero not in q.references:
        return None
    a, b = mx.grades(answer_target(better)), mx.grades(answer_target(zero))
    if a is None or b is None:
        return None
    return m.coverage([a], mx.keep, threshold) or 0.0, m.coverage([b], mx.keep, threshold) or 0.0


def judge_validity(
    pairs: Sequence[tuple[float, float]], n_boot: int = 1000, seed: int = 42
) -> dict[str, Any] | None:
    """How often the judge finds more answerable sub-questions answered in the better graded
    reference than in the grade-0 one (ties count half), and each one's mean coverage."""
    if not pairs:
        return None
    above = [ordered(a, b) for a, b in pairs]
    return {
        "n": len(pairs),
        "better_above_grade0": _mean_ci(above, n_boot, seed),
        "better_coverage": _mean_ci([a for a, _ in pairs], n_boot, seed),
        "grade0_coverage": _mean_ci([b for _, b in pairs], n_boot, seed),
    }


def _mean_ci(values: Sequence[float], n_boot: int, seed: int) -> dict[str, Any] | None:
    return estimate(list(values), n_boot, seed).to_dict() if values else None


def summarise(rows: Sequence[dict[str, Any]], n_boot: int = 1000, seed: int = 42) -> dict[str, Any]:
    """Per configuration means with bootstrap CIs, and Kendall's tau between each context
    metric and final-answer coverage: over configurations (the paper's system ranking) and
    over (question, configuration) pairs."""
    by_config: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_config[row["config"]].append(row)
    table = {}
    for config, rs in by_config.items():
        table[config] = {"n": len(rs)}
        for key in (*CONTEXT_METRICS, "answer_coverage"):
            table[config][key] = _mean_ci(
                [r[key] for r in rs if r.get(key) is not None], n_boot, seed
            )
    with_answers = [c for c, t in table.items() if t["answer_coverage"]]
    tau: dict[str, Any] = {}
    for key in CONTEXT_METRICS:
        systems = [c for c in with_answers if table[c][key]]
        pairs = [r for r in rows if r.get(key) is not None and r.get("answer_coverage") is not None]
        tau[key] = {
            "systems": len(systems),
            "system_tau": m.kendall_tau(
                [table[c][key]["mean"] for c in systems],
                [table[c]["answer_coverage"]["mean"] for c in systems],
            )
            if len(systems) >= 3
            else None,
            "pairs": len(pairs),
            "pair_tau": m.kendall_tau(
                [r[key] for r in pairs], [r["answer_coverage"] for r in pairs]
            )
            if len(pairs) >= 3
            else None,
        }
    return {"configs": table, "kendall": tau, "paired": _paired(by_config, n_boot, seed)}


def _paired(
    by_config: dict[str, list[dict[str, Any]]], n_boot: int, seed: int
) -> list[dict[str, Any]]:
    """Every two configurations, each metric's per-question difference (first minus second)
    with a paired bootstrap CI, over the questions where both have the metric: the table's
    marginal intervals overlap even where one configuration wins question by question."""
    by_question = {c: {r["question_id"]: r for r in rs} for c, rs in by_config.items()}
    out = []
    for a, b in combinations(by_question, 2):
        rows_a, rows_b = by_question[a], by_question[b]
        pair: dict[str, Any] = {"a": a, "b": b}
        for key in (*CONTEXT_METRICS, "answer_coverage"):
            both = [
                (rows_a[q][key], rows_b[q][key])
                for q in rows_a
                if q in rows_b and rows_a[q].get(key) is not None and rows_b[q].get(key) is not None
            ]
            pair[key] = (
                paired_difference(
                    [x for x, _ in both], [y for _, y in both], n_boot, seed
                ).to_dict()
                if both
                else None
            )
        out.append(pair)
    return out


async def evaluate(
    run: ContextRun,
    questions: Sequence[ContextQuestion],
    judge_name: str,
    threshold: int = m.THRESHOLD,
    n_boot: int = 1000,
    seed: int = 42,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Judge what is missing, then the summary (the shape of results/context/summary.json)."""
    await run.judge_missing(questions, on_progress)
    rows = [r for q in questions for r in question_rows(run, q, threshold)]
    summary = summarise(rows, n_boot, seed)
    unjudged = [q.question_id for q in questions if not run.sub_questions_of(q.question_id)]
    pairs = [p for q in questions if (p := reference_pair(run, q, threshold)) is not None]
    return {
        "questions": len({r["question_id"] for r in rows}),
        "no_sub_questions": unjudged,
        "judge": judge_name,
        "threshold": threshold,
        **summary,
        "judge_validity": judge_validity(pairs, n_boot, seed),
        "rows": rows,
    }
