"""Paired comparisons of methods: the same questions, the per-question difference, its CI.

Two methods are only comparable on the questions where both were scored, and
a difference between their means is only meaningful with an interval over the
per-question differences (a paired bootstrap). Groups are the whole run, the
*typed subset* (questions routed to a typed pipeline, where Typed-RAG and RAG
actually differ), each Wiki-NFQA subset and each question type. Judge-free
signals (an answer contains the source dataset's short answer; an answer
cites a passage it was shown) are paired the same way.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from eval.data.gold import contains_gold
from eval.judging.linkage import max_rank
from eval.judging.linkage_prob import expected_percentile_rank, expected_reciprocal_rank
from eval.reports.linkage_metrics import (
    estimate,
    paired_difference,
    percentile_rank,
    reciprocal_rank,
)
from typed_rag.config import REPO_ROOT
from typed_rag.finishing.citations import check_citations
from typed_rag.types import TYPED_TYPES

PAIRS: tuple[tuple[str, str], ...] = (
    ("typed-rag", "rag"),
    ("typed-rag", "llm"),
    ("rag", "llm"),
    ("typed-rag", "typed-rag@paper"),
    ("typed-rag@paper", "rag"),
)
TYPED = "typed"
ALL = "all"


def row_scores(row: Mapping[str, Any], unparsed: str = "exclude") -> tuple[float, float] | None:
    """(reciprocal rank, percentile rank) of one score row; expected values when it has a
    verdict distribution; None for an unparsed verdict (unless ``unparsed == "worst"``)."""
    n = int(row["n"])
    dist = row.get("dist")
    if dist:
        return expected_reciprocal_rank(dist), expected_percentile_rank(dist, n)
    rank = row.get("rank")
    if rank is None:
        if unparsed != "worst":
            return None
        rank = max_rank(n, bool(row.get("off_by_one")))
    return reciprocal_rank(int(rank)), percentile_rank(int(rank), n)


def groups_of(row: Mapping[str, Any]) -> list[str]:
    """The comparison groups a question belongs to."""
    t = row.get("type") or ""
    out = [ALL, str(row.get("subset", "")), t]
    if t in TYPED_TYPES:
        out.append(TYPED)
    return out


def paired_scores(
    scores: Sequence[Mapping[str, Any]],
    methods: Sequence[str],
    unparsed: str = "exclude",
    n_boot: int = 1000,
    seed: int = 42,
) -> dict[str, Any]:
    """Paired MRR/MPR differences for every pair of ``methods`` present, per group.

    Each pair is compared on the questions where both of its methods' verdicts are
    usable (a method variant still being scored does not shrink the other pairs);
    ``questions`` counts those where every method's is, the others are ``dropped``.
    """
    by_q: dict[str, dict[str, tuple[float, float]]] = defaultdict(dict)
    meta: dict[str, Mapping[str, Any]] = {}
    for row in scores:
        qid = str(row["question_id"])
        meta.setdefault(qid, row)
        val = row_scores(row, unparsed)
        if val is not None and row["method"] in methods:
            by_q[qid][row["method"]] = val
    common = sorted(q for q in meta if all(m in by_q[q] for m in methods))
    rows = []
    for a, b in PAIRS:
        if a in methods and b in methods:
            va = {q: v[a] for q, v in by_q.items() if a in v}
            vb = {q: v[b] for q, v in by_q.items() if b in v}
            rows += pair_rows(a, b, va, vb, meta, n_boot, seed)
    return {"questions": len(common), "dropped": len(meta) - len(common), "rows": rows}


Scores = Mapping[str, tuple[float, float]]  # question id -> (reciprocal rank, percentile rank)


def pair_rows(
    a: str,
    b: str,
    va: Scores,
    vb: Scores,
    meta: Mapping[str, Mapping[str, Any]],
    n_boot: int = 1000,
    seed: int = 42,
) -> list[dict[str, Any]]:
    """``a`` minus ``b`` per group, on the questions both have scores for."""
    members: dict[str, list[str]] = defaultdict(list)
    for q in sorted(set(va) & set(vb)):
        for g in groups_of(meta[q]):
            members[g].append(q)
    rows = []
    for group, qs in members.items():
        mrr = paired_difference([va[q][0] for q in qs], [vb[q][0] for q in qs], n_boot, seed)
        mpr = paired_difference([va[q][1] for q in qs], [vb[q][1] for q in qs], n_boot, seed)
        rows.append(
            {
                "a": a,
                "b": b,
                "subset": group,
                "n": len(qs),
                "mrr_diff": round(mrr.mean, 4),
                "mrr_ci": [round(mrr.low, 4), round(mrr.high, 4)],
                "mpr_diff": round(mpr.mean, 3),
                "mpr_ci": [round(mpr.low, 3), round(mpr.high, 3)],
            }
        )
    return rows


def cites_shown_passage(answer: Mapping[str, Any]) -> bool:
    """Whether the answer cites ``[n]`` for a passage it was shown."""
    shown = {int(p["citation"]) for p in (answer.get("result") or {}).get("passages") or []}
    return bool(check_citations(str(answer.get("answer") or ""), shown).valid)


def paired_shares(
    answers: Sequence[Mapping[str, Any]],
    methods: Sequence[str],
    test: Callable[[Mapping[str, Any]], bool | None],
    n_boot: int = 1000,
    seed: int = 42,
) -> dict[str, Any]:
    """Share of answers passing ``test`` per method and paired differences, on the questions
    every method answered (``test`` returning None leaves a question out)."""
    by_q: dict[str, dict[str, float]] = defaultdict(dict)
    for row in answers:
        verdict = test(row)
        if verdict is not None and row["method"] in methods:
            by_q[str(row["question_id"])][row["method"]] = float(verdict)
    common = sorted(q for q, d in by_q.items() if all(m in d for m in methods))
    share = {m: estimate([by_q[q][m] for q in common], n_boot, seed).to_dict() for m in methods}
    diffs = []
    for a, b in PAIRS:
        if a in methods and b in methods:
            d = paired_difference(
                [by_q[q][a] for q in common], [by_q[q][b] for q in common], n_boot, seed
            )
            diffs.append({"a": a, "b": b, "diff": d.mean, "ci": [d.low, d.high], "n": len(common)})
    return {"n": len(common), "share": share, "paired": diffs}


def gold_test(aliases: Mapping[str, Sequence[str]]) -> Callable[[Mapping[str, Any]], bool | None]:
    """``test`` for :func:`paired_shares`: the answer contains a gold short answer."""

    def test(row: Mapping[str, Any]) -> bool | None:
        gold = aliases.get(str(row["question_id"]))
        return contains_gold(row.get("answer") or "", gold) if gold else None

    return test


# ---------------------------------------------------------------- judge validity and markdown

JUDGE_SUMMARY = REPO_ROOT / "results" / "judge" / "summary.json"


def judge_validity_row(
    manifest: Mapping[str, Any], path: Path = JUDGE_SUMMARY
) -> dict[str, Any] | None:
    """The judge-validity benchmark's row for this run's scorer and protocol, if measured."""
    scorer = manifest.get("scorer") or {}
    protocol = scorer.get("protocol") or "linkage"
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for row in rows if isinstance(rows, list) else []:
        if row.get("protocol") == protocol and row.get("model") == scorer.get("name"):
            return row
    return None


def _ci(lo: float, hi: float, digits: int) -> str:
    return f"[{lo:+.{digits}f}, {hi:+.{digits}f}]"


def diff_cells(row: Mapping[str, Any]) -> str:
    """``MRR diff [CI] | MPR diff [CI]`` of a :func:`pair_rows` row, as report tables show it."""
    return (
        f"{row['mrr_diff']:+.3f} {_ci(*row['mrr_ci'], 3)} | "
        f"{row['mpr_diff']:+.1f} {_ci(*row['mpr_ci'], 1)}"
    )


def render_paired(rep: Mapping[str, Any]) -> list[str]:
    """Markdown: paired differences, judge-free shares, type distribution, judge validity."""
    paired = rep.get("paired") or {}
    out = [
        "## Paired differences (same questions, per-question difference, bootstrap 95% CI)",
        "",
        "Each pair on the questions where both verdicts are usable (its n); "
        f"{paired.get('questions', 0)} question(s) where every method's is, "
        f"{paired.get('dropped', 0)} not. *typed* = questions routed to a typed pipeline "
        "(Reason, Instruction, Debate, Experience, Comparison), where the methods differ.",
        "",
        "| a - b | group | n | MRR diff [95% CI] | MPR diff [95% CI] |",
        "|---|---|---:|---:|---:|",
    ]
    order = {ALL: 0, TYPED: 1}
    for r in sorted(
        paired.get("rows", []),
        key=lambda r: (r["a"], r["b"], order.get(r["subset"], 2), r["subset"]),
    ):
        out.append(f"| {r['a']} - {r['b']} | {r['subset']} | {r['n']} | {diff_cells(r)} |")
    out.append("")
    for key, title in (
        ("gold", "Answers containing the source dataset's short answer (judge-free)"),
        ("citations", "Answers citing a passage they were shown"),
    ):
        block = rep.get(key) or {}
        if not block.get("n"):
            continue
        shares = ", ".join(
            f"{m} {100 * s['mean']:.1f}%" for m, s in block["share"].items() if s.get("count")
        )
        out += [f"**{title}** (n={block['n']}): {shares}.", ""]
        for d in block["paired"]:
            out.append(
                f"- {d['a']} - {d['b']}: {100 * d['diff']:+.1f} points "
                f"{_ci(100 * d['ci'][0], 100 * d['ci'][1], 1)}"
            )
        out.append("")
    counts = rep.get("type_counts") or {}
    if counts:
        out += [
            "**Question types** (classifier argmax over the six non-factoid labels; paper's counts):",
            "",
        ]
        out.append(
            ", ".join(
                f"{t} {c['ours']} ({c['paper'] if c['paper'] is not None else '-'})"
                for t, c in counts.items()
            )
        )
        out.append("")
    v = rep.get("judge_validity")
    if v:
        out += [
            f"**Judge validity** ({v['protocol']}, {v['model']}, n={v['n']} questions): grade 3 "
            f"above grade 0 {100 * v['acc_3v0']:.0f}%, above grade 1 {100 * v['acc_3v1']:.0f}%, "
            f"off-topic answers below every reference {100 * v['acc_offtopic']:.0f}%, "
            f"Spearman {v['spearman']:.2f}.",
            "",
        ]
    else:
        out += [
            "**Judge validity**: this scorer/protocol is not in results/judge/summary.json.",
            "",
        ]
    return out
