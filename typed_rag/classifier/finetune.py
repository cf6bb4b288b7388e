"""A small transformer fine-tuned end to end on NF-CATS (``classifier.kind = "finetuned"``).

Why: the frozen sentence embedding plus MLP head (``embedding-head``) cannot
reshape the encoder for question form, and the rare types (EXPERIENCE,
COMPARISON) sit between the big ones in embedding space. Fine-tuning
all-MiniLM-L6-v2 (22M parameters, 6 layers) with mean pooling and a linear
layer fits on a 2-core CPU because NF-CATS questions are short (median 10
words; ``max_length`` 64 tokens truncates < 1%).

The artefact is one safetensors file, ``<classifier_dir>/type_finetuned.safetensors``:
encoder and head weights, and in its metadata the encoder config, the base
model (whose tokenizer is used), label order, temperature and valid metrics.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from typed_rag.classifier.base import TypeClassifier
from typed_rag.classifier.head import class_weights, softmax
from typed_rag.classifier.metrics import classification_report
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.types import LABELS

log = logging.getLogger(__name__)

ARTEFACT_NAME = "type_finetuned.safetensors"
FORMAT = "typed-rag/type-finetuned/1"


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


@dataclass
class FineTunedMeta:
    """What the artefact records beside the weights."""

    base: str  # registry name or folder of the encoder it started from (its tokenizer)
    encoder_config: dict[str, Any]
    labels: list[str] = field(default_factory=lambda: [t.value for t in LABELS])
    temperature: float = 1.0
    max_length: int = 64
    lowercase: bool = True
    seed: int = 0
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)


class FineTunedModel(nn.Module):
    """Transformer encoder -> mean of token states (as sentence-transformers) -> Linear to 8."""

    def __init__(self, encoder: nn.Module, hidden: int, n_labels: int, dropout: float) -> None:
        super().__init__()
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.classify = nn.Linear(hidden, n_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        states = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(states.dtype)
        pooled = (states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return self.classify(self.dropout(pooled))


def artefact_path(settings: Settings) -> Path:
    return settings.classifier_dir / ARTEFACT_NAME


def _encoder_from_config(config_dict: dict[str, Any]) -> tuple[nn.Module, int]:
    from transformers import AutoConfig, AutoModel

    cfg = dict(config_dict)
    model_type = cfg.pop("model_type", None)
    if not model_type:
        raise UserError("classifier artefact: encoder config has no model_type")
    config = AutoConfig.for_model(model_type, **cfg)
    return AutoModel.from_config(config, add_pooling_layer=False), int(config.hidden_size)


def base_model(folder: Path, dropout: float) -> tuple[FineTunedModel, Any, dict[str, Any]]:
    """The pre-trained encoder in ``folder`` with a fresh head, its tokenizer and its config."""
    from transformers import AutoModel, AutoTokenizer

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


def save_artefact(path: Path, model: FineTunedModel, meta: FineTunedMeta) -> None:
    """Weights and metadata in one file, written atomically (temp name, then rename)."""
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tensors = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(tensors, str(tmp), metadata={"format": FORMAT, "meta": json.dumps(asdict(meta))})
    tmp.replace(path)


def read_meta(path: Path) -> FineTunedMeta:
    """Only the metadata (cheap): used by ``train --if-missing``."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
    except (SafetensorError, OSError) as exc:
        raise UserError(f"{path}: not a readable classifier artefact ({exc})") from exc
    if metadata.get("format") != FORMAT:
        raise UserError(
            f"{path}: not a fine-tuned typed-rag classifier (format {metadata.get('format')!r})"
        )
    meta = FineTunedMeta(**json.loads(metadata["meta"]))
    if meta.labels != [t.value for t in LABELS]:
        raise UserError(f"{path}: label order {meta.labels} differs from nf-cats order; retrain")
    return meta


def load_artefact(path: Path) -> tuple[FineTunedModel, FineTunedMeta]:
    """Rebuild the fine-tuned model from one file; a missing or foreign file is a UserError."""
    from safetensors.torch import load_file

    if not path.is_file():
        raise UserError(
            f"no fine-tuned question-type classifier at {path}; run `typed-rag classifier train` "
            "(the set-up step does), or set classifier.path to the folder that holds "
            f"{ARTEFACT_NAME}"
        )
    meta = read_meta(path)
    encoder, hidden = _encoder_from_config(meta.encoder_config)
    model = FineTunedModel(encoder, hidden, len(meta.labels), dropout=0.0)
    try:
        model.load_state_dict(load_file(str(path)))
    except RuntimeError as exc:
        raise UserError(f"{path}: weights do not match the recorded encoder: {exc}") from exc
    return model.eval(), meta


class FineTunedClassifier(TypeClassifier):
    """The fine-tuned encoder on the lower-cased question, temperature-scaled softmax."""

    name = "finetuned"

    def __init__(
        self,
        model: FineTunedModel,
        tokenizer: Any,
        meta: FineTunedMeta,
        batch_size: int = 64,
        device: str = "cpu",
    ) -> None:
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.meta = meta
        self.batch_size = batch_size
        self.device = device

    @classmethod
    def load(cls, settings: Settings) -> FineTunedClassifier:
        """The artefact in ``settings.classifier_dir`` and its base model's tokenizer."""
        from transformers import AutoTokenizer

        from typed_rag.models import ensure_model

        model, meta = load_artefact(artefact_path(settings))
        folder = ensure_model(settings, meta.base)
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(folder))
        except (OSError, ValueError) as exc:
            raise UserError(f"{folder}: cannot load the tokenizer of {meta.base!r}: {exc}") from exc
        c = settings.classifier
        return cls(model, tokenizer, meta, batch_size=c.batch_size, device=c.device)

    def logits(self, questions: Sequence[str]) -> np.ndarray:
        """Raw logits, shape ``(n, 8)``."""
        return logits_of(self.model, self.tokenizer, questions, self.meta.max_length,
                         self.batch_size, self.device)  # fmt: skip

    def predict_proba(self, questions: Sequence[str]) -> list[list[float]]:
        if not questions:
            return []
        return softmax(self.logits(questions), self.meta.temperature).tolist()


def _encode(tokenizer: Any, texts: Sequence[str], max_length: int) -> dict[str, torch.Tensor]:
    return tokenizer(
        [t.lower() for t in texts],
        padding=True,
        truncation=True,
        max_length=max_length,
        return_tensors="pt",
    )


def logits_of(
    model: FineTunedModel,
    tokenizer: Any,
    questions: Sequence[str],
    max_length: int,
    batch_size: int = 64,
    device: str = "cpu",
) -> np.ndarray:
    """Eval-mode logits; questions are batched by length so padding stays small."""
    model.eval()
    out = np.zeros((len(questions), len(LABELS)), dtype=np.float32)
    order = sorted(range(len(questions)), key=lambda i: len(questions[i]))
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            enc = _encode(tokenizer, [questions[i] for i in idx], max_length)
            z = model(enc["input_ids"].to(device), enc["attention_mask"].to(device))
            out[idx] = z.float().cpu().numpy()
    return out


@dataclass
class FineTuneResult:
    model: FineTunedModel
    best_epoch: int
    valid_logits: np.ndarray
    history: list[dict[str, float]]
    seconds: float
    cpu_seconds: float = 0.0  # CPU time of all threads: the wall time on an idle machine x threads


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
        import copy

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
    out = torch.zeros(ids.shape[0], ids.shape[1], int(model.classify.in_features))
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

    Returns the result, the tokenizer and the encoder config. Seeded: the same
    data, config and seed give the same weights on the same machine.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    try:
        torch.manual_seed(seed)
        model, tokenizer, enc_config = base_model(folder, config.dropout)
        t0, c0 = time.perf_counter(), time.process_time()
        res = _fine_tune(model, tokenizer, train_q, train_y, valid_q, valid_y, config, seed, echo)
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
    enc = _encode(tokenizer, list(train_q), config.max_length)
    ids, mask = enc["input_ids"], enc["attention_mask"]
    lengths = mask.sum(dim=1).tolist()
    labels = torch.from_numpy(y_tr)
    n_layers = len(_layers(model.encoder)) if config.train_layers else 0
    if config.train_layers and config.train_layers < n_layers:
        below = n_layers - config.train_layers
        t0 = time.perf_counter()
        inputs = _frozen_states(model, ids, mask, below)
        runner: nn.Module = _TopModel(model, config.train_layers)
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
    loss_fn = nn.CrossEntropyLoss(weight=class_weights(y_tr, config.class_weight_power))
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
        z = logits_of(model, tokenizer, valid_q, config.max_length, batch_size=128)
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
