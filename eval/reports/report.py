"""Turn a run directory into the paper's tables and figure, plus what the paper left out.

``report.md`` holds: MRR and MPR per subset and method (the shape of the
paper's Table 3) with bootstrap 95% CIs over all questions; MPR per question
type (Figure 4, also drawn to ``mpr_by_type.png``); the scorer's parse
failures; cost (tokens, time, questions per minute) per method; and
sub-question coverage when the run judged it. ``report.json`` has the same
numbers for machines. Reading never modifies the run, so a report can be
made while the run is still going.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eval.answer_coverage.parse import KINDS
from eval.data.gold import gold_by_question
from eval.data.labels import REPORT_TYPE_ORDER, UNLABELLED, load_labels, type_counts
from eval.data.methods import METHODS
from eval.data.wikinfqa import SUBSETS
from eval.judging.linkage import EMPTY_CANDIDATE
from eval.reports.figures import plot_mpr_by_type
from eval.reports.linkage_metrics import N_BOOT, SEED, Estimate, estimate
from eval.reports.markdown import ALL, est_of, render_markdown
from eval.reports.paired import (
    cites_shown_passage,
    gold_test,
    judge_validity_row,
    paired_scores,
    paired_shares,
    row_scores,
)
from eval.runs.manifest import read_manifest
from eval.runs.runner import ANSWERS, COVERAGE, RUN_LABELS, SCORES
from eval.store import JsonlStore
from typed_rag.config import Settings
from typed_rag.errors import UserError

FIGURE = "mpr_by_type.png"
# A verdict that never parsed is left out of the means and counted in the report ("worst"
# would rank it last instead): an unparsed reply says nothing of the answer.
UNPARSED = "exclude"


@dataclass
class ReportFiles:
    markdown: Path
    json: Path
    figure: Path | None


def _records(path: Path) -> list[dict[str, Any]]:
    return list(JsonlStore(path, readonly=True))


def _order(values: Iterable[str], preferred: Sequence[str]) -> list[str]:
    present = set(values)
    return [v for v in preferred if v in present] + sorted(present - set(preferred))


def _metric(rows: Iterable[dict[str, Any]], which: str, settings: Settings) -> Estimate:
    """MRR or MPR of scored rows (expected values for verdict distributions)."""
    col = 0 if which == "mrr" else 1
    vals = [v[col] for r in rows if (v := row_scores(r, UNPARSED)) is not None]
    return estimate(vals, n_boot=N_BOOT, seed=SEED)


def build_report(run_dir: Path, settings: Settings) -> dict[str, Any]:
    """All numbers of the report as one JSON-able dict."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    answers = _records(run_dir / ANSWERS)
    scores = _records(run_dir / SCORES)
    coverage = _records(run_dir / COVERAGE)
    unparsed = UNPARSED
    methods = _order({r["method"] for r in answers} | {r["method"] for r in scores}, METHODS)
    subsets = _order({r["subset"] for r in scores}, SUBSETS)
    types = _order({r.get("type") or UNLABELLED for r in scores}, REPORT_TYPE_ORDER)

    by_method: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in scores:
        by_method[row["method"]].append(row)

    table: dict[str, dict[str, dict[str, Any]]] = {}
    per_type: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    failures: dict[str, dict[str, Any]] = {}
    for method in methods:
        rows = by_method.get(method, [])
        cells: dict[str, dict[str, Any]] = {}
        for subset in [*subsets, ALL]:
            group = rows if subset == ALL else [r for r in rows if r["subset"] == subset]
            cells[subset] = {
                "mrr": _metric(group, "mrr", settings).to_dict(),
                "mpr": _metric(group, "mpr", settings).to_dict(),
            }
        table[method] = cells
        for t in types:
            group = [r for r in rows if (r.get("type") or UNLABELLED) == t]
            per_type[t][method] = {
                "mrr": _metric(group, "mrr", settings).to_dict(),
                "mpr": _metric(group, "mpr", settings).to_dict(),
            }
        statuses = Counter(r["status"] for r in rows)
        failures[method] = {
            "scored": len(rows),
            "parsed": sum(1 for r in rows if r.get("rank") is not None),
            "never_parsed": sum(1 for r in rows if r.get("rank") is None),
            "empty_candidates": statuses.get(EMPTY_CANDIDATE, 0),
            "resampled": sum(1 for r in rows if int(r.get("attempts", 0)) > 1),
            "mean_attempts": float(np.mean([r.get("attempts", 0) for r in rows])) if rows else 0,
            "statuses": dict(statuses),
        }

    boot = (N_BOOT, SEED)
    retrieving = [m for m in methods if m != "llm"]
    labels_file = run_dir / RUN_LABELS
    return {
        "run_dir": str(run_dir),
        "generator": manifest.get("generator", {}),
        "scorer": manifest.get("scorer", {}),
        "git": manifest.get("git", {}),
        "paper_off_by_one": manifest.get("paper_off_by_one", False),
        "judge": (manifest.get("fingerprint") or {}).get("judge") or {},
        "reference_seed": manifest.get("reference_seed"),
        "unparsed": unparsed,
        "bootstrap": N_BOOT,
        "methods": methods,
        "subsets": subsets,
        "types": types,
        "table": table,
        "per_type": dict(per_type),
        "failures": failures,
        "cost": _cost(answers, scores, coverage, methods),
        "paired": paired_scores(scores, methods, unparsed, *boot),
        "gold": paired_shares(answers, methods, gold_test(_gold(settings, manifest)), *boot),
        "citations": paired_shares(answers, retrieving, cites_shown_passage, *boot),
        "type_counts": type_counts(load_labels(labels_file)) if labels_file.exists() else {},
        "judge_validity": judge_validity_row(manifest),
        "coverage": _coverage(coverage, methods, settings) if coverage else None,
        # a graded file's run names its file (a Wiki-NFQA report stays as it was)
        **({"data": manifest["data"]} if manifest.get("data") else {}),
    }


def _gold(settings: Settings, manifest: dict[str, Any]) -> dict[str, list[str]]:
    """question id -> normalised gold short answers (empty when the data is not there, or
    the run's questions came from a graded file, which has no short answers)."""
    if manifest.get("data"):
        return {}
    try:
        return gold_by_question(settings.eval.data_dir)
    except UserError:
        return {}


def _cost(
    answers: list[dict[str, Any]],
    scores: list[dict[str, Any]],
    coverage: list[dict[str, Any]],
    methods: list[str],
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for method in methods:
        rows = [r for r in answers if r["method"] == method]
        wall = sum(float(r.get("wall_s", 0.0)) for r in rows)
        calls = [c for r in rows for c in (r.get("result") or {}).get("calls", [])]
        srows = [r for r in scores if r["method"] == method]
        out[method] = {
            "questions": len(rows),
            "llm_calls": len(calls),
            "prompt_tokens": sum(int(c.get("prompt_tokens", 0)) for c in calls),
            "completion_tokens": sum(int(c.get("completion_tokens", 0)) for c in calls),
            "answer_wall_s": wall,
            "questions_per_min": (60.0 * len(rows) / wall) if wall > 0 else None,
            "with_fallback": sum(1 for r in rows if (r.get("result") or {}).get("fallbacks")),
            "scorer_prompt_tokens": sum(int(r.get("prompt_tokens", 0)) for r in srows),
            "scorer_completion_tokens": sum(int(r.get("completion_tokens", 0)) for r in srows),
            "scorer_wall_s": sum(float(r.get("wall_s", 0.0)) for r in srows),
            "judge_prompt_tokens": sum(
                int(r.get("prompt_tokens", 0)) for r in coverage if r["method"] == method
            ),
            "judge_completion_tokens": sum(
                int(r.get("completion_tokens", 0)) for r in coverage if r["method"] == method
            ),
        }
    return out


def _coverage(rows: list[dict[str, Any]], methods: list[str], settings: Settings) -> dict[str, Any]:
    def est(values: list[float]) -> dict[str, Any]:
        return estimate(values, N_BOOT, SEED).to_dict()

    out: dict[str, Any] = {}
    for method in methods:
        mine = [r for r in rows if r["method"] == method]
        ok = [r for r in mine if r.get("status") == "ok"]
        kinds = {
            k: est([c[k] for r in ok if (c := r.get("coverage") or {}).get(k) is not None])
            for k in KINDS
        }
        weighted = est([r["weighted"] for r in ok if r.get("weighted") is not None])
        ctx_rows = [r for r in mine if r.get("context_status") is not None]
        context = est(
            [r["context_coverage"] for r in ctx_rows if r.get("context_coverage") is not None]
        )
        # The answer's core coverage on the same questions whose context was judged.
        paired = [
            r["coverage"]["core"]
            for r in ctx_rows
            if r.get("context_coverage") is not None
            and r.get("status") == "ok"
            and (r.get("coverage") or {}).get("core") is not None
        ]
        out[method] = {
            "judged": len(mine),
            "ok": len(ok),
            "failed": Counter(r.get("status") for r in mine if r.get("status") != "ok"),
            "kinds": kinds,
            "weighted": weighted,
            "context": context,
            "answer_core_on_context_questions": est(paired),
            "context_failed": sum(1 for r in ctx_rows if r.get("context_status") != "ok"),
        }
    return out


def write_report(run_dir: Path, settings: Settings, out_dir: Path | None = None) -> ReportFiles:
    """Write report.md, report.json and the per-type PNG (into ``out_dir`` or the run)."""
    run_dir = Path(run_dir)
    out_dir = Path(out_dir or run_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rep = build_report(run_dir, settings)
    figure: Path | None = None
    if rep["methods"] and rep["types"]:
        scorer = rep["scorer"].get("name") or rep["scorer"].get("model")
        mpr = {
            t: {m: est_of(v["mpr"]) for m, v in cells.items() if v.get("mpr")}
            for t, cells in rep["per_type"].items()
        }
        figure = plot_mpr_by_type(
            mpr,  # type: ignore[arg-type]
            rep["types"],
            rep["methods"],
            out_dir / FIGURE,
            title=f"Wiki-NFQA MPR by question type (scorer: {scorer}; bars: 95% CI)",
        )
    md = out_dir / "report.md"
    md.write_text(render_markdown(rep, figure), encoding="utf-8")
    js = out_dir / "report.json"
    js.write_text(json.dumps(_finite(rep), indent=1, default=_jsonable), encoding="utf-8")
    summary = out_dir / "summary.json"
    summary.write_text(json.dumps(_finite(summarize_report(rep)), indent=1), encoding="utf-8")
    return ReportFiles(markdown=md, json=js, figure=figure)


def summarize_report(rep: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers in the shape tools read (``results/wiki-nfqa/summary.json``)."""
    methods = {}
    for m in rep["methods"]:
        cell = rep["table"].get(m, {}).get(ALL, {})
        methods[m] = {
            "n": cell.get("mrr", {}).get("count", 0),
            "mrr": cell.get("mrr", {}).get("mean"),
            "mrr_ci": [cell.get("mrr", {}).get("low"), cell.get("mrr", {}).get("high")],
            "mpr": cell.get("mpr", {}).get("mean"),
            "mpr_ci": [cell.get("mpr", {}).get("low"), cell.get("mpr", {}).get("high")],
            "questions_per_min": rep["cost"].get(m, {}).get("questions_per_min"),
        }
    return {
        **methods,
        "methods": methods,
        "paired": rep["paired"]["rows"],
        "paired_questions": rep["paired"]["questions"],
        "gold": rep["gold"],
        "citations": rep["citations"],
        "generator": rep["generator"],
        "scorer": rep["scorer"],
        "judge_validity": rep["judge_validity"],
        "questions": rep["paired"]["questions"] + rep["paired"]["dropped"],
        "type_counts": rep["type_counts"],
    }


def _finite(value: Any) -> Any:
    """NaN (a mean over no questions) becomes null, so report.json is strict JSON."""
    if isinstance(value, float) and np.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _jsonable(value: Any) -> Any:
    if isinstance(value, Counter):
        return dict(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
