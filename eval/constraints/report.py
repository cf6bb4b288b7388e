"""The report: compliance rates per arm, paired differences, detection, cost.

Per arm: include-covered rate, exclude-avoided rate, the share of answers
that satisfy every constraint ("both ok"), each with a bootstrap 95% CI, the
paired differences between every two arms, how often the feature detected the set's
constraints, and latency and tokens per answer; where the run ranked its
answers with LINKAGE, MRR/MPR per arm and their paired differences. Written as
report.md and report.json; reading never changes the run.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eval.constraints.runner import (
    ANSWERS,
    ARMS,
    ERRORS,
    JUDGEMENTS,
    LINKAGE,
    SET_COPY,
    arm_question_key,
)
from eval.constraints.topics import topics_overlap
from eval.data.labels import REPORT_TYPE_ORDER, UNLABELLED
from eval.reports.linkage_metrics import N_BOOT, SEED, estimate
from eval.reports.paired import ALL, diff_cells, pair_rows, row_scores
from eval.store import JsonlStore, read_jsonl
from typed_rag.config import Settings
from typed_rag.constraints import mentions
from typed_rag.errors import UserError

REPORT_MD = "report.md"
REPORT_JSON = "report.json"

METRICS: tuple[str, ...] = ("include_covered", "exclude_avoided", "both_ok")
METRIC_TITLES: dict[str, str] = {
    "include_covered": "include covered",
    "exclude_avoided": "exclude avoided",
    "both_ok": "both ok",
}


def detection_match(
    constraints: Mapping[str, Any] | None, include: Sequence[str], exclude: Sequence[str]
) -> dict[str, bool]:
    """Did the feature find the set's constraints? Topic-level overlap of each side."""
    if not constraints:
        return {"any": False, "include": False, "exclude": False, "both": False}
    got_inc = [str(x) for x in constraints.get("include") or []]
    got_exc = [str(x) for x in constraints.get("exclude") or []]
    inc = all(any(topics_overlap(t, g) for g in got_inc) for t in include)
    exc = all(any(topics_overlap(t, g) for g in got_exc) for t in exclude)
    return {"any": bool(got_inc or got_exc), "include": inc, "exclude": exc, "both": inc and exc}


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def lexical_compliance(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """A judge-free cross-check: the share of include and of exclude topics an answer names.

    "Names" is :func:`typed_rag.constraints.mentions` (content words), the same
    test the feature enforces plans with; a lenient judge cannot hide a change here.
    """

    def share(key: str) -> float | None:
        hits = [
            float(mentions(str(r.get("answer") or ""), t)) for r in rows for t in r.get(key) or []
        ]
        return _mean(hits)

    return {"include_named": share("include"), "exclude_named": share("exclude")}


def build_constraints_report(run_dir: Path, settings: Settings) -> dict[str, Any]:
    """Every number of the report as one JSON-able dict; reading never changes the run."""
    run_dir = Path(run_dir)
    answers = list(JsonlStore(run_dir / ANSWERS, key=arm_question_key, readonly=True))
    judgements = list(JsonlStore(run_dir / JUDGEMENTS, key=arm_question_key, readonly=True))
    set_items = read_jsonl(run_dir / SET_COPY)
    errors = read_jsonl(run_dir / ERRORS)
    manifest: dict[str, Any] = {}
    if (run_dir / "run.json").is_file():
        manifest = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    present = {r["arm"] for r in answers} | {r["arm"] for r in judgements}
    arms = [a for a in ARMS if a in present]
    n_boot, seed = N_BOOT, SEED

    ok_by_arm: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in judgements:
        if row.get("covered") is not None and row.get("discussed") is not None:
            ok_by_arm[row["arm"]][row["question_id"]] = row

    per_arm: dict[str, Any] = {}
    for arm in arms:
        arm_answers = [r for r in answers if r["arm"] == arm]
        arm_judged = [r for r in judgements if r["arm"] == arm]
        usable = list(ok_by_arm[arm].values())
        cell: dict[str, Any] = {
            "answers": len(arm_answers),
            "judged": len(usable),
            "judge_status": dict(Counter(r["status"] for r in arm_judged)),
            "unparsed": sum(1 for r in arm_judged if r.get("covered") is None),
            # questions that failed and were never answered later (a resumed run may retry)
            "answer_errors": len(
                {e["question_id"] for e in errors if e.get("method") == arm}
                - {r["question_id"] for r in arm_answers}
            ),
        }
        for m in METRICS:
            cell[m] = estimate([float(r[m]) for r in usable], n_boot=n_boot, seed=seed).to_dict()
        det = [
            detection_match(r.get("constraints"), r.get("include") or [], r.get("exclude") or [])
            for r in arm_answers
        ]
        cell["detector_ran"] = _mean([float(r.get("constraints") is not None) for r in arm_answers])
        cell["detected_any"] = _mean([float(d["any"]) for d in det])
        cell["detected_match"] = _mean([float(d["both"]) for d in det])
        cell["detected_include"] = _mean([float(d["include"]) for d in det])
        cell["detected_exclude"] = _mean([float(d["exclude"]) for d in det])
        cell["mean_latency_s"] = _mean([float(r.get("latency_s", 0.0)) for r in arm_answers])
        cell["mean_wall_s"] = _mean([float(r.get("wall_s", 0.0)) for r in arm_answers])
        cell["mean_tokens"] = _mean([float(r.get("tokens", 0)) for r in arm_answers])
        cell["lexical"] = lexical_compliance(arm_answers)
        per_type: dict[str, Any] = {}
        for t in sorted({r.get("type") or UNLABELLED for r in usable}):
            group = [r for r in usable if (r.get("type") or UNLABELLED) == t]
            per_type[t] = {
                "n": len(group),
                "both_ok": _mean([float(r["both_ok"]) for r in group]),
            }
        cell["per_type"] = per_type
        per_arm[arm] = cell

    def paired_diff(arm: str, base: str) -> dict[str, Any]:
        common = sorted(set(ok_by_arm[base]) & set(ok_by_arm[arm]))
        return {
            "baseline": base,
            "n": len(common),
            **{
                m: estimate(
                    [float(ok_by_arm[arm][q][m]) - float(ok_by_arm[base][q][m]) for q in common],
                    n_boot=n_boot,
                    seed=seed,
                ).to_dict()
                for m in METRICS
            },
        }

    # each arm against the first, and every pair (later arm - earlier arm), e.g.
    # outline - cue: outline-guided answering against the constraint mode it extends
    paired = {arm: paired_diff(arm, arms[0]) for arm in arms[1:]}
    pairs = [
        {"arm": arm, **paired_diff(arm, base)} for i, arm in enumerate(arms) for base in arms[:i]
    ]
    return {
        "set_items": len(set_items),
        "generator": manifest.get("generator"),
        "judge": (manifest.get("scorer") or {}).get("name"),
        "arms": per_arm,
        "paired": paired,
        "pairs": pairs,
        "linkage": linkage_summary(run_dir, arms, n_boot, seed),
        "bootstrap": n_boot,
    }


def linkage_summary(run_dir: Path, arms: Sequence[str], n_boot: int, seed: int) -> dict[str, Any]:
    """MRR/MPR per arm and paired differences (later arm - earlier) from ``linkage.jsonl``."""
    rows = list(JsonlStore(run_dir / LINKAGE, key=arm_question_key, readonly=True))
    scores: dict[str, dict[str, tuple[float, float]]] = defaultdict(dict)
    meta: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        val = row_scores(row)
        if val is not None:
            scores[row["arm"]][str(row["question_id"])] = val
            meta.setdefault(str(row["question_id"]), row)
    ranked = [a for a in arms if scores[a]]
    per_arm = {
        arm: {
            "n": len(scores[arm]),
            "mrr": estimate([v[0] for v in scores[arm].values()], n_boot, seed).to_dict(),
            "mpr": estimate([v[1] for v in scores[arm].values()], n_boot, seed).to_dict(),
        }
        for arm in ranked
    }
    pairs = [
        row
        for i, arm in enumerate(ranked)
        for base in ranked[:i]
        for row in pair_rows(arm, base, scores[arm], scores[base], meta, n_boot, seed)
        if row["subset"] == ALL
    ]
    judges = sorted({f"{r.get('scorer')}, {r.get('protocol')}" for r in rows})
    return {"judge": judges, "arms": per_arm, "pairs": pairs}


def _pct(est: Mapping[str, Any] | None, ci: bool = True) -> str:
    if not est or not est.get("count"):
        return "-"
    text = f"{100 * est['mean']:.1f}"
    if ci:
        text += f" [{100 * est['low']:.1f}, {100 * est['high']:.1f}]"
    return text


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render_constraints_report(report: Mapping[str, Any]) -> str:
    gen = report.get("generator") or {}
    lines = [
        "# Coverage-conditioned questions: constraint compliance",
        "",
        f"Set: {report['set_items']} questions. Generator: "
        f"{gen.get('backend', '?')}:{gen.get('model', '?')}. Judge: {report.get('judge') or '?'}. "
        f"Rates in %, with bootstrap 95% CIs ({report['bootstrap']} resamples).",
        "",
        "| arm | judged | include covered | exclude avoided | both ok | detected (match) "
        "| detected (any) | detector ran | unparsed | errors | latency s | wall s/answer "
        "| tokens/answer |",
        "|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for arm, c in report["arms"].items():
        lines.append(
            f"| {arm} | {c['judged']} | {_pct(c['include_covered'])} | "
            f"{_pct(c['exclude_avoided'])} | {_pct(c['both_ok'])} | "
            f"{_share(c['detected_match'])} | {_share(c['detected_any'])} | "
            f"{_share(c['detector_ran'])} | {c['unparsed']} | "
            f"{c['answer_errors']} | {_num(c['mean_latency_s'])} | {_num(c['mean_wall_s'])} | "
            f"{_num(c['mean_tokens'], 0)} |"
        )
    lines += [
        "",
        "Judge-free check: share of topics the answers name (content words, lexically):",
        "",
        "| arm | include named | exclude named (lower is better) |",
        "|---|---:|---:|",
    ]
    for arm, c in report["arms"].items():
        lex = c.get("lexical") or {}
        lines.append(
            f"| {arm} | {_share(lex.get('include_named'))} | {_share(lex.get('exclude_named'))} |"
        )
    pairs = report["pairs"]
    if pairs:
        lines += [
            "",
            "Paired differences between arms, over questions judged in both "
            "(percentage points, 95% CI):",
            "",
            "| arm - baseline | n | include covered | exclude avoided | both ok |",
            "|---|---:|---|---|---|",
        ]
        for p in pairs:
            lines.append(
                f"| {p['arm']} - {p['baseline']} | {p['n']} | "
                + " | ".join(_pct(p[m]) for m in METRICS)
                + " |"
            )
    lines += _linkage_lines(report.get("linkage") or {})
    types = [
        t
        for t in [*REPORT_TYPE_ORDER, UNLABELLED]
        if any(t in c["per_type"] for c in report["arms"].values())
    ]
    if types:
        arms = list(report["arms"])
        lines += [
            "",
            "Both-ok rate (%) per question type (n per arm in parentheses):",
            "",
            "| type | " + " | ".join(arms) + " |",
            "|---|" + "---:|" * len(arms),
        ]
        for t in types:
            cells = []
            for arm in arms:
                cell = report["arms"][arm]["per_type"].get(t)
                cells.append(f"{_share(cell['both_ok'])} ({cell['n']})" if cell else "-")
            lines.append(f"| {t} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Include covered: share of include topics the judge found covered with real content. "
        "Exclude avoided: share of exclude topics not discussed. Both ok: every include covered "
        "and no exclude discussed. Detected (match): the answer's trace holds constraints whose "
        "include and exclude topics overlap the set's (content-word overlap); (any): it holds "
        "any constraint; detector ran: the trace records a detection attempt (the cue arm asks "
        "only when the question has an instruction cue). Unparsed judge verdicts are left out "
        "of the rates and counted. Latency "
        "is the pipeline's own time per question; wall is batch time divided by batch size.",
        "",
    ]
    return "\n".join(lines)


def _linkage_lines(linkage: Mapping[str, Any]) -> list[str]:
    if not linkage.get("arms"):
        return []
    lines = [
        "",
        "Answer quality: LINKAGE rank of each answer among the base question's graded "
        f"references (judge {', '.join(linkage['judge'])}; MRR, MPR in %, 95% CI):",
        "",
        "| arm | n | MRR | MPR |",
        "|---|---:|---|---|",
    ]
    for arm, c in linkage["arms"].items():
        mrr, mpr = c["mrr"], c["mpr"]
        lines.append(
            f"| {arm} | {c['n']} | {mrr['mean']:.3f} [{mrr['low']:.3f}, {mrr['high']:.3f}] | "
            f"{mpr['mean']:.1f} [{mpr['low']:.1f}, {mpr['high']:.1f}] |"
        )
    if linkage["pairs"]:
        lines += ["", "| arm - baseline | n | MRR diff | MPR diff |", "|---|---:|---|---|"]
        for p in linkage["pairs"]:
            lines.append(f"| {p['a']} - {p['b']} | {p['n']} | {diff_cells(p)} |")
    return lines


def write_constraints_report(
    run_dir: Path, settings: Settings, out_dir: Path | None = None
) -> tuple[Path, Path]:
    run_dir = Path(run_dir)
    if not (run_dir / ANSWERS).exists() and not (run_dir / JUDGEMENTS).exists():
        raise UserError(f"not a constraints run directory (no {ANSWERS}): {run_dir}")
    report = build_constraints_report(run_dir, settings)
    out = Path(out_dir or run_dir)
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / REPORT_MD, out / REPORT_JSON
    md.write_text(render_constraints_report(report), encoding="utf-8")
    js.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return md, js
