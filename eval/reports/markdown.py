"""report.md of a Wiki-NFQA run: the tables of :func:`eval.reports.report.build_report` as Markdown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from eval.data.wikinfqa import SUBSET_TITLES
from eval.reports.figures import METHOD_TITLES, type_title
from eval.reports.linkage_metrics import Estimate
from eval.reports.paired import render_paired

ALL = "all"  # the column over every subset


def fmt(est: Estimate | None, scale: float = 1.0, digits: int = 3, ci: bool = False) -> str:
    """A mean (and its CI) for a table cell; ``-`` when there is none."""
    if est is None or est.count == 0 or np.isnan(est.mean):
        return "-"
    text = f"{est.mean * scale:.{digits}f}"
    if ci:
        text += f" [{est.low * scale:.{digits}f}, {est.high * scale:.{digits}f}]"
    return text


def est_of(d: dict[str, Any] | None) -> Estimate | None:
    """An estimate stored in report.json back as an :class:`Estimate`."""
    return Estimate(**d) if d else None


def judge_line(judge: dict[str, Any]) -> str:
    """How the verdicts were obtained and what of each answer the judge read."""
    unread = [
        what
        for key, what in (
            ("citations", "`[n]` markers"),
            ("source_talk", "vouching sentences"),
            ("scaffolding", "talk about the pipeline"),
        )
        if judge.get(key) == "strip"
    ]
    reads = f"without its {' and '.join(unread)}" if unread else "as written"
    return (
        f"- Judge: protocol `{judge.get('protocol', 'linkage')}`, temperature "
        f"{judge.get('temperature', '?')}; reads each answer {reads}"
    )


def render_markdown(rep: dict[str, Any], figure: Path | None) -> str:
    methods, subsets = rep["methods"], rep["subsets"]
    gen, scorer = rep["generator"], rep["scorer"]
    scorer_label = scorer.get("name") or f"{scorer.get('backend')}:{scorer.get('model')}"
    variant = (
        "paper prompt ([[n]] = worse than all, off by one)"
        if rep["paper_off_by_one"]
        else "original LINKAGE ([[n+1]] = worse than all)"
    )
    data = rep.get("data")  # a graded file's run (eval run --data)
    out = [
        f"# Evaluation on `{Path(data['path']).name}`" if data else "# Wiki-NFQA evaluation",
        "",
        *([f"- Data: `{data['path']}` (sha256 `{data['sha256']}`)"] if data else []),
        f"- Generator: `{gen.get('backend')}:{gen.get('model')}`",
        f"- Scorer: `{scorer_label}` (scores from different scorers are not comparable)",
        f"- LINKAGE: {variant}; reference seed {rep['reference_seed']}; "
        f"unparsed verdicts: {rep['unparsed']}",
        judge_line(rep.get("judge") or {}),
        f"- Git: `{(rep['git'] or {}).get('commit')}`"
        + (" (uncommitted changes)" if (rep["git"] or {}).get("dirty") else ""),
        f"- 95% CIs: percentile bootstrap, {rep['bootstrap']} resamples",
        "",
    ]
    cols = [SUBSET_TITLES.get(s, s) for s in subsets]
    for metric, title, scale, digits in (
        ("mrr", "MRR", 1.0, 4),
        ("mpr", "MPR (%)", 1.0, 2),
    ):
        out += [
            f"## {title} by subset (Table 3 shape; scorer `{scorer_label}`)",
            "",
            "| method | " + " | ".join(cols) + " | all [95% CI] | n |",
            "|---|" + "---:|" * (len(cols) + 2),
        ]
        for m in methods:
            cells = rep["table"][m]
            row = [fmt(est_of(cells[s][metric]), scale, digits) for s in subsets]
            all_est = est_of(cells[ALL][metric])
            row.append(fmt(all_est, scale, digits, ci=True))
            row.append(str(all_est.count if all_est else 0))
            out.append(f"| {METHOD_TITLES.get(m, m)} | " + " | ".join(row) + " |")
        out.append("")

    out += [
        f"## MPR (%) by question type (Figure 4 shape; scorer `{scorer_label}`)",
        "",
        "| type | n | " + " | ".join(METHOD_TITLES.get(m, m) for m in methods) + " |",
        "|---|---:|" + "---:|" * len(methods),
    ]
    for t in rep["types"]:
        cells = rep["per_type"].get(t, {})
        n = max((cells.get(m, {}).get("mpr", {}).get("count", 0) for m in methods), default=0)
        vals = [fmt(est_of(cells.get(m, {}).get("mpr")), 1.0, 1, ci=True) for m in methods]
        out.append(f"| {type_title(t)} | {n} | " + " | ".join(vals) + " |")
    out.append("")
    if figure is not None:
        out += [f"![MPR by type]({figure.name})", ""]
    out += render_paired(rep)

    out += [
        "## Scorer verdicts that did not parse",
        "",
        "| method | scored | parsed | never parsed | resampled | mean attempts | empty answers | by status |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for m in methods:
        f = rep["failures"][m]
        statuses = ", ".join(f"{k}: {v}" for k, v in sorted(f["statuses"].items()))
        out.append(
            f"| {METHOD_TITLES.get(m, m)} | {f['scored']} | {f['parsed']} | {f['never_parsed']} | "
            f"{f['resampled']} | {f['mean_attempts']:.2f} | {f['empty_candidates']} | {statuses} |"
        )
    out.append("")

    out += [
        "## Cost",
        "",
        "| method | questions | LLM calls | prompt tok | completion tok | answer time (s) | "
        "questions/min | with fallback | scorer tok (in/out) | scorer time (s) |",
        "|---|" + "---:|" * 9,
    ]
    for m in methods:
        c = rep["cost"][m]
        qpm = f"{c['questions_per_min']:.2f}" if c["questions_per_min"] else "-"
        out.append(
            f"| {METHOD_TITLES.get(m, m)} | {c['questions']} | {c['llm_calls']} | "
            f"{c['prompt_tokens']} | {c['completion_tokens']} | {c['answer_wall_s']:.1f} | {qpm} | "
            f"{c['with_fallback']} | {c['scorer_prompt_tokens']}/{c['scorer_completion_tokens']} | "
            f"{c['scorer_wall_s']:.1f} |"
        )
    out.append("")

    if rep.get("coverage"):
        out += [
            "## Sub-question coverage (judge: the scorer)",
            "",
            "Weighted = (core hits + 0.5 x background hits - follow-up hits) / "
            "(core + 0.5 x background); 1 is ideal. Context = share of core sub-questions "
            "the retrieved passages can answer (judged 0-5, answerable at >= threshold), next "
            "to the answer's core coverage on the same questions.",
            "",
            "| method | judged | ok | core | background | follow-up | weighted [95% CI] | "
            "context core | answer core (same q) | failures |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for m in methods:
            c = rep["coverage"].get(m)
            if not c:
                continue
            k = c["kinds"]
            fails = ", ".join(f"{s}: {n}" for s, n in sorted(c["failed"].items())) or "0"
            if c["context_failed"]:
                fails += f"; context: {c['context_failed']}"
            out.append(
                f"| {METHOD_TITLES.get(m, m)} | {c['judged']} | {c['ok']} | "
                f"{fmt(est_of(k['core']), 100, 1)} | {fmt(est_of(k['background']), 100, 1)} | "
                f"{fmt(est_of(k['follow_up']), 100, 1)} | {fmt(est_of(c['weighted']), 1, 3, ci=True)} | "
                f"{fmt(est_of(c['context']), 100, 1)} | "
                f"{fmt(est_of(c['answer_core_on_context_questions']), 100, 1)} | {fails} |"
            )
        out.append("")
    return "\n".join(out)
