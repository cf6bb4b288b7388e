"""What a QTREE build holds: counts, score spread, and the training examples it yields.

The summary is what gets committed under ``results/qtree/`` (the dataset
itself is regenerable). Training examples follow the paper's sec. 4.1: the
best-scored outline of a question is a supervised target, and its best and
worst outlines form a preference pair unless they scored the same.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval.store import read_jsonl
from training.qtree.dataset import DATASET, OK, TREES

SUMMARY = "summary.json"


@dataclass(frozen=True)
class PlannerExample:
    """One conditioned question with its tree, a chosen outline and (for DPO) a rejected one."""

    question_id: str
    conditioned: str
    tree: dict[str, str]
    chosen: list[str]
    rejected: list[str] | None = None


def ok_records(path: Path) -> list[dict[str, Any]]:
    return [r for r in read_jsonl(Path(path)) if r.get("status") == OK and r.get("outlines")]


def examples(
    records: Iterable[Mapping[str, Any]], trees: Mapping[str, Mapping[str, Any]]
) -> list[PlannerExample]:
    """SFT targets (every judged question) with DPO pairs where best and worst differ."""
    out = []
    for r in records:
        outlines = r["outlines"]
        best, worst = outlines[r["best"]], outlines[r["worst"]]
        tree = trees.get(r["question_id"], {}).get("tree") or {}
        pair = best["score"] > worst["score"]
        out.append(
            PlannerExample(
                question_id=str(r["question_id"]),
                conditioned=r["conditioned_question"],
                tree=dict(tree.get("nodes", {})),
                chosen=[f"{i}. {q}" for i, q in zip(best["ids"], best["queries"], strict=True)],
                rejected=[f"{i}. {q}" for i, q in zip(worst["ids"], worst["queries"], strict=True)]
                if pair
                else None,
            )
        )
    return out


def load_examples(dataset_dir: Path) -> list[PlannerExample]:
    """The training examples of a build folder (its ``qtree.jsonl`` and ``trees.jsonl``)."""
    d = Path(dataset_dir)
    trees = {str(t["question_id"]): t for t in read_jsonl(d / TREES)}
    return examples(ok_records(d / DATASET), trees)


def _mean(xs: Sequence[float]) -> float | None:
    return round(statistics.fmean(xs), 4) if xs else None


def summarize(dataset_dir: Path) -> dict[str, Any]:
    """Judged questions (``n``); counts per status, source and intent; score histogram; best/worst means; pair count."""
    d = Path(dataset_dir)
    records = read_jsonl(d / DATASET)
    ok = [r for r in records if r.get("status") == OK and r.get("outlines")]
    scores = [o["score"] for r in ok for o in r["outlines"]]
    best = [r["outlines"][r["best"]]["score"] for r in ok]
    worst = [r["outlines"][r["worst"]]["score"] for r in ok]
    return {
        "n": len(ok),  # questions with judged outlines: what the dataset's size means
        "questions": len(records),
        "judged": len(ok),
        "status": dict(Counter(r.get("status", "?") for r in records).most_common()),
        "sources": dict(Counter(r.get("source") or "-" for r in ok)),
        "intents": dict(Counter(r.get("intent") or "given" for r in ok)),
        "outlines": len(scores),
        "score_histogram": {str(k): scores.count(k) for k in range(1, 6)},
        "mean_score": _mean(scores),
        "mean_best": _mean(best),
        "mean_worst": _mean(worst),
        "dpo_pairs": sum(b > w for b, w in zip(best, worst, strict=True)),
    }


def write_summary(dataset_dir: Path, dest: Path | None = None) -> Path:
    """Write :func:`summarize` as JSON (default ``<dataset_dir>/summary.json``)."""
    path = Path(dest) if dest is not None else Path(dataset_dir) / SUMMARY
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summarize(dataset_dir), indent=2) + "\n")
    return path
