"""``report.md`` beside the coverage ``summary.json``: the per-method table (Metrics #1-#6,
the weighted rating), the pairwise win rates and the judge's validity, so the README's
table regenerates with the command that wrote the summary."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval.reports.markdown import est_of, fmt

KINDS = ("core", "background", "follow_up")


def _est(est: Mapping[str, Any] | None) -> str:
    """A stored estimate as ``mean [low, high]`` at two decimals; ``-`` when there is none."""
    return fmt(est_of(dict(est) if est else None), digits=2, ci=True)


def _metric_rows(metrics: Mapping[str, Any]) -> list[str]:
    rows = []
    for method, by in metrics.items():
        o = by["overall"]
        rates = " | ".join(_est(o["coverage_rate"][k]) for k in KINDS)
        m2 = _est(o["metric2"]["core"]) if o.get("metric2") else "-"
        rows.append(
            f"| {method} | {o['n']} | {rates} | {_est(o['rating'])} | {m2} | "
            f"{_est(o['metric3'])} | {_est(o['metric4'])} | {_est(o['metric5'])} | "
            f"{_est(o['addressing_position']['core'])} | {_est(o['metric6'])} |"
        )
    return rows


def render(summary: Mapping[str, Any]) -> str:
    """The summary as Markdown: what a reader compares across methods, with 95% CIs."""
    lines = [
        f"# Sub-question coverage ({summary['questions']} questions, judge "
        f"{summary['judge_model']}, covered when P(yes) > {summary['threshold']})",
        "",
        "Coverage rates per sub-question kind (Metric #1 over each kind's sub-questions), the "
        "weighted rating (core 1, background 0.5, follow-up -1), Metric #2 (core coverage per "
        "retrieved chunk), #3 (core knowledge in the chunks), #4 (core gain available from "
        "retrieval), #5 (chunk share of covered minus missed core), core addressing position and "
        "#6 (follow-up position minus core/background).",
        "",
        "| method | n | core | background | follow-up | rating | #2 core | #3 | #4 | #5 | "
        "core position | #6 |",
        "|---|---:|" + "---|" * 10,
        *_metric_rows(summary["metrics"]),
    ]
    wins = summary.get("win_rates", {}).get("overall") or []
    if wins:
        lines += [
            "",
            "Pairwise, by weighted rating per question (the difference a - b with a paired "
            "bootstrap interval):",
            "",
            "| a vs b | n | a wins | b wins | ties | rating a - b |",
            "|---|---:|---:|---:|---:|---|",
        ]
        lines += [
            f"| {w['a']} vs {w['b']} | {w['n']} | {w['wins']} | {w['losses']} | {w['ties']} | "
            f"{_est(w.get('rating_difference'))} |"
            for w in wins
        ]
    validity = summary.get("judge_validity")
    if validity:
        lines += [
            "",
            f"Judge validity ({validity['n']} questions): the grade-3 reference covers more core "
            f"sub-questions than the grade-0 one {_est(validity['grade3_above_grade0'])} of the "
            f"time (ties half); core coverage of grade-3 {_est(validity['grade3_core_coverage'])}, "
            f"of grade-0 {_est(validity['grade0_core_coverage'])}.",
            "",
            "The same ordering rate at other thresholds on P(yes): "
            + ", ".join(f"{t}: {v:.2f}" for t, v in validity["by_threshold"].items())
            + ".",
        ]
    return "\n".join(lines) + "\n"
