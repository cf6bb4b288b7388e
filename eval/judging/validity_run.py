"""``typed-rag eval judge-validity``: measure judging protocols on answers of known quality.

Resumable like an evaluation run: the generator's answers (the off-topic and
no-gold candidates) and every (protocol, model, candidate) judgement are
appended to JSONL files in the output folder, and the summary is recomputed
from everything stored, including ensembles of protocols and models.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eval.data.labels import QuestionLabel
from eval.data.wikinfqa import WikiNFQARecord
from eval.judging.linkage import REFERENCE_SEED
from eval.judging.protocols import Judgement, ensemble, gated, judge, parse_protocol
from eval.judging.resample import JUDGE_TEMPERATURE
from eval.judging.validity import COPIES, Candidate, build_candidates, pick_questions, validity
from eval.reports.figures import plt
from eval.reports.linkage_metrics import N_BOOT
from eval.runs.manifest import scorer_name
from eval.runs.resume import progress_bar
from eval.store import JsonlStore
from typed_rag import engines, system
from typed_rag.config import Settings
from typed_rag.errors import UserError

log = logging.getLogger(__name__)

POOL = "generator_answers.jsonl"
JUDGEMENTS = "judgements.jsonl"
SUMMARY = "summary.json"


def _judgement_key(row: Mapping[str, Any]) -> str:
    return f"{row['protocol']}\t{row['model']}\t{row['key']}"


async def generate_pool(
    generator: Settings, records: Sequence[WikiNFQARecord], out: Path, progress: bool = True
) -> dict[str, str]:
    """The generator's (llm-mode) answers to ``records``, stored in ``out/POOL``; resumable."""
    store = JsonlStore(out / POOL, key=lambda r: str(r["question_id"]))
    todo = [r for r in records if r.question_id not in store]
    if todo:
        rag = system.TypedRAG.from_settings(generator.model_copy(update={"mode": "llm"}))
        await rag.start()
        try:
            with progress_bar(len(todo), "generator answers", progress) as bar:
                for start in range(0, len(todo), 8):
                    chunk = todo[start : start + 8]
                    results = await rag.answer_many([r.question for r in chunk], mode="llm")
                    store.append(
                        {
                            "question_id": r.question_id,
                            "answer": res.answer,
                            "model": scorer_name(generator),
                        }
                        for r, res in zip(chunk, results, strict=True)
                    )
                    bar.update(len(chunk))
        finally:
            await rag.close()
    wanted = {r.question_id for r in records}
    return {str(r["question_id"]): r["answer"] for r in store if r["question_id"] in wanted}


async def judge_candidates(
    protocols: Sequence[str],
    judge_settings: Settings,
    candidates: Sequence[Candidate],
    out: Path,
    batch: int = 32,
    progress: bool = True,
) -> None:
    """Judge every candidate with each protocol on one engine (loaded once); resumable."""
    store = JsonlStore(out / JUDGEMENTS, key=_judgement_key)
    model = scorer_name(judge_settings)
    engine = None
    try:
        for protocol in protocols:
            todo = [c for c in candidates if f"{protocol}\t{model}\t{c.key}" not in store]
            if not todo:
                continue
            if engine is None:
                engine = engines.build_engine(judge_settings)
                await engine.start()
            with progress_bar(len(todo), f"judge {protocol}", progress) as bar:
                for start in range(0, len(todo), batch):
                    chunk = todo[start : start + batch]
                    t0 = time.perf_counter()
                    verdicts = await judge(
                        protocol,
                        engine,
                        [c.item for c in chunk],
                        temperature=JUDGE_TEMPERATURE,
                        seed=judge_settings.sampling.seed,
                    )
                    wall = (time.perf_counter() - t0) / len(chunk)
                    store.append(
                        {
                            "protocol": protocol,
                            "model": model,
                            "key": c.key,
                            "kind": c.kind,
                            "grade": c.grade,
                            "quality": v.quality,
                            "worst": v.worst,
                            "best": v.best,
                            "s_per_verdict": round(wall, 3),
                        }
                        | ({"dist": [round(p, 6) for p in v.dist]} if v.dist else {})
                        for c, v in zip(chunk, verdicts, strict=True)
                    )
                    bar.update(len(chunk))
    finally:
        if engine is not None:
            await engine.close()


def summarize(
    candidates: Sequence[Candidate],
    out: Path,
    default: tuple[str, str],
    ensembles: Sequence[str] = (),
    n_boot: int = 1000,
) -> list[dict[str, Any]]:
    """Validity of every stored (protocol, model) and of the requested combinations.

    An ensemble (mean quality) is written ``"p1@m1+p2@m2"``, a gate ``"p1*relevance-prob"``
    (``@model`` optional when one model judged; ``linkage-prob*relevance-prob`` is
    reported as ``linkage-prob-gated``). Rows go to ``out/summary.json``.
    """
    keys = {c.key for c in candidates}
    rows = [r for r in JsonlStore(out / JUDGEMENTS, key=_judgement_key) if r["key"] in keys]
    by_judge: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_judge.setdefault((r["protocol"], r["model"]), {})[r["key"]] = r
    models = sorted({m for _, m in by_judge})
    for spec in ensembles:
        product = "*" in spec
        parts = []
        for part in spec.split("*" if product else "+"):
            protocol, _, model = part.partition("@")
            parts.append((protocol, model or (models[0] if len(models) == 1 else "")))
        if not all(p in by_judge for p in parts):
            log.warning("combination %s: not every part has been judged; skipped", spec)
            continue
        common = sorted(set.intersection(*(set(by_judge[p]) for p in parts)))
        judged = [
            [
                Judgement(
                    k,
                    by_judge[p][k]["quality"],
                    by_judge[p][k]["worst"],
                    by_judge[p][k]["best"],
                    dist=by_judge[p][k].get("dist"),
                )
                for k in common
            ]
            for p in parts
        ]
        merged = gated(*judged) if product else ensemble(judged)
        names = [p for p, _ in parts]
        name = f"{names[0]}-gated" if names[1:] == ["relevance-prob"] else spec.split("@")[0]
        if not product:
            name = "+".join(names)
        model = "+".join(dict.fromkeys(m for _, m in parts))
        secs = sum(
            sum(by_judge[p][k]["s_per_verdict"] for k in common) / max(1, len(common))
            for p in parts
        )
        by_judge[(name, model)] = {
            j.key: {"quality": j.quality, "worst": j.worst, "best": j.best, "s_per_verdict": secs}
            for j in merged
        }
    summary = []
    for (protocol, model), judged in sorted(by_judge.items()):
        mine = [c for c in candidates if c.key in judged]
        stats = validity(
            mine,
            {k: v["quality"] for k, v in judged.items()},
            {k: bool(v["worst"]) for k, v in judged.items()},
            {k: bool(v["best"]) for k, v in judged.items()},
            n_boot=n_boot,
        )
        summary.append(
            {
                "protocol": protocol,
                "model": model,
                "default": (protocol, model) == default,
                **stats,
                "candidates": len(mine),
                "s_per_verdict": round(
                    sum(v["s_per_verdict"] for v in judged.values()) / max(1, len(judged)), 3
                ),
            }
        )
    (out / SUMMARY).write_text(json.dumps(_finite(summary), indent=1), encoding="utf-8")
    return summary


def render(summary: Sequence[Mapping[str, Any]]) -> str:
    """The README table: protocol, model, accuracies with CIs, Spearman, seconds per verdict."""

    def cell(row: Mapping[str, Any], key: str) -> str:
        value = row.get(key)
        if value is None or value != value:
            return "-"
        lo, hi = row.get("ci", {}).get(key, [value, value])
        return f"{100 * value:.0f} [{100 * lo:.0f}, {100 * hi:.0f}]"

    lines = [
        "| protocol | model | n | 3 > 0 % | 3 > 1 % | all pairs % | off-topic last % | "
        "off-topic first % | no-gold < grade 3 % | padded <= grade 1 % | vouched <= grade 1 % | "
        "scaffolded <= grade 1 % | Spearman [95% CI] | s/verdict |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in summary:
        sp = r.get("spearman")
        lo, hi = r.get("ci", {}).get("spearman", [sp, sp])
        sp_cell = f"{sp:.2f} [{lo:.2f}, {hi:.2f}]" if sp == sp and sp is not None else "-"
        first = r.get("offtopic_first")
        lines.append(
            f"| {r['protocol']}{' (default)' if r['default'] else ''} | {r['model']} | {r['n']} | "
            f"{cell(r, 'acc_3v0')} | {cell(r, 'acc_3v1')} | {cell(r, 'acc_pairs')} | "
            f"{cell(r, 'acc_offtopic')} | {100 * first:.0f} | {cell(r, 'acc_nogold')} | "
            f"{cell(r, 'acc_padding')} | {cell(r, 'acc_vouching')} | "
            f"{cell(r, 'acc_scaffolding')} | {sp_cell} | "
            f"{r['s_per_verdict']:.2f} |"
        )
    return "\n".join(lines)


def run_validity(
    settings: Settings,
    judge_settings: Settings,
    records: Sequence[WikiNFQARecord],
    labels: Mapping[str, QuestionLabel],
    out: Path,
    *,
    questions: int,
    pool_size: int,
    protocols: Sequence[str],
    ensembles: Sequence[str] = (),
    seed: int = 7,
    progress: bool = True,
    copies: Sequence[str] = tuple(COPIES),
) -> list[dict[str, Any]]:
    """Pick questions, make the generator pool, judge with each protocol, summarize
    (``copies``: the probes whose grade-1 copies are judged, :data:`COPIES`)."""
    for p in protocols:
        parse_protocol(p)
    out.mkdir(parents=True, exist_ok=True)
    picked = pick_questions(records, questions, seed, REFERENCE_SEED)
    if not picked:
        raise UserError(
            "no question has graded answers beyond its LINKAGE references: judge validity "
            "needs a spare grade-3 answer and a spare answer of another grade per question"
        )
    pool = asyncio.run(generate_pool(settings, picked[:pool_size], out, progress))
    candidates = build_candidates(picked, pool, labels, seed, REFERENCE_SEED, copies=copies)
    candidates.sort(key=lambda c: (c.question_id, c.key))  # a question's prompts share a prefix
    asyncio.run(judge_candidates(protocols, judge_settings, candidates, out, progress=progress))
    # The default judge is the default protocol on the generator's own model.
    default = (settings.eval.judge_protocol, scorer_name(settings))
    summary = summarize(candidates, out, default, ensembles, N_BOOT)
    (out / "summary.md").write_text(render(summary) + "\n", encoding="utf-8")
    plot_quality_by_kind(summary, out / "quality_by_grade.png")
    return summary


def plot_quality_by_kind(summary: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Mean quality each protocol gives to grades 0-3 and to the generator's off-topic and
    no-gold answers: a valid judge's bars rise with the grade and stay low for the last two."""
    kinds = ["grade0", "grade1", "grade2", "grade3", "nogold", "offtopic"]
    fig, ax = plt.subplots(figsize=(9, 4), dpi=110)
    width = 0.8 / max(1, len(summary))
    for j, row in enumerate(summary):
        means = [row["mean_quality"].get(k, float("nan")) for k in kinds]
        label = f"{row['protocol']} ({row['model'].split(':')[-1]})"
        ax.bar([i - 0.4 + width * (j + 0.5) for i in range(len(kinds))], means, width, label=label)
    ax.set_xticks(
        range(len(kinds)), ["grade 0", "grade 1", "grade 2", "grade 3", "no gold", "off-topic"]
    )
    ax.set_ylabel("mean judged quality (0-1)")
    ax.set_title("Judge validity on Wiki-NFQA: held-out graded answers and generator answers")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _finite(value: Any) -> Any:
    """``value`` with NaN (a measure with no pairs, e.g. padding under ``--probes none``) as
    null, so the summary is strict JSON."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
