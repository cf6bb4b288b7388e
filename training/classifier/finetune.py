"""Fine-tuning the encoder of :mod:`typed_rag.classifier.finetune` on NF-CATS.

Keeps the epoch with the best valid macro-F1. With ``train_layers`` only the top
layers are trained, on cached hidden states of the layer below them, which makes
an epoch several times cheaper on a CPU. torch is the heavy dependency here:
this module is imported only by training code, never by the serving path.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from training.classifier.head import class_weights
from training.classifier.metrics import classification_report
from typed_rag.classifier.finetune import FineTunedModel, logits_of, tokenize_questions
from typed_rag.errors import UserError
from typed_rag.types import LABELS


@dataclass(frozen=True)
class FineTuneConfig:
    """Hyper-parameters of one fine-tuning run (the defaults were chosen on NF-CATS valid)."""

    lr: float = 8e-5
    head_lr: float = 2e-3
    weight_decay: float = 0.01
    warmup: float = 0.06  # share of steps with a linear warm-up, then linear decay to 0
    epochs: int = 4
    batch_size: int = 32
    max_length: int = 64
    dropout: float = 0.1
    class_weight_power: float = 0.5  # (N / n_c) ** power, as in the embedding head
    # Train only the top N transformer layers (0: all, end to end). The frozen lower
    # layers then run once per question, not once per epoch, so training is faster.
    train_layers: int = 0
    threads: int = 2
    # Where training runs ("cpu", or "cuda" for quick experiments on a lent GPU); the model
    # comes back on this device.
    device: str = "cpu"
    # Fine-tune this many times from the same start (the same head initialisation), each
    # with its own data order and dropout, and average the weights ("model soup"): the
    # variance of one run, large on the rare types, without the cost of an ensemble at
    # inference. 1: one run.
    soup: int = 1


@dataclass
class FineTuneResult:
    model: FineTunedModel
    best_epoch: int  # of a soup: of its first member
    valid_logits: np.ndarray
    history: list[dict[str, float]]  # of a soup: every member's epochs, with "member"
    seconds: float
    cpu_seconds: float = 0.0  # CPU time of all threads: the wall time on an idle machine x threads
    # Of a soup (``FineTuneConfig.soup`` > 1): each member's weights, in order.
    members: list[dict[str, torch.Tensor]] = field(default_factory=list)


def base_model(folder: Path, dropout: float) -> tuple[FineTunedModel, Any, dict[str, Any]]:
    """The pre-trained encoder in ``folder`` with a fresh head, its tokenizer and its config."""
    from transformers import AutoModel, AutoTokenizer  # heavy: transformers

    try:
        encoder = AutoModel.from_pretrained(str(folder), add_pooling_layer=False)
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
    except (OSError, ValueError) as exc:
        raise UserError(
            f"{folder}: cannot load a transformers encoder to fine-tune: {exc}"
        ) from exc
    hidden = int(encoder.config.hidden_size)
    config = encoder.config.to_dict()
    for key in ("id2label", "label2id"):  # the encoder's, not ours: the labels are in the meta
        config.pop(key, None)
    return FineTunedModel(encoder, hidden, len(LABELS), dropout), tokenizer, config


def average_states(states: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The element-wise mean of floating-point weights; other tensors (position ids) of the
    first state, which every member shares."""
    out = {}
    for key, first in states[0].items():
        if first.is_floating_point():
            out[key] = torch.stack([s[key] for s in states]).mean(dim=0)
        else:
            out[key] = first.clone()
    return out


class _PassThrough(nn.Module):
    """Stands in for a model's embedding layer: the cached hidden states go in unchanged."""

    def forward(self, *args: Any, inputs_embeds: torch.Tensor | None = None, **kwargs: Any):
        assert inputs_embeds is not None
        return inputs_embeds


def _layers(encoder: nn.Module) -> nn.ModuleList:
    inner = getattr(encoder, "encoder", None)
    layers = getattr(inner, "layer", None)
    if not isinstance(layers, nn.ModuleList):
        raise UserError(
            f"{type(encoder).__name__}: train_layers needs a BERT-like encoder (encoder.layer)"
        )
    return layers


class _TopModel(nn.Module):
    """The top ``n`` layers of ``model`` (shared modules, so training updates ``model``) and
    its head, run on cached hidden states of the layer below them."""

    def __init__(self, model: FineTunedModel, n: int) -> None:
        super().__init__()
        full = model.encoder
        layers = _layers(full)
        config = copy.deepcopy(full.config)
        config.num_hidden_layers = n
        top = type(full)(config, add_pooling_layer=False)
        top.embeddings = _PassThrough()
        # Share, do not copy, the top layers and anything else the encoder owns (MPNet's
        # relative position bias), so training them trains ``model``.
        for name, child in full.encoder.named_children():
            setattr(
                top.encoder, name, nn.ModuleList(list(layers)[-n:]) if name == "layer" else child
            )
        self.top = top
        self.dropout = model.dropout
        self.classify = model.classify

    def forward(self, states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.top(inputs_embeds=states, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(out.dtype)
        pooled = (out * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return self.classify(self.dropout(pooled))


def _frozen_states(
    model: FineTunedModel, ids: torch.Tensor, mask: torch.Tensor, below: int, batch_size: int = 128
) -> torch.Tensor:
    """Hidden states entering layer ``below`` (0-based), for every row; eval mode, no grad.

    Runs only the layers below (the others are detached for the pass), in batches of
    similar length so padding stays small.
    """
    model.eval()
    inner = model.encoder.encoder
    layers = inner.layer
    out = torch.zeros(
        ids.shape[0], ids.shape[1], int(model.classify.in_features), device=ids.device
    )
    lengths = mask.sum(dim=1)
    order = torch.argsort(lengths).tolist()
    try:
        inner.layer = nn.ModuleList(list(layers)[:below])
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                idx = order[start : start + batch_size]
                width = int(lengths[idx].max())
                res = model.encoder(input_ids=ids[idx, :width], attention_mask=mask[idx, :width])
                out[idx, :width] = res.last_hidden_state
    finally:
        inner.layer = layers
    return out


def _batches(lengths: Sequence[int], batch_size: int, gen: torch.Generator) -> list[list[int]]:
    """Shuffled batches of similar length: shuffle, sort within chunks of 50 batches, shuffle."""
    order = torch.randperm(len(lengths), generator=gen).tolist()
    chunk = batch_size * 50
    batches: list[list[int]] = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start : start + chunk], key=lambda i: lengths[i])
        batches += [part[j : j + batch_size] for j in range(0, len(part), batch_size)]
    perm = torch.randperm(len(batches), generator=gen).tolist()
    return [batches[i] for i in perm]


def fine_tune(
    folder: Path,
    train_q: Sequence[str],
    train_y: Sequence[int],
    valid_q: Sequence[str],
    valid_y: Sequence[int],
    config: FineTuneConfig,
    seed: int,
    echo: Callable[[str], None] | None = None,
) -> tuple[FineTuneResult, Any, dict[str, Any]]:
    """Fine-tune the encoder in ``folder``; keep the epoch with the best valid macro-F1.

    With ``config.soup`` = n > 1, n runs start from the same weights (seeds ``seed`` ..
    ``seed + n - 1`` order the data; the first run is the one ``soup = 1`` makes) and
    their weights are averaged. Returns the result, the tokenizer and the encoder config.
    Seeded: the same data, config and seed give the same weights on the same machine.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    try:
        torch.manual_seed(seed)
        model, tokenizer, enc_config = base_model(folder, config.dropout)
        model.to(config.device)
        t0, c0 = time.perf_counter(), time.process_time()
        start = copy.deepcopy(model.state_dict()) if config.soup > 1 else None
        runs = []
        for i in range(config.soup):
            if start is not None and i:
                model.load_state_dict(start)
                torch.manual_seed(seed + i)
                if echo is not None:
                    echo(f"  soup member {i + 1} of {config.soup} (seed {seed + i})")
            data = (train_q, train_y, valid_q, valid_y)
            run = _fine_tune(model, tokenizer, *data, config, seed + i, echo)
            runs.append((run, {k: v.detach().clone() for k, v in model.state_dict().items()}))
        res = runs[0][0]
        if start is not None:
            res.members = [state for _, state in runs]
            res.history = [
                {**row, "member": i} for i, (r, _) in enumerate(runs) for row in r.history
            ]
            model.load_state_dict(average_states(res.members))
            model.eval()
            res.valid_logits = logits_of(
                model, tokenizer, valid_q, config.max_length, 128, config.device
            )
        res.seconds, res.cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
        return res, tokenizer, enc_config
    finally:
        torch.set_num_threads(threads)


def _fine_tune(
    model: FineTunedModel,
    tokenizer: Any,
    train_q: Sequence[str],
    train_y: Sequence[int],
    valid_q: Sequence[str],
    valid_y: Sequence[int],
    config: FineTuneConfig,
    seed: int,
    echo: Callable[[str], None] | None,
) -> FineTuneResult:
    gen = torch.Generator().manual_seed(seed)
    y_tr = np.asarray(train_y, dtype=np.int64)
    y_va = np.asarray(valid_y, dtype=np.int64)
    enc = tokenize_questions(tokenizer, list(train_q), config.max_length)
    ids, mask = enc["input_ids"].to(config.device), enc["attention_mask"].to(config.device)
    lengths = mask.sum(dim=1).tolist()
    labels = torch.from_numpy(y_tr).to(config.device)
    n_layers = len(_layers(model.encoder)) if config.train_layers else 0
    if config.train_layers and config.train_layers < n_layers:
        below = n_layers - config.train_layers
        t0 = time.perf_counter()
        inputs = _frozen_states(model, ids, mask, below)
        runner: nn.Module = _TopModel(model, config.train_layers).to(config.device)
        for p in model.encoder.parameters():
            p.requires_grad_(False)
        for p in runner.parameters():
            p.requires_grad_(True)
        if echo is not None:
            echo(f"  cached layer-{below} states in {time.perf_counter() - t0:.0f} s; "
                 f"training the top {config.train_layers} of {n_layers} layers")  # fmt: skip
    else:
        inputs, runner = ids, model
    head_params = list(model.classify.parameters())
    head_ids = {id(p) for p in head_params}
    enc_params = [p for p in runner.parameters() if id(p) not in head_ids and p.requires_grad]
    opt = torch.optim.AdamW(
        [
            {"params": enc_params, "lr": config.lr},
            {"params": head_params, "lr": config.head_lr},
        ],
        weight_decay=config.weight_decay,
    )
    steps_per_epoch = math.ceil(len(y_tr) / config.batch_size)
    total = steps_per_epoch * config.epochs
    warm = max(1, int(config.warmup * total))

    def schedule(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total - step) / max(1, total - warm))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    weight = class_weights(y_tr, config.class_weight_power).to(config.device)
    loss_fn = nn.CrossEntropyLoss(weight=weight)
    best: tuple[float, int] = (-1.0, 0)
    best_state: dict[str, torch.Tensor] | None = None
    best_logits = np.zeros((len(y_va), len(LABELS)), dtype=np.float32)
    history: list[dict[str, float]] = []
    for epoch in range(1, config.epochs + 1):
        runner.train()
        t0 = time.perf_counter()
        total_loss = 0.0
        batches = _batches(lengths, config.batch_size, gen)
        for step, batch in enumerate(batches, 1):
            width = max(lengths[i] for i in batch)
            b_in, b_mask = inputs[batch, :width], mask[batch, :width]
            opt.zero_grad()
            loss = loss_fn(runner(b_in, b_mask), labels[batch])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(runner.parameters(), 1.0)
            opt.step()
            sched.step()
            total_loss += float(loss.detach()) * len(batch)
            if echo is not None and step % 50 == 0:
                spent = time.perf_counter() - t0
                echo(f"    epoch {epoch}: step {step}/{len(batches)} ({spent:.0f} s)")
        z = logits_of(model, tokenizer, valid_q, config.max_length, 128, config.device)
        report = classification_report(y_va, z.argmax(axis=1))
        row = {
            "epoch": epoch,
            "train_loss": total_loss / len(y_tr),
            "valid_macro_f1": report.macro_f1,
            "valid_accuracy": report.accuracy,
            "seconds": time.perf_counter() - t0,
        }
        history.append(row)
        if echo is not None:
            echo(
                f"  epoch {epoch}: loss {row['train_loss']:.4f}  valid macro-F1 "
                f"{report.macro_f1:.4f}  accuracy {report.accuracy:.4f}  ({row['seconds']:.0f} s)"
            )
        if report.macro_f1 > best[0]:
            best = (report.macro_f1, epoch)
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            best_logits = z
    assert best_state is not None
    model.load_state_dict(best_state)
    for p in model.parameters():
        p.requires_grad_(True)
    model.eval()
    return FineTuneResult(model, best[1], best_logits, history, seconds=0.0)
