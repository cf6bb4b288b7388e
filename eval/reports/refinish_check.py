"""The paired quality check of a re-finished run's changed answers (``typed-rag eval
refinish-check``).

A finishing change (:mod:`eval.runs.refinish`) is kept only where the answers it changes are
not worse, paired on the same questions, references and judge: LINKAGE MRR over all the
run's questions (an unchanged answer keeps its verdict, so only the changed ones move it)
and over the changed ones alone, the share of answers citing a shown passage, and the share
of their cited sentences the support judge upholds (:mod:`eval.citation_support`), before
and after. Support verdicts are cached per method, so the sentences a change leaves as they
were are judged once.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eval.citation_support import (
    SENTENCES,
    VERDICTS,
    Lookup,
    counts_by_question,
    evaluate_support,
)
from eval.reports.compare import compare_runs
from eval.reports.linkage_metrics import paired_difference
from eval.runs.refinish import REPORT
from eval.runs.runner import ANSWERS
from eval.store import read_jsonl
from typed_rag.engines.base import Engine
from typed_rag.errors import UserError
from typed_rag.finishing.citations import citation_share

Row = Mapping[str, Any]


def _mrr(run_dir: Path, copy_dir: Path, method: str, changed_only: bool, seed: int) -> Any:
    """The copy minus the run, MRR and MPR with 95% intervals, on the typed subset."""
    result = compare_runs(f"{copy_dir}:{method}", f"{run_dir}:{method}", 1000, seed, changed_only)
    row = next(r for r in result["rows"] if r["subset"] == ("all" if changed_only else "typed"))
    return {k: row[k] for k in ("n", "mrr_diff", "mrr_ci", "mpr_diff", "mpr_ci")}


def _support_share(summary: Mapping[str, Any], method: str) -> dict[str, Any]:
    s = summary["methods"][method]
    share = s["share"]
    return {
        "sentences": s["sentences"],
        "supported": s["supported"],
        "share": [share["mean"], share["low"], share["high"]],
    }


def _per_question(out_dir: Path) -> dict[str, float]:
    """Per question, the share of its cited sentences upheld (``support.jsonl``)."""
    counts = counts_by_question(read_jsonl(out_dir / SENTENCES))
    return {q: up / n for q, (up, n) in counts.items()}


async def refinish_check(
    run_dir: Path,
    copy_dir: Path,
    out_dir: Path,
    engine: Engine,
    *,
    model: str,
    lookup: Lookup | None = None,
    seed: int = 42,
) -> dict[str, Any]:
    """The check of ``copy_dir`` (made by ``eval refinish`` from ``run_dir`` and judged)
    against ``run_dir``, per method; support verdicts are kept under ``out_dir/support``."""
    path = copy_dir / REPORT
    if not path.is_file():
        raise UserError(f"{copy_dir} has no {REPORT}: make it with `eval refinish`")
    report = json.loads(path.read_text(encoding="utf-8"))
    before = {(r["method"], r["question_id"]): r for r in read_jsonl(run_dir / ANSWERS)}
    after = {(r["method"], r["question_id"]): r for r in read_jsonl(copy_dir / ANSWERS)}
    out: dict[str, Any] = {"run": str(run_dir), "copy": str(copy_dir), "judge": model}
    for method in report["methods"]:
        keys = [(c["method"], c["question_id"]) for c in report["changed"] if c["method"] == method]
        rows = {"before": [before[k] for k in keys], "after": [after[k] for k in keys]}
        support: dict[str, Any] = {}
        shares: dict[str, dict[str, float]] = {}
        for side in ("before", "after"):
            where = out_dir / "support" / method / side
            where.mkdir(parents=True, exist_ok=True)
            cache = out_dir / "support" / method / "before" / VERDICTS
            if side == "after" and cache.exists() and not (where / VERDICTS).exists():
                shutil.copyfile(cache, where / VERDICTS)  # unchanged sentences: judged once
            summary = await evaluate_support(
                engine, rows[side], where, model=model, methods=[method], lookup=lookup, seed=seed
            )
            support[side] = _support_share(summary, method)
            shares[side] = _per_question(where)
        both = sorted(shares["before"].keys() & shares["after"].keys())
        diff = paired_difference(
            [shares["after"][q] for q in both], [shares["before"][q] for q in both], 1000, seed
        )
        out[method] = {
            "leaking_before": report["before"][method],
            "leaking_after": report["after"][method],
            "changed": len(keys),
            "mrr_all": _mrr(run_dir, copy_dir, method, False, seed),
            "mrr_changed": _mrr(run_dir, copy_dir, method, True, seed),
            "citing_changed": {
                side: {
                    "answers": len(rows[side]),
                    "share": citation_share(r.get("result") for r in rows[side]),
                }
                for side in ("before", "after")
            },
            "supported_changed": {
                **support,
                "paired_per_question": {
                    "n": len(both),
                    "diff": diff.mean,
                    "ci": [diff.low, diff.high],
                },
            },
        }
    return out


def render(check: Mapping[str, Any], methods: Sequence[str]) -> str:
    """One block per method: leaks, MRR, citing and supported shares."""
    lines = []
    for m in methods:
        c = check[m]
        b, a = c["leaking_before"], c["leaking_after"]
        lo, hi = c["mrr_all"]["mrr_ci"]
        clo, chi = c["mrr_changed"]["mrr_ci"]
        cite = c["citing_changed"]
        sup = c["supported_changed"]
        lines += [
            f"{m}: leaking {b['leaking']}/{b['answers']} -> {a['leaking']}/{a['answers']}, "
            f"{c['changed']} answers changed",
            f"  MRR, all {c['mrr_all']['n']}: {c['mrr_all']['mrr_diff']:+.4f} [{lo:+.4f}, {hi:+.4f}]"
            f"; changed {c['mrr_changed']['n']}: {c['mrr_changed']['mrr_diff']:+.4f} "
            f"[{clo:+.4f}, {chi:+.4f}]",
            f"  citing (changed): {cite['before']['share']:.1%} -> {cite['after']['share']:.1%}",
            f"  supported (changed): {sup['before']['share'][0]:.1%} of "
            f"{sup['before']['sentences']} -> {sup['after']['share'][0]:.1%} of "
            f"{sup['after']['sentences']}; paired {sup['paired_per_question']['diff']:+.3f} "
            f"[{sup['paired_per_question']['ci'][0]:+.3f}, {sup['paired_per_question']['ci'][1]:+.3f}]",
        ]
    return "\n".join(lines)
