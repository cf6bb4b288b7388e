"""Training the lexical part of a classifier (:mod:`typed_rag.classifier.lexical`): the
vocabulary learnt from the training questions, the logistic regression on it, and the two
temperatures that calibrate it alone and joined to another model."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import torch

from training.classifier.calibration import fit_temperature
from training.classifier.head import class_weights
from training.classifier.metrics import classification_report
from typed_rag.classifier.head import ensemble_logits, softmax
from typed_rag.classifier.lexical import (
    LexicalPart,
    LinearModel,
    Vocabulary,
    feature_function,
    linear_logits,
)


def fit_vocabulary(
    questions: Sequence[str],
    max_terms: int = 4000,
    min_df: int = 2,
    feature_set: str = "base",
) -> Vocabulary:
    """The ``max_terms`` features seen in most questions (at least ``min_df``), by df."""
    extract = feature_function(feature_set)
    df: Counter[str] = Counter()
    for q in questions:
        df.update(extract(q))
    kept = sorted((t for t, c in df.items() if c >= min_df), key=lambda t: (-df[t], t))
    kept = kept[:max_terms]
    n = len(questions)
    return Vocabulary(kept, [math.log((1 + n) / (1 + df[t])) + 1.0 for t in kept], feature_set)


def _sparse(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to_sparse()


def train_linear(
    x_fit: np.ndarray,
    y_fit: np.ndarray,
    x_sel: np.ndarray,
    y_sel: np.ndarray,
    l2_grid: Sequence[float] = (1e-5, 1e-4, 1e-3),
    power: float = 0.5,
    steps: int = 300,
    lr: float = 0.1,
) -> tuple[LinearModel, float]:
    """Full-batch Adam on class-weighted cross-entropy + L2; the L2 with the best macro-F1 on
    the select part wins. Deterministic (zero init, full batch). Returns the model and its L2."""
    xf, yf = _sparse(x_fit), torch.from_numpy(np.asarray(y_fit, dtype=np.int64))
    xs = torch.from_numpy(np.ascontiguousarray(x_sel, dtype=np.float32))
    loss_fn = torch.nn.CrossEntropyLoss(weight=class_weights(np.asarray(y_fit), power))
    best: tuple[float, LinearModel | None, float] = (-1.0, None, 0.0)
    for l2 in l2_grid:
        model = LinearModel(x_fit.shape[1])
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        for _ in range(steps):
            opt.zero_grad()
            loss = loss_fn(model(xf), yf) + l2 * model.weight.pow(2).sum()
            loss.backward()
            opt.step()
        with torch.no_grad():
            pred = model(xs).argmax(dim=1).numpy()
        f1 = classification_report(y_sel, pred).macro_f1
        if f1 > best[0]:
            best = (f1, model, l2)
    assert best[1] is not None
    return best[1].eval(), best[2]


def train_lexical_part(
    train_q: Sequence[str],
    train_y: np.ndarray,
    valid_q: Sequence[str],
    valid_y: np.ndarray,
    other_valid: np.ndarray,
    feature_set: str = "base",
    max_terms: int = 4000,
    power: float = 1.0,
) -> tuple[LexicalPart, np.ndarray]:
    """Fit the vocabulary and the regression on train (L2 chosen on valid), its temperature on
    valid, and the temperature of its geometric mean with ``other_valid`` (the other model's
    calibrated valid probabilities). Returns the part and the joined valid logits (before
    the ensemble temperature)."""
    vocab = fit_vocabulary(train_q, max_terms=max_terms, feature_set=feature_set)
    x_va = vocab.transform(valid_q)
    model, l2 = train_linear(vocab.transform(train_q), train_y, x_va, valid_y, power=power)
    z = linear_logits(model, x_va)
    t_lex = fit_temperature(z, valid_y)
    alone = softmax(z, t_lex)
    joined = ensemble_logits([other_valid, alone])
    t_ens = fit_temperature(joined, valid_y)
    info = {
        "l2": l2,
        "class_weight_power": power,
        "max_terms": max_terms,
        "valid_macro_f1_alone": classification_report(valid_y, z.argmax(axis=1)).macro_f1,
    }
    part = LexicalPart(vocab, model, t_lex, t_ens, info)
    return part, joined
