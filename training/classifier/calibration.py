"""Calibration of a classifier's logits on valid: temperature scaling, NLL and ECE.

One temperature per model (and one for a geometric mean of models) is what a trained
artefact keeps; :func:`typed_rag.classifier.head.softmax` applies it at inference.
"""

from __future__ import annotations

import numpy as np

from typed_rag.classifier.head import softmax


def nll(logits: np.ndarray, labels: np.ndarray, temperature: float) -> float:
    p = softmax(logits, temperature)[np.arange(len(labels)), labels]
    return float(-np.log(np.maximum(p, 1e-12)).mean())


def fit_temperature(logits: np.ndarray, labels: np.ndarray) -> float:
    """Temperature scaling: the T in [0.05, 20] minimising valid NLL (golden-section on log T).

    One scalar, so the ranking of types never changes; only the probabilities,
    and with them what ``min_confidence`` means, do.
    """
    lo, hi = np.log(0.05), np.log(20.0)
    ratio = (np.sqrt(5.0) - 1) / 2

    def f(log_t: float) -> float:
        return nll(logits, labels, float(np.exp(log_t)))

    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = f(a), f(b)
    for _ in range(80):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = f(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = f(b)
    return float(np.exp((lo + hi) / 2))


def expected_calibration_error(probs: np.ndarray, labels: np.ndarray, bins: int = 10) -> float:
    """ECE over equal-width confidence bins: how far top-1 probability is from accuracy."""
    top = probs.max(axis=1)
    correct = probs.argmax(axis=1) == labels
    edges = np.linspace(0.0, 1.0, bins + 1)
    ece = 0.0
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        mask = (top > lo) & (top <= hi)
        if mask.any():
            ece += mask.mean() * abs(top[mask].mean() - correct[mask].mean())
    return float(ece)
