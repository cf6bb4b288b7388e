"""Classification metrics for the type classifier: accuracy, per-class P/R/F1, confusion.

Computed here with numpy (a few lines) so that evaluation needs no extra
library and reads the same for every classifier kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from typed_rag.types import LABELS


@dataclass
class ClassScores:
    label: str
    precision: float
    recall: float
    f1: float
    support: int


@dataclass
class Report:
    """What ``typed-rag classifier eval`` prints and the artefact keeps."""

    n: int
    accuracy: float
    macro_f1: float
    weighted_f1: float
    per_class: list[ClassScores]
    confusion: list[list[int]]  # rows: gold label, columns: predicted label (LABELS order)

    def to_dict(self) -> dict:
        return asdict(self)

    def f1_by_label(self) -> dict[str, float]:
        return {c.label: c.f1 for c in self.per_class}


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return np.divide(num, den, out=np.zeros_like(num, dtype=float), where=den > 0)


def classification_report(y_true: Sequence[int], y_pred: Sequence[int]) -> Report:
    """Scores over the 8 labels; a class never predicted or never seen scores 0, not NaN."""
    true = np.asarray(y_true, dtype=int)
    pred = np.asarray(y_pred, dtype=int)
    if true.shape != pred.shape:
        raise ValueError(f"{len(true)} gold labels but {len(pred)} predictions")
    k = len(LABELS)
    confusion = np.zeros((k, k), dtype=int)
    np.add.at(confusion, (true, pred), 1)
    tp = np.diag(confusion).astype(float)
    support = confusion.sum(axis=1)
    precision = _safe_div(tp, confusion.sum(axis=0).astype(float))
    recall = _safe_div(tp, support.astype(float))
    f1 = _safe_div(2 * precision * recall, precision + recall)
    n = int(len(true))
    per_class = [
        ClassScores(t.value, float(precision[i]), float(recall[i]), float(f1[i]), int(support[i]))
        for i, t in enumerate(LABELS)
    ]
    return Report(
        n=n,
        accuracy=float(tp.sum() / n) if n else 0.0,
        macro_f1=float(f1.mean()),
        weighted_f1=float((f1 * support).sum() / support.sum()) if n else 0.0,
        per_class=per_class,
        confusion=confusion.tolist(),
    )


def confidence_table(
    probabilities: np.ndarray, y_true: Sequence[int], thresholds: Sequence[float]
) -> list[dict[str, float]]:
    """For each threshold: how many questions fall below it and how accurate each side is.

    This is what ``classifier.min_confidence`` is chosen from: questions whose
    top-1 probability is below it go to plain RAG.
    """
    probs = np.asarray(probabilities, dtype=float)
    true = np.asarray(y_true, dtype=int)
    top = probs.max(axis=1)
    correct = probs.argmax(axis=1) == true
    rows: list[dict[str, float]] = []
    for t in thresholds:
        low = top < t
        rows.append(
            {
                "threshold": float(t),
                "below": int(low.sum()),
                "below_share": float(low.mean()) if len(top) else 0.0,
                "below_accuracy": float(correct[low].mean()) if low.any() else float("nan"),
                "above_accuracy": float(correct[~low].mean()) if (~low).any() else float("nan"),
            }
        )
    return rows


def format_report(report: Report) -> str:
    """A plain-text table: summary line, per-class P/R/F1, then the confusion matrix."""
    lines = [
        f"n={report.n}  accuracy={report.accuracy:.4f}  macro-F1={report.macro_f1:.4f}  "
        f"weighted-F1={report.weighted_f1:.4f}",
        "",
        f"{'label':<16}{'precision':>10}{'recall':>10}{'f1':>10}{'support':>9}",
    ]
    for c in report.per_class:
        lines.append(
            f"{c.label:<16}{c.precision:>10.3f}{c.recall:>10.3f}{c.f1:>10.3f}{c.support:>9d}"
        )
    short = [t.value[:5] for t in LABELS]
    lines += ["", "confusion (rows gold, columns predicted)"]
    lines.append(f"{'':<16}" + "".join(f"{s:>7}" for s in short))
    for t, row in zip(LABELS, report.confusion, strict=True):
        lines.append(f"{t.value:<16}" + "".join(f"{v:>7d}" for v in row))
    return "\n".join(lines)


def format_confidence_table(rows: Sequence[dict[str, float]]) -> str:
    lines = [f"{'threshold':>9}{'below':>7}{'share':>8}{'acc below':>11}{'acc above':>11}"]
    for r in rows:
        lines.append(
            f"{r['threshold']:>9.2f}{int(r['below']):>7d}{r['below_share']:>8.1%}"
            f"{r['below_accuracy']:>11.3f}{r['above_accuracy']:>11.3f}"
        )
    return "\n".join(lines)
