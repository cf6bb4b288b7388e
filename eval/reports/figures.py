"""The per-type MPR bar chart, in the shape of the paper's Figure 4 (types grouped, methods as bars)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: no display on servers or in CI

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from eval.reports.linkage_metrics import Estimate  # noqa: E402

METHOD_TITLES = {
    "llm": "LLM",
    "rag": "RAG",
    "typed-rag": "Typed-RAG",
    "typed-rag@improved": "Typed-RAG (improved)",
    "typed-rag@paper": "Typed-RAG (paper)",
    "typed-rag@fast": "Typed-RAG (fast)",
}
METHOD_COLOURS = {
    "llm": "#9e9e9e",
    "rag": "#5b8cc9",
    "typed-rag": "#d9822b",
    "typed-rag@improved": "#8e44ad",
    "typed-rag@paper": "#b5651d",
    "typed-rag@fast": "#2e8b57",
}


def type_title(value: str) -> str:
    return value.replace("-", " ").title().replace(" ", "-") if value else value


def plot_mpr_by_type(
    mpr: Mapping[str, Mapping[str, Estimate]],
    types: Sequence[str],
    methods: Sequence[str],
    path: Path,
    title: str,
) -> Path:
    """``mpr[type][method]`` -> grouped bars with 95% CI whiskers; writes ``path`` (PNG)."""
    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(types) + 2), 4.2), dpi=120)
    width = 0.8 / max(1, len(methods))
    x = np.arange(len(types))
    for j, method in enumerate(methods):
        means, lows, highs = [], [], []
        for t in types:
            est = mpr.get(t, {}).get(method)
            if est is None or est.count == 0:
                means.append(np.nan)
                lows.append(0.0)
                highs.append(0.0)
                continue
            means.append(est.mean)
            lows.append(max(0.0, est.mean - est.low))
            highs.append(max(0.0, est.high - est.mean))
        offs = x - 0.4 + width * (j + 0.5)
        bars = ax.bar(
            offs,
            means,
            width,
            yerr=[lows, highs],
            capsize=3,
            label=METHOD_TITLES.get(method, method),
            color=METHOD_COLOURS.get(method),
            error_kw={"elinewidth": 0.8, "ecolor": "#333333"},
        )
        for rect, m in zip(bars, means, strict=True):
            if not np.isnan(m):
                ax.annotate(
                    f"{m:.1f}",
                    (rect.get_x() + rect.get_width() / 2, 1.5),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    color="white" if m > 12 else "black",
                )
    counts = []
    for t in types:
        n = max((e.count for e in mpr.get(t, {}).values()), default=0)
        counts.append(f"{type_title(t)}\n(n={n})")
    ax.set_xticks(x, counts, fontsize=8)
    ax.set_ylabel("MPR (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title, fontsize=9, pad=24)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.legend(
        fontsize=8,
        ncols=max(1, len(methods)),
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        frameon=False,
    )
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
