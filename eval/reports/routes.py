"""Typed-RAG by the route each question took, and with some routes answered by plain RAG
(``typed-rag eval routes``): the evidence the routing table (docs/method.md) is read from.

A run's groups are its questions' labels; the pipeline that answered is the ``route`` of
typed-rag's answer rows (under ``eval.route=labels-classifier`` a confident FACTOID
prediction takes the factoid route whatever the label). A route sent to plain RAG
(``method.rag_types``) writes RAG's text in typed-rag mode and only adds citations, which
a judge reading without them (``eval.judge_citations=strip``) scores as RAG's answer: so
its typed-rag score is RAG's, and a routing can be read off a run that scored both.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from eval.reports.paired import pair_rows, row_scores
from eval.runs.runner import ANSWERS, SCORES
from eval.store import read_jsonl
from typed_rag.errors import UserError

TYPED_RAG = "typed-rag"


def routes_of(run: Path) -> dict[str, str]:
    """Question id -> the route typed-rag's answer took (its label's, in runs before it)."""
    return {
        str(r["question_id"]): str(r.get("route") or r.get("type"))
        for r in read_jsonl(run / ANSWERS)
        if r.get("method") == TYPED_RAG
    }


def route_rows(
    run: Path, as_rag: Collection[str] = (), n_boot: int = 1000, seed: int = 42
) -> list[dict[str, Any]]:
    """Typed-RAG minus RAG and minus the model alone, overall and per route, with the
    routes in ``as_rag`` scored as RAG's answers."""
    routes = routes_of(run)
    scores: dict[str, dict[str, tuple[float, float]]] = {}
    for row in read_jsonl(run / SCORES):
        val = row_scores(row)
        if val is not None:
            scores.setdefault(str(row["method"]), {})[str(row["question_id"])] = val
    rag = scores.get("rag", {})
    if TYPED_RAG not in scores or not rag:
        raise UserError(f"{run / SCORES}: needs scored typed-rag and rag answers")
    unknown = set(as_rag) - set(routes.values())
    if unknown:
        raise UserError(f"no typed-rag answer took the route(s) {sorted(unknown)}")
    typed = {
        q: rag[q] if routes.get(q) in as_rag else v
        for q, v in scores[TYPED_RAG].items()
        if q in routes and (routes[q] not in as_rag or q in rag)
    }
    meta = {q: {"type": f"route {r}", "subset": ""} for q, r in routes.items()}
    rows = []
    for b in ("rag", "llm"):
        if b in scores:
            rows += [
                r
                for r in pair_rows(TYPED_RAG, b, typed, scores[b], meta, n_boot, seed)
                if r["subset"] not in ("", "typed")
            ]
    return rows


def routes_table(rows: list[dict[str, Any]], as_rag: Collection[str]) -> str:
    """One line per comparison and group."""
    head = f"typed-rag{' with ' + ', '.join(sorted(as_rag)) + ' as RAG' if as_rag else ''}"
    lines = [f"{head}, paired MRR difference [95% CI] (n)"]
    for r in sorted(rows, key=lambda r: (r["b"] != "rag", r["subset"] != "all", r["subset"])):
        lo, hi = r["mrr_ci"]
        lines.append(
            f"minus {r['b']:<4} {r['subset']:<22} {r['mrr_diff']:+.3f} [{lo:+.3f}, {hi:+.3f}]"
            f" ({r['n']})"
        )
    return "\n".join(lines)
