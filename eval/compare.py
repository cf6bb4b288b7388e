"""One method in two run directories, paired (``typed-rag eval compare``).

A run directory fixes the generator, the retrieval config and the method options, so
two retrieval configs (or two generators) are two runs. Their answers can still be
compared question by question when the runs share what makes verdicts comparable: the
scorer, the judge protocol, the reference draw and the LINKAGE variant. Then the
per-question difference of one method across the two runs gets a paired bootstrap
interval, per group (all, typed subset, each subset and type), as within a run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval.manifest import filled, fingerprint, read_manifest
from eval.paired import pair_rows, row_scores
from eval.runner import SCORES
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.store import read_jsonl

# Fingerprint entries two runs must share for their verdicts to be compared.
SHARED = ("scorer", "scorer_sampling", "judge", "reference_seed", "paper_off_by_one", "top_k")


def parse_side(text: str) -> tuple[Path, str]:
    """``RUN_DIR:METHOD`` -> (run directory, method)."""
    run, sep, method = text.rpartition(":")
    if not sep or not run or not method:
        raise UserError(f"expected RUN_DIR:METHOD (e.g. results/wiki-nfqa/run:rag), got {text!r}")
    return Path(run), method


def _scores(run: Path, method: str) -> tuple[dict[str, tuple[float, float]], dict[str, Any]]:
    rows = [r for r in read_jsonl(run / SCORES) if r.get("method") == method]
    values, meta = {}, {}
    for row in rows:
        val = row_scores(row)
        if val is not None:
            values[str(row["question_id"])] = val
            meta[str(row["question_id"])] = row
    if not values:
        raise UserError(f"{run / SCORES}: no scored answers of method {method!r}")
    return values, meta


def mismatches(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The shared fingerprint entries on which two run manifests differ."""
    defaults = fingerprint(Settings(), Settings())
    fa, fb = (
        {k: filled(m.get("fingerprint", {}).get(k), defaults.get(k)) for k in SHARED}
        for m in (a, b)
    )
    return [f"{k}: {fa[k]!r} vs {fb[k]!r}" for k in SHARED if fa[k] != fb[k]]


def compare_runs(a: str, b: str, n_boot: int = 1000, seed: int = 42) -> dict[str, Any]:
    """``a`` minus ``b`` (each ``RUN_DIR:METHOD``) on the questions both scored."""
    (run_a, m_a), (run_b, m_b) = parse_side(a), parse_side(b)
    diffs = mismatches(read_manifest(run_a), read_manifest(run_b))
    if diffs:
        raise UserError(f"{run_a} and {run_b} were scored differently: " + "; ".join(diffs))
    va, meta = _scores(run_a, m_a)
    vb, meta_b = _scores(run_b, m_b)
    rows = pair_rows(a, b, va, vb, {**meta_b, **meta}, n_boot, seed)
    only = sorted(set(va) ^ set(vb))
    return {
        "a": a,
        "b": b,
        "questions": len(set(va) & set(vb)),
        "unpaired": len(only),
        "rows": rows,
    }


def format_comparison(result: dict[str, Any]) -> str:
    """A table: one line per group, MRR and MPR differences with their 95% intervals."""
    lines = [
        f"{result['a']} minus {result['b']}: {result['questions']} paired questions"
        f" ({result['unpaired']} scored in one run only)",
        f"{'group':<18} {'n':>4}  {'MRR diff [95% CI]':<28} MPR diff [95% CI]",
    ]
    order = {"all": 0, "typed": 1}
    for r in sorted(result["rows"], key=lambda r: (order.get(r["subset"], 2), r["subset"])):
        lo, hi = r["mrr_ci"]
        plo, phi = r["mpr_ci"]
        lines.append(
            f"{r['subset']:<18} {r['n']:>4}  {r['mrr_diff']:+.3f} [{lo:+.3f}, {hi:+.3f}]"
            f"{'':<6} {r['mpr_diff']:+.1f} [{plo:+.1f}, {phi:+.1f}]"
        )
    return "\n".join(lines)
