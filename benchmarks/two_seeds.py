"""The headline's paired differences under a second generation seed, and their two-seed mean.

Every method samples at temperature 0.8, so a per-question difference mixes the question
with the draw: the headline's intervals cover the questions, not the draws. A run answering
the same questions with another ``sampling.seed`` (same labels, judge and references) gives
each pair's difference under both seeds and under their mean (each method's two verdicts
averaged per question, then paired), on the questions both runs scored for all of the pair's
methods, overall and per subset; and how far each method's own mean moved between the seeds.
Writes ``<out>/two-seeds.json`` and ``<out>/two-seeds.png`` (each pair per subset, the two
seeds and their mean with their intervals).

    python -m benchmarks.two_seeds results/wiki-nfqa/reranked results/wiki-nfqa/seed43 \\
        --out results/wiki-nfqa/seed43
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eval.figures import plt
from eval.metrics import estimate
from eval.paired import row_scores
from typed_rag.store import read_jsonl

PAIRS = (("typed-rag", "llm"), ("typed-rag", "rag"))
Scores = Mapping[tuple[str, str], float]


def scores(run: Path) -> tuple[dict[tuple[str, str], float], dict[str, str]]:
    """Expected reciprocal rank per (method, question id), and each question's subset."""
    out, subset = {}, {}
    for row in read_jsonl(run / "scores.jsonl"):
        value = row_scores(row)
        if value is not None:
            out[row["method"], row["question_id"]] = value[0]
            subset[row["question_id"]] = row["subset"]
    return out, subset


def _est(diffs: list[float]) -> dict[str, Any]:
    e = estimate(diffs, n_boot=5000, seed=42)
    return {"n": e.count, "diff": e.rounded()}


def pair_rows(a: Scores, b: Scores, subset: Mapping[str, str], x: str, y: str) -> list[dict]:
    """``x`` minus ``y`` under seed a, seed b and their mean, overall and per subset."""
    qs = sorted(q for q in subset if all((m, q) in s for m in (x, y) for s in (a, b)))
    groups = ["all", *sorted({subset[q] for q in qs})] if qs else []
    rows = []
    for group in groups:
        mine = [q for q in qs if group in ("all", subset[q])]
        rows.append(
            {
                "pair": f"{x} - {y}",
                "subset": group,
                "seed_a": _est([a[x, q] - a[y, q] for q in mine]),
                "seed_b": _est([b[x, q] - b[y, q] for q in mine]),
                "mean": _est([(a[x, q] + b[x, q] - a[y, q] - b[y, q]) / 2 for q in mine]),
            }
        )
    return rows


def drift(a: Scores, b: Scores) -> dict[str, dict[str, Any]]:
    """Each method's seed-b minus seed-a score on the questions both scored."""
    methods = sorted({m for m, _ in b})
    return {m: _est([b[m, q] - a[m, q] for mm, q in b if mm == m and (m, q) in a]) for m in methods}


SERIES = (("seed_a", "seed a (the headline)", "#9e9e9e"), ("seed_b", "seed b", "#5b8cc9"),
          ("mean", "mean of the two", "#d9822b"))  # fmt: skip


def plot_pairs(rows: list[dict], path: Path) -> Path:
    """One panel per pair: its difference per subset under each seed and their mean, with
    95% intervals, so a reader sees whether a subset's sign survives a second draw."""
    pairs = sorted({r["pair"] for r in rows})
    fig, axes = plt.subplots(1, max(1, len(pairs)), figsize=(5.5 * max(1, len(pairs)), 4),
                             dpi=110, squeeze=False)  # fmt: skip
    for ax, pair in zip(axes[0], pairs, strict=False):
        mine = [r for r in rows if r["pair"] == pair]
        for j, (key, label, colour) in enumerate(SERIES):
            ys = [i + (j - 1) * 0.25 for i in range(len(mine))]
            est = [r[key]["diff"] for r in mine]
            xs = [e[0] for e in est]
            err = [[e[0] - e[1] for e in est], [e[2] - e[0] for e in est]]
            ax.errorbar(xs, ys, xerr=err, fmt="o", color=colour, label=label, capsize=2)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_yticks(range(len(mine)), [f"{r['subset']} ({r['mean']['n']})" for r in mine])
        ax.invert_yaxis()
        ax.set_xlabel(f"{pair}, MRR difference [95% CI]")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("seed_a", type=Path, help="the headline run (seed 42)")
    parser.add_argument("seed_b", type=Path, help="the same questions under another seed")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    a, _ = scores(args.seed_a)
    b, subset = scores(args.seed_b)
    rows = [row for x, y in PAIRS for row in pair_rows(a, b, subset, x, y)]
    summary = {"seed_a": str(args.seed_a), "seed_b": str(args.seed_b), "pairs": rows,
               "drift": drift(a, b)}  # fmt: skip
    for r in rows:
        cells = "  ".join(
            f"{k} {r[k]['diff'][0]:+.3f} [{r[k]['diff'][1]:+.3f}, {r[k]['diff'][2]:+.3f}]"
            for k in ("seed_a", "seed_b", "mean")
        )
        print(f"{r['pair']:<16} {r['subset']:<16} n={r['mean']['n']:<4} {cells}")
    for m, d in summary["drift"].items():
        print(
            f"drift {m:<10} n={d['n']:<4} {d['diff'][0]:+.3f} [{d['diff'][1]:+.3f}, {d['diff'][2]:+.3f}]"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "two-seeds.json").write_text(json.dumps(summary, indent=1) + "\n")
    if rows:
        print(f"wrote {plot_pairs(rows, args.out / 'two-seeds.png')}")


if __name__ == "__main__":
    main()
