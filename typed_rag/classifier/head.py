"""The trained part of the embedding classifier: a one-hidden-layer MLP over sentence embeddings,
and the softmax and geometric mean that turn its logits (and a lexical part's) into probabilities.

Why an MLP and not logistic regression: with the same lower-cased MiniLM
embeddings, the best multinomial logistic regression (C searched on valid,
with and without balanced class weights) reached macro-F1 0.745 on NF-CATS
valid; this head reaches 0.800. Its training is :mod:`training.classifier.head`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from typed_rag.types import LABELS


class MLPHead(nn.Module):
    """embedding -> Linear -> GELU -> Linear -> 8 logits (dropout only while training)."""

    def __init__(
        self,
        dim: int,
        hidden: int,
        n_labels: int = len(LABELS),
        dropout: float = 0.3,
        input_dropout: float = 0.1,
    ) -> None:
        super().__init__()
        self.input_dropout = nn.Dropout(input_dropout)
        self.hidden = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, n_labels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.dropout(self.act(self.hidden(self.input_dropout(x)))))


def logits_of(model: MLPHead, x: np.ndarray) -> np.ndarray:
    """Eval-mode logits for a batch of embeddings."""
    model.eval()
    with torch.no_grad():
        return model(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))).numpy()


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64) / temperature
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def ensemble_logits(probabilities: Sequence[np.ndarray]) -> np.ndarray:
    """The mean log-probability of several models (their geometric mean, unnormalised)."""
    return np.mean([np.log(np.maximum(p, 1e-12)) for p in probabilities], axis=0)


def combine(probabilities: Sequence[np.ndarray], temperature: float) -> np.ndarray:
    """Geometric mean of calibrated probabilities, softmaxed with ``temperature``."""
    return softmax(ensemble_logits(probabilities), temperature)
