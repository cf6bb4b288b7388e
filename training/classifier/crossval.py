"""k-fold cross-validation of a whole training recipe, with bootstrap confidence intervals.

Why: NF-CATS has no test split here, and valid is used to select and
calibrate, so valid scores are optimistic. A *recipe* is what ``classifier
train`` does (fit on one part, select and calibrate on another); here it runs
k times over train + valid pooled: each fold is held out once, and the rest
is split (stratified) into fit and select parts in the same 80/20 ratio as
train/valid. The held-out predictions of all folds, pooled, give per-class F1
(the rare types have 119 and 68 examples in total, too few per fold), and a
bootstrap over questions gives their 95% intervals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from training.classifier.calibration import expected_calibration_error
from training.classifier.metrics import Report, classification_report
from typed_rag.types import LABELS

# recipe(fit, select, test) -> calibrated probabilities (len(test), 8); index arrays
# into the pooled data that the recipe closes over.
Recipe = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def stratified_folds(labels: Sequence[int], k: int, seed: int) -> list[np.ndarray]:
    """k disjoint index arrays covering all rows, each with every label's share (+-1)."""
    y = np.asarray(labels)
    rng = np.random.default_rng(seed)
    folds: list[list[int]] = [[] for _ in range(k)]
    offset = 0
    for label in range(len(LABELS)):
        idx = rng.permutation(np.flatnonzero(y == label))
        for j, i in enumerate(idx):
            folds[(offset + j) % k].append(int(i))
        offset += len(idx)  # rotate so small classes do not all start at fold 0
    return [np.sort(np.asarray(f, dtype=np.int64)) for f in folds]


def stratified_split(
    indices: np.ndarray, labels: Sequence[int], share: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Split ``indices`` into (rest, part) with ``share`` of each label in ``part``."""
    y = np.asarray(labels)
    rng = np.random.default_rng(seed)
    part: list[int] = []
    for label in range(len(LABELS)):
        idx = rng.permutation(indices[y[indices] == label])
        part.extend(int(i) for i in idx[: int(round(share * len(idx)))])
    chosen = np.zeros(len(y), dtype=bool)
    chosen[part] = True
    return np.sort(indices[~chosen[indices]]), np.sort(indices[chosen[indices]])


@dataclass
class CVResult:
    """Held-out probabilities of every row, and the scores computed from them."""

    probabilities: np.ndarray
    labels: np.ndarray
    fold_macro_f1: list[float]
    report: Report
    ece: float
    ci: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        f = np.asarray(self.fold_macro_f1)
        return {
            "k": len(self.fold_macro_f1),
            "n": int(len(self.labels)),
            "macro_f1": self.report.macro_f1,
            "accuracy": self.report.accuracy,
            "f1": self.report.f1_by_label(),
            "ece": self.ece,
            "ci95": self.ci,
            "fold_macro_f1": self.fold_macro_f1,
            "fold_macro_f1_mean": float(f.mean()),
            "fold_macro_f1_sd": float(f.std(ddof=1)) if len(f) > 1 else 0.0,
        }


def cross_validate(
    recipe: Recipe,
    labels: Sequence[int],
    k: int = 5,
    seed: int = 42,
    select_share: float = 0.2,
    on_fold: Callable[[int, float], None] | None = None,
    bootstrap: int = 1000,
) -> CVResult:
    """Run ``recipe`` on k folds; score the pooled held-out predictions."""
    y = np.asarray(labels)
    probs = np.full((len(y), len(LABELS)), np.nan)
    fold_f1: list[float] = []
    for i, test in enumerate(stratified_folds(y, k, seed)):
        rest = np.setdiff1d(np.arange(len(y)), test)
        fit, select = stratified_split(rest, y, select_share, seed + 1 + i)
        p = np.asarray(recipe(fit, select, test), dtype=float)
        if p.shape != (len(test), len(LABELS)):
            raise ValueError(f"recipe returned shape {p.shape}, expected {(len(test), 8)}")
        probs[test] = p
        fold_f1.append(classification_report(y[test], p.argmax(axis=1)).macro_f1)
        if on_fold is not None:
            on_fold(i, fold_f1[-1])
    pred = probs.argmax(axis=1)
    report = classification_report(y, pred)
    return CVResult(
        probabilities=probs,
        labels=y,
        fold_macro_f1=fold_f1,
        report=report,
        ece=expected_calibration_error(probs, y),
        ci=bootstrap_ci(y, pred, n=bootstrap, seed=seed),
    )


def _f1(t: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, float]:
    """Per-label F1 (label order) and accuracy of one resample."""
    k = len(LABELS)
    conf = np.bincount(t * k + p, minlength=k * k).reshape(k, k).astype(float)
    tp = np.diag(conf)
    prec = np.divide(tp, conf.sum(0), out=np.zeros(k), where=conf.sum(0) > 0)
    rec = np.divide(tp, conf.sum(1), out=np.zeros(k), where=conf.sum(1) > 0)
    f1 = np.divide(2 * prec * rec, prec + rec, out=np.zeros(k), where=(prec + rec) > 0)
    return f1, float(tp.sum() / len(t))


def _percentiles(x: np.ndarray, level: float) -> list[float]:
    lo, hi = (1 - level) / 2 * 100, (1 + level) / 2 * 100
    return [float(np.percentile(x, lo)), float(np.percentile(x, hi))]


def bootstrap_ci(
    y_true: np.ndarray, y_pred: np.ndarray, n: int = 1000, seed: int = 0, level: float = 0.95
) -> dict[str, Any]:
    """Percentile intervals of macro-F1, accuracy and each label's F1 over resampled questions."""
    rng = np.random.default_rng(seed)
    macro, acc = np.empty(n), np.empty(n)
    per = np.empty((n, len(LABELS)))
    for b in range(n):
        idx = rng.integers(0, len(y_true), len(y_true))
        per[b], acc[b] = _f1(y_true[idx], y_pred[idx])
        macro[b] = per[b].mean()
    return {
        "macro_f1": _percentiles(macro, level),
        "accuracy": _percentiles(acc, level),
        "f1": {t.value: _percentiles(per[:, i], level) for i, t in enumerate(LABELS)},
        "resamples": n,
    }


def paired_difference(
    y_true: np.ndarray,
    pred_a: np.ndarray,
    pred_b: np.ndarray,
    n: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """A minus B on the same questions: macro-F1 and each label's F1, with percentile
    intervals from resampling questions once for both (two recipes' CV predictions)."""
    rng = np.random.default_rng(seed)
    diff = np.empty((n, len(LABELS)))
    for b in range(n):
        idx = rng.integers(0, len(y_true), len(y_true))
        diff[b] = _f1(y_true[idx], pred_a[idx])[0] - _f1(y_true[idx], pred_b[idx])[0]
    whole = _f1(y_true, pred_a)[0] - _f1(y_true, pred_b)[0]

    def cell(point: float, draws: np.ndarray) -> dict[str, Any]:
        return {"diff": float(point), "ci": _percentiles(draws, level)}

    return {
        "macro_f1": cell(whole.mean(), diff.mean(axis=1)),
        "f1": {t.value: cell(whole[i], diff[:, i]) for i, t in enumerate(LABELS)},
        "resamples": n,
    }
