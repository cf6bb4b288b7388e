"""Merge classifier_bench.py outputs into results/classifier/summary.json (before / after).

    python benchmarks/classifier_summary.py \
        --bench results/classifier/bench-head.json results/classifier/bench-lexical.json \
        --before head --after head+lex --others lex ens-head-lex \
        --speed results/classifier/speed.json \
        --train-before ~/.cache/typed-rag/classifier/metrics.json \
        --train-after EXP/classifier/metrics.json \
        --out results/classifier/summary.json

Prints the README table (per-class F1 on valid and by cross-validation).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from typed_rag.types import LABELS


def _recipes(paths: list[Path]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in paths:
        out.update(json.loads(p.read_text())["recipes"])
    return out


def _entry(recipe: dict[str, Any], train: dict[str, Any] | None, speed: dict[str, Any] | None):
    cv = recipe.get("cv")
    e: dict[str, Any] = {
        "valid": {
            "macro_f1": recipe["valid"]["macro_f1"],
            "accuracy": recipe["valid"]["accuracy"],
            "f1": recipe["valid"]["f1"],
            "ece_calibrated_on_valid": recipe["valid"]["ece_calibrated_on_valid"],
        },
    }
    if cv:
        e["cv"] = {
            "k": cv["k"],
            "n": cv["n"],
            "macro_f1": cv["macro_f1"],
            "macro_f1_ci95": cv["ci95"]["macro_f1"],
            "accuracy": cv["accuracy"],
            "f1": cv["f1"],
            "f1_ci95": cv["ci95"]["f1"],
            "fold_macro_f1": cv["fold_macro_f1"],
            "ece": cv["ece"],
        }
    if train:
        t = train["timings_s"]
        e["train"] = {"seconds": sum(t.values()), "timings_s": t}
    if speed:
        e["speed"] = speed
    return e


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bench", type=Path, nargs="+", required=True)
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p.add_argument("--others", nargs="*", default=[])
    p.add_argument("--speed", type=Path)
    p.add_argument("--speed-before", default="embedding-head-before")
    p.add_argument("--speed-after", default="embedding-head-after")
    p.add_argument("--train-before", type=Path)
    p.add_argument("--train-after", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--notes", default="")
    a = p.parse_args()
    recipes = _recipes(a.bench)
    speed = json.loads(a.speed.read_text())["recipes"] if a.speed else {}

    def load(path: Path | None) -> dict[str, Any] | None:
        return json.loads(path.expanduser().read_text()) if path else None

    summary = {
        "before": {"recipe": a.before}
        | _entry(recipes[a.before], load(a.train_before), speed.get(a.speed_before)),
        "after": {"recipe": a.after}
        | _entry(recipes[a.after], load(a.train_after), speed.get(a.speed_after)),
        "others": {name: _entry(recipes[name], None, None) for name in a.others},
        "notes": a.notes,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(summary, indent=2) + "\n")
    b, f = summary["before"], summary["after"]
    print("| label | valid F1 before | valid F1 after | CV F1 before | CV F1 after |")
    print("|---|---:|---:|---:|---:|")
    for t in LABELS:
        k = t.value
        cvb = b.get("cv", {}).get("f1", {}).get(k, float("nan"))
        cva = f.get("cv", {}).get("f1", {}).get(k, float("nan"))
        print(
            f"| {k} | {b['valid']['f1'][k]:.3f} | {f['valid']['f1'][k]:.3f} | {cvb:.3f} | {cva:.3f} |"
        )
    for name, e in (("before", b), ("after", f)):
        cv = e.get("cv")
        ci = f" CI {cv['macro_f1_ci95'][0]:.3f}-{cv['macro_f1_ci95'][1]:.3f}" if cv else ""
        cvs = f"CV macro-F1 {cv['macro_f1']:.3f}{ci}, ECE {cv['ece']:.3f}" if cv else "no CV"
        print(f"{name}: valid macro-F1 {e['valid']['macro_f1']:.3f}; {cvs}")


if __name__ == "__main__":
    main()
