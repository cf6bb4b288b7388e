"""One method in two run directories, paired (``typed-rag eval compare``).

A run directory fixes the generator, the retrieval config and the method options, so
two retrieval configs (or two generators) are two runs. Their answers can still be
compared question by question when the runs share what makes verdicts comparable: the
scorer, the judge protocol, the reference draw and the LINKAGE variant. Then the
per-question difference of one method across the two runs gets a paired bootstrap
interval, per group (all, typed subset, each subset and type), as within a run.
A side may also be a pool of run directories answered apart (``DIR1,DIR2:METHOD``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from statistics import median
from typing import Any

from eval.reports.paired import pair_rows, row_scores
from eval.runs.manifest import filled, fingerprint, read_manifest, without_retired
from eval.runs.runner import ANSWERS, SCORES
from eval.settings import LabSettings
from eval.store import read_jsonl
from typed_rag.errors import UserError

# Fingerprint entries two runs must share for their verdicts to be compared ("data": the
# graded file of an `eval run --data` run, absent for Wiki-NFQA: same references).
SHARED = (
    "scorer",
    "scorer_sampling",
    "judge",
    "reference_seed",
    "paper_off_by_one",
    "top_k",
    "data",
)


def parse_pool(text: str) -> tuple[list[Path], str]:
    """``RUN_DIR[,RUN_DIR...]:METHOD`` -> (run directories, method): several run directories
    on one side are one pool of questions (e.g. two development pools answered apart)."""
    runs, sep, method = text.rpartition(":")
    dirs = [d for d in runs.split(",") if d]
    if not sep or not dirs or not method:
        raise UserError(f"expected RUN_DIR:METHOD (e.g. results/wiki-nfqa/run:rag), got {text!r}")
    return [Path(d) for d in dirs], method


def _scores(
    runs: Sequence[Path], method: str
) -> tuple[dict[str, tuple[float, float]], dict[str, Any]]:
    values, meta, source = {}, {}, {}
    for run in runs:
        for row in read_jsonl(run / SCORES):
            val = row_scores(row) if row.get("method") == method else None
            if val is not None:
                qid = str(row["question_id"])
                if source.setdefault(qid, run) != run:  # a run's own re-score keeps its last
                    raise UserError(
                        f"question {qid} is scored in more than one run of the pool "
                        f"{', '.join(map(str, runs))}: a pool's runs must not overlap"
                    )
                values[qid] = val
                meta[qid] = row
    if not values:
        where = ", ".join(str(run / SCORES) for run in runs)
        raise UserError(f"{where}: no scored answers of method {method!r}")
    return values, meta


def mismatches(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The shared fingerprint entries on which two run manifests differ (read as a resume
    reads them: a retired option or merged budget at today's value is no difference)."""
    defaults = fingerprint(LabSettings(), LabSettings())
    fa, fb = (
        {k: filled(fp.get(k), defaults.get(k)) for k in SHARED}
        for fp in (without_retired(m.get("fingerprint", {})) for m in (a, b))
    )
    return [f"{k}: {fa[k]!r} vs {fb[k]!r}" for k in SHARED if fa[k] != fb[k]]


def last_answers(runs: Sequence[Path], method: str) -> dict[str, dict[str, Any]]:
    """Per question, one method's answer row in run directories (its last answer)."""
    return {
        str(row["question_id"]): row
        for run in runs
        for row in read_jsonl(run / ANSWERS)
        if row.get("method") == method
    }


def changed_questions(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> set[str]:
    """The questions both sides answered whose final answers differ: where an option that
    acts on few questions shows its effect, undiluted by the answers it left as they were."""
    return {q for q in a.keys() & b.keys() if _text(a[q]) != _text(b[q])}


def _text(row: dict[str, Any]) -> str:
    return str(row.get("answer", "")).strip()


def compare_runs(
    a: str, b: str, n_boot: int = 1000, seed: int = 42, changed_only: bool = False
) -> dict[str, Any]:
    """``a`` minus ``b`` (each ``RUN_DIR:METHOD``) on the questions both scored; with
    ``changed_only``, on those of them whose answers differ."""
    (runs_a, m_a), (runs_b, m_b) = parse_pool(a), parse_pool(b)
    first = runs_a[0]
    for other in [*runs_a[1:], *runs_b]:
        diffs = mismatches(read_manifest(first), read_manifest(other))
        if diffs:
            raise UserError(f"{first} and {other} were scored differently: " + "; ".join(diffs))
    va, meta = _scores(runs_a, m_a)
    vb, meta_b = _scores(runs_b, m_b)
    answers_a, answers_b = last_answers(runs_a, m_a), last_answers(runs_b, m_b)
    if changed_only:
        if not answers_a or not answers_b:
            missing = runs_a if not answers_a else runs_b
            raise UserError(
                f"{', '.join(str(r / ANSWERS) for r in missing)}: no answers to compare "
                "(a verdicts-only copy?); --changed-only needs both sides' answers"
            )
        keep = changed_questions(answers_a, answers_b)
        va = {q: v for q, v in va.items() if q in keep}
        vb = {q: v for q, v in vb.items() if q in keep}
        if not va.keys() & vb.keys():
            raise UserError(f"{a} and {b}: no scored question has a changed answer")
    rows = pair_rows(a, b, va, vb, {**meta_b, **meta}, n_boot, seed)
    only = sorted(set(va) ^ set(vb))
    both = set(va) & set(vb)
    return {
        "a": a,
        "b": b,
        "questions": len(both),
        "unpaired": len(only),
        "changed_only": changed_only,
        "rows": rows,
        "cost": paired_costs(answers_a, answers_b, both),
    }


def answer_costs(answers: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per question: the engine calls, prompt and completion tokens, and seconds of an answer."""
    out = {}
    for qid, row in answers.items():
        calls = (row.get("result") or {}).get("calls", [])
        out[qid] = {
            "calls": float(len(calls)),
            "prompt_tokens": float(sum(int(c.get("prompt_tokens", 0)) for c in calls)),
            "completion_tokens": float(sum(int(c.get("completion_tokens", 0)) for c in calls)),
            "seconds": float(row.get("wall_s", 0.0)),
        }
    return out


def paired_costs(
    answers_a: dict[str, dict[str, Any]],
    answers_b: dict[str, dict[str, Any]],
    questions: Collection[str] | None = None,
) -> dict[str, Any] | None:
    """What each side's answers cost on the questions both answered: mean engine calls and
    tokens, median seconds, and the median per-question ratio of seconds (a over b; wall
    seconds move with the machine's load, a ratio of paired questions less so).
    ``questions`` limits them (all when None). None when either run kept no answers for
    them (a verdicts-only copy)."""
    ca, cb = answer_costs(answers_a), answer_costs(answers_b)
    qs = sorted(q for q in (ca if questions is None else questions) if q in ca and q in cb)
    if not qs:
        return None

    def side(costs: dict[str, dict[str, float]]) -> dict[str, float]:
        rows = [costs[q] for q in qs]
        means = {
            k: round(sum(r[k] for r in rows) / len(rows), 2) for k in rows[0] if k != "seconds"
        }
        return {**means, "seconds": round(median(r["seconds"] for r in rows), 1)}

    ratios = [ca[q]["seconds"] / cb[q]["seconds"] for q in qs if cb[q]["seconds"] > 0]
    return {
        "questions": len(qs),
        "a": side(ca),
        "b": side(cb),
        "seconds_ratio": round(median(ratios), 2) if ratios else None,
    }


def format_comparison(result: dict[str, Any]) -> str:
    """A table: one line per group, MRR and MPR differences with their 95% intervals."""
    which = "paired questions" + (" whose answers differ" if result.get("changed_only") else "")
    lines = [
        f"{result['a']} minus {result['b']}: {result['questions']} {which}"
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
    cost = result.get("cost")
    if cost:
        a, b = cost["a"], cost["b"]
        lines.append(
            f"cost per question ({cost['questions']} answered in both), a vs b: engine calls "
            f"{a['calls']:.1f} vs {b['calls']:.1f}, prompt tokens {a['prompt_tokens']:.0f} vs "
            f"{b['prompt_tokens']:.0f}, completion tokens {a['completion_tokens']:.0f} vs "
            f"{b['completion_tokens']:.0f}, median seconds {a['seconds']:.1f} vs "
            f"{b['seconds']:.1f} (median ratio {cost['seconds_ratio']})"
        )
    return "\n".join(lines)
