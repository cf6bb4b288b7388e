"""Training the embedding classifier's head (:class:`typed_rag.classifier.head.MLPHead`).

Training is seconds on an idle CPU, fully seeded, and early-stopped on valid
macro-F1. Class weights ``(N / n_c) ** power`` lift the rare types (COMPARISON
has 54 training rows) without overwhelming the common ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from training.classifier.metrics import classification_report
from typed_rag.classifier.head import MLPHead, logits_of
from typed_rag.types import LABELS


@dataclass(frozen=True)
class HeadConfig:
    """Hyper-parameters of one head; the grid in training varies ``hidden`` and ``class_weight_power``."""

    hidden: int = 256
    dropout: float = 0.3
    input_dropout: float = 0.1
    weight_decay: float = 0.01
    class_weight_power: float = 0.5
    lr: float = 1e-3
    batch_size: int = 64
    max_epochs: int = 60
    patience: int | None = None  # stop after this many epochs without a better valid macro-F1


def class_weights(labels: np.ndarray, power: float, n_labels: int = len(LABELS)) -> torch.Tensor:
    """``(N / n_c) ** power`` normalised to mean 1; power 0 gives plain cross-entropy."""
    counts = np.bincount(labels, minlength=n_labels).astype(np.float64)
    counts = np.maximum(counts, 1.0)
    w = (counts.sum() / counts) ** power
    return torch.tensor(w / w.mean(), dtype=torch.float32)


@dataclass
class TrainedHead:
    model: MLPHead
    config: HeadConfig
    best_epoch: int
    valid_macro_f1: float
    valid_accuracy: float


@contextmanager
def one_thread() -> Iterator[None]:
    """Torch on one CPU thread inside the block: the matrices are small, and a thread pool
    only adds synchronisation (many times slower on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@one_thread()
def train_head(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_valid: np.ndarray,
    y_valid: np.ndarray,
    config: HeadConfig,
    seed: int,
    on_epoch: Callable[[int, float, float], None] | None = None,
) -> TrainedHead:
    """Train with AdamW (on one thread), keep the epoch with the best valid macro-F1 (ties:
    the earlier one)."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = MLPHead(
        x_train.shape[1], config.hidden, dropout=config.dropout, input_dropout=config.input_dropout
    )
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    loss_fn = nn.CrossEntropyLoss(weight=class_weights(y_train, config.class_weight_power))
    xt = torch.from_numpy(np.ascontiguousarray(x_train, dtype=np.float32))
    yt = torch.from_numpy(np.asarray(y_train, dtype=np.int64))
    best_state: dict[str, torch.Tensor] | None = None
    best = (-1.0, 0.0, 0)
    for epoch in range(1, config.max_epochs + 1):
        model.train()
        order = torch.randperm(len(xt), generator=gen)
        for start in range(0, len(order), config.batch_size):
            idx = order[start : start + config.batch_size]
            opt.zero_grad()
            loss_fn(model(xt[idx]), yt[idx]).backward()
            opt.step()
        pred = logits_of(model, x_valid).argmax(axis=1)
        report = classification_report(y_valid, pred)
        if on_epoch is not None:
            on_epoch(epoch, report.macro_f1, report.accuracy)
        if report.macro_f1 > best[0]:
            best = (report.macro_f1, report.accuracy, epoch)
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        elif config.patience is not None and epoch - best[2] >= config.patience:
            break
    assert best_state is not None
    model.load_state_dict(best_state)
    model.eval()
    return TrainedHead(
        model, config, best_epoch=best[2], valid_macro_f1=best[0], valid_accuracy=best[1]
    )
