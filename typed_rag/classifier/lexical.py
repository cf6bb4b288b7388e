"""Lexical features of a question: TF-IDF of its words, word pairs and opening words.

Why: question type is largely carried by form words ("why", "how do I",
"difference between", "your experience", "best"), which a sentence embedding
trained for topical similarity blurs. A small vocabulary learnt from the
training questions costs nothing at inference and travels in the artefact's
metadata as plain JSON.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from typed_rag.classifier.head import class_weights
from typed_rag.classifier.metrics import classification_report
from typed_rag.types import LABELS

_TOKEN = re.compile(r"[a-z0-9']+|[?!]")


def words_of(question: str) -> list[str]:
    """The lower-cased words (and ? / !) the lexical features are made of."""
    return _TOKEN.findall(question.lower())


def features(question: str) -> set[str]:
    """Words, adjacent word pairs, and the first one and two words marked as openers."""
    words = words_of(question)
    out = set(words)
    out.update(f"{a} {b}" for a, b in zip(words, words[1:], strict=False))
    if words:
        out.add(f"^{words[0]}")
    if len(words) > 1:
        out.add(f"^{words[0]} {words[1]}")
    return out


@dataclass
class Vocabulary:
    """Feature names and their inverse document frequencies (a JSON-friendly pair of lists)."""

    terms: list[str]
    idf: list[float]

    @classmethod
    def fit(cls, questions: Sequence[str], max_terms: int = 4000, min_df: int = 2) -> Vocabulary:
        """The ``max_terms`` features seen in most questions (at least ``min_df``), by df."""
        df: Counter[str] = Counter()
        for q in questions:
            df.update(features(q))
        kept = sorted((t for t, c in df.items() if c >= min_df), key=lambda t: (-df[t], t))
        kept = kept[:max_terms]
        n = len(questions)
        return cls(kept, [math.log((1 + n) / (1 + df[t])) + 1.0 for t in kept])

    @cached_property
    def _lookup(self) -> tuple[dict[str, int], np.ndarray]:
        return {t: i for i, t in enumerate(self.terms)}, np.asarray(self.idf, dtype=np.float32)

    def transform(self, questions: Sequence[str]) -> np.ndarray:
        """Binary term presence x idf, L2-normalised rows; shape ``(n, len(terms))``."""
        index, idf = self._lookup
        out = np.zeros((len(questions), len(self.terms)), dtype=np.float32)
        for row, q in enumerate(questions):
            cols = [index[f] for f in features(q) if f in index]
            out[row, cols] = idf[cols]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


class LinearModel(torch.nn.Module):
    """Multinomial logistic regression on (sparse) lexical features."""

    def __init__(self, n_features: int, n_labels: int = len(LABELS)) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(n_features, n_labels))
        self.bias = torch.nn.Parameter(torch.zeros(n_labels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mm = torch.sparse.mm(x, self.weight) if x.is_sparse else x @ self.weight
        return mm + self.bias


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


def linear_logits(model: LinearModel, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))).numpy()
