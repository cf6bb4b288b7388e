"""CRUX's comparison table across configurations: summary.json, report.md and a bar chart."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from eval.context.analysis import CONTEXT_METRICS  # noqa: E402

SUMMARY = "summary.json"
REPORT = "report.md"
FIGURE = "context_by_config.png"
PLOTTED = ("coverage", "alpha_ndcg", "density", "answer_coverage")
TITLES = {
    "coverage": "coverage",
    "alpha_ndcg": "alpha-nDCG",
    "density": "density",
    "answer_coverage": "answer coverage",
    "hit": "gold hit",
    "ap": "gold AP",
    "ndcg": "gold nDCG",
}


def _cell(est: Mapping[str, Any] | None) -> str:
    if not est:
        return "-"
    return f"{est['mean']:.3f} [{est['low']:.2f}, {est['high']:.2f}]"


def render(summary: Mapping[str, Any]) -> str:
    """The table (configurations x metrics, mean [95% CI]) and the Kendall correlations."""
    keys = (*CONTEXT_METRICS, "answer_coverage")
    lines = [
        f"# CRUX context evaluation ({summary['questions']} questions, judge {summary['judge']})",
        "",
        "| config | n | " + " | ".join(TITLES[k] for k in keys) + " |",
        "|---|---:|" + "---|" * len(keys),
    ]
    for config, row in summary["configs"].items():
        lines.append(f"| {config} | {row['n']} | " + " | ".join(_cell(row[k]) for k in keys) + " |")
    validity = summary.get("judge_validity")
    if validity:
        lines += [
            "",
            f"Judge validity ({validity['n']} questions): the better graded Wiki-NFQA reference "
            "(after the sub-questions' source) answers more answerable sub-questions than a "
            f"grade-0 one in {_cell(validity['better_above_grade0'])} of them (ties half); "
            f"their answer coverage {_cell(validity['better_coverage'])} vs "
            f"{_cell(validity['grade0_coverage'])}.",
        ]
    lines += [
        "",
        "Kendall tau with final-answer coverage (configurations with answers; "
        "(question, configuration) pairs):",
        "",
        "| metric | systems | tau | pairs | tau |",
        "|---|---:|---:|---:|---:|",
    ]
    for key, k in summary["kendall"].items():
        fmt = lambda v: "-" if v is None else f"{v:+.3f}"  # noqa: E731
        lines.append(
            f"| {TITLES[key]} | {k['systems']} | {fmt(k['system_tau'])} | {k['pairs']} | "
            f"{fmt(k['pair_tau'])} |"
        )
    paired = summary.get("paired") or []
    if paired:
        diff_keys = [k for k in keys if any(p.get(k) for p in paired)]
        lines += [
            "",
            "Paired differences (first minus second configuration, per question, bootstrap 95% CI):",
            "",
            "| configurations | " + " | ".join(TITLES[k] for k in diff_keys) + " |",
            "|---|" + "---|" * len(diff_keys),
        ]
        for p in paired:
            cells = " | ".join(_diff_cell(p.get(k)) for k in diff_keys)
            lines.append(f"| {p['a']} - {p['b']} | {cells} |")
    return "\n".join(lines) + "\n"


def _diff_cell(est: Mapping[str, Any] | None) -> str:
    if not est:
        return "-"
    return f"{est['mean']:+.3f} [{est['low']:+.3f}, {est['high']:+.3f}]"


def plot(summary: Mapping[str, Any], path: Path) -> Path:
    configs: Sequence[str] = list(summary["configs"])
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(configs) + 2), 4.0), dpi=120)
    width = 0.8 / len(PLOTTED)
    x = np.arange(len(configs))
    for j, key in enumerate(PLOTTED):
        ests = [summary["configs"][c].get(key) for c in configs]
        means = [e["mean"] if e else np.nan for e in ests]
        err = [
            [max(0.0, e["mean"] - e["low"]) if e else 0.0 for e in ests],
            [max(0.0, e["high"] - e["mean"]) if e else 0.0 for e in ests],
        ]
        ax.bar(x - 0.4 + width * (j + 0.5), means, width, yerr=err, capsize=2, label=TITLES[key])
    ax.set_xticks(x, configs, rotation=15)
    ax.set_ylim(0, 1.05)
    ax.set_title(f"CRUX on Wiki-NFQA ({summary['questions']} questions)")
    ax.legend(fontsize=8, ncols=len(PLOTTED))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write(out_dir: Path, summary: Mapping[str, Any]) -> list[Path]:
    out_dir = Path(out_dir)
    (out_dir / SUMMARY).write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    (out_dir / REPORT).write_text(render(summary), encoding="utf-8")
    return [out_dir / SUMMARY, out_dir / REPORT, plot(summary, out_dir / FIGURE)]
