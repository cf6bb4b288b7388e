"""Calibrate the coverage judge's threshold on P(yes) against Wiki-NFQA's graded answers.

``eval coverage`` counts a sub-question as covered when the judge's P(yes) is above
``eval.coverage_threshold``. The check of a coverage judge is that a question's grade-3
reference covers more of its core sub-questions than its grade-0 one. This script reads
an ``eval coverage`` folder (the verdicts of the references are already there, so it calls
no model), splits its questions into the first ``--dev`` (in the order they were
decomposed, the run's order: what the threshold may be chosen on) and the rest (held
out), and reports that ordering rate at each threshold on both parts.

    python -m benchmarks.coverage_threshold results/coverage --dev 30 \\
        --out results/coverage/threshold.json
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from eval.subcoverage.inputs import REFERENCE
from eval.subcoverage.run import LABELS, SUBQUESTIONS, VERDICTS, cell_key
from eval.subcoverage.summary import CURVE, GradedPair, judge_validity
from typed_rag.store import JsonlStore


def graded_pairs(folder: Path) -> tuple[list[str], dict[str, GradedPair]]:
    """The folder's question ids in decomposition order, and per question the core
    sub-questions' P(yes) in its grade-3 and grade-0 references."""
    listed = list(JsonlStore(folder / SUBQUESTIONS, key=lambda r: str(r["question_id"])))
    labels = JsonlStore(folder / LABELS, key=lambda r: str(r["question_id"]))
    core: dict[str, set[str]] = {}
    for row in listed:
        label = labels.get(str(row["question_id"]))
        if row.get("status") == "ok" and label and label.get("status") == "ok":
            kinds = zip(row["sub_questions"], label["kinds"], strict=True)
            core[str(row["question_id"])] = {sq for sq, kind in kinds if kind == "core"}
    found: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    prefix = f"answer:{REFERENCE}:"
    for v in JsonlStore(folder / VERDICTS, key=cell_key):
        qid, target = str(v["question_id"]), str(v["target"])
        if target.startswith(prefix) and v["sub_question"] in core.get(qid, ()):
            found[qid][int(target[len(prefix) :].split(":", 1)[0])].append(float(v["p_yes"]))
    pairs = {
        q: (g[3], g[0])
        for q, g in found.items()
        if len(g[3]) == len(g[0]) == len(core[q]) and core[q]
    }
    return [str(r["question_id"]) for r in listed], pairs


def calibrate(folder: Path, dev: int, n_boot: int = 1000, seed: int = 42) -> dict[str, Any]:
    order, pairs = graded_pairs(folder)
    parts = {"dev": order[:dev], "held_out": order[dev:]}
    out: dict[str, Any] = {"folder": str(folder), "dev_questions": dev, "parts": {}}
    for name, qids in parts.items():
        chosen = [pairs[q] for q in qids if q in pairs]
        out["parts"][name] = {
            f"{t:.2f}": judge_validity(chosen, t, n_boot, seed) if chosen else None for t in CURVE
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path, help="an `eval coverage` output folder")
    p.add_argument("--dev", type=int, default=30, help="the first N questions choose the threshold")
    p.add_argument("--out", type=Path, help="write the result as JSON here")
    args = p.parse_args()
    result = calibrate(args.folder, args.dev)
    print(f"{'threshold':>9} | " + " | ".join(f"{n:>22}" for n in result["parts"]))
    for t in (f"{t:.2f}" for t in CURVE):
        cells = []
        for part in result["parts"].values():
            v = part[t]
            est = v["grade3_above_grade0"] if v else None
            cells.append(
                f"{est['mean']:.2f} [{est['low']:.2f}, {est['high']:.2f}] n={v['n']:>3}"
                if est and v
                else "-"
            )
        print(f"{t:>9} | " + " | ".join(f"{c:>22}" for c in cells))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
