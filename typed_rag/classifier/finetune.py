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
Fine-tuning (its hyper-parameters, the pre-trained encoder it starts from) is
:mod:`training.classifier.finetune`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from typed_rag.classifier.artefact import read_artefact, write_artefact
from typed_rag.classifier.base import BATCH_SIZE, TypeClassifier
from typed_rag.classifier.head import softmax
from typed_rag.classifier.lexical import TENSOR_PREFIX as LEXICAL
from typed_rag.classifier.lexical import LexicalPart, add_to_artefact
from typed_rag.config import Settings
from typed_rag.errors import UserError
from typed_rag.models import ensure_model
from typed_rag.types import LABELS

log = logging.getLogger(__name__)

ARTEFACT_NAME = "type_finetuned.safetensors"
FORMAT = "typed-rag/type-finetuned/1"


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
    # The lexical part joined to the encoder (``LexicalPart.meta()``), or None; its weights
    # are the artefact's ``lexical.*`` tensors.
    lexical: dict[str, Any] | None = None


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
    from transformers import AutoConfig, AutoModel  # heavy: transformers

    cfg = dict(config_dict)
    model_type = cfg.pop("model_type", None)
    if not model_type:
        raise UserError("classifier artefact: encoder config has no model_type")
    config = AutoConfig.for_model(model_type, **cfg)
    return AutoModel.from_config(config, add_pooling_layer=False), int(config.hidden_size)


def save_artefact(
    path: Path, model: FineTunedModel, meta: FineTunedMeta, lexical: LexicalPart | None = None
) -> None:
    """Weights and metadata in one file, written atomically (temp name, then rename); the
    lexical part's metadata replaces ``meta.lexical``."""
    tensors = dict(model.state_dict())
    fields = asdict(meta)
    add_to_artefact(lexical, tensors, fields)
    write_artefact(path, tensors, FORMAT, fields)


def read_meta(path: Path) -> FineTunedMeta:
    """Only the metadata (cheap): used by ``train --if-missing``."""
    fields, _ = read_artefact(path, FORMAT, "fine-tuned typed-rag classifier", tensors=False)
    return FineTunedMeta(**fields)


def load_artefact(path: Path) -> tuple[FineTunedModel, FineTunedMeta, LexicalPart | None]:
    """Rebuild the fine-tuned model (and its lexical part) from one file; a missing or foreign
    file is a UserError."""
    from safetensors.torch import load_file  # heavy: safetensors

    if not path.is_file():
        raise UserError(
            f"no fine-tuned question-type classifier at {path}; run `typed-rag classifier train` "
            "(the set-up step does), or set classifier.path to the folder that holds "
            f"{ARTEFACT_NAME}"
        )
    meta = read_meta(path)
    encoder, hidden = _encoder_from_config(meta.encoder_config)
    model = FineTunedModel(encoder, hidden, len(meta.labels), dropout=0.0)
    tensors = load_file(str(path))
    lexical = None
    try:
        model.load_state_dict({k: v for k, v in tensors.items() if not k.startswith(LEXICAL)})
        if meta.lexical is not None:
            lexical = LexicalPart.from_artefact(meta.lexical, tensors, LEXICAL, len(meta.labels))
    except RuntimeError as exc:
        raise UserError(f"{path}: weights do not match the recorded encoder: {exc}") from exc
    return model.eval(), meta, lexical


class FineTunedClassifier(TypeClassifier):
    """The fine-tuned encoder on the lower-cased question, temperature-scaled softmax; with a
    lexical part, the calibrated geometric mean of both, calibrated again."""

    name = "finetuned"

    def __init__(
        self,
        model: FineTunedModel,
        tokenizer: Any,
        meta: FineTunedMeta,
        batch_size: int = 64,
        device: str = "cpu",
        lexical: LexicalPart | None = None,
    ) -> None:
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.meta = meta
        self.batch_size = batch_size
        self.device = device
        self.lexical = lexical

    @classmethod
    def load(cls, settings: Settings) -> FineTunedClassifier:
        """The artefact in ``settings.classifier_dir`` and its base model's tokenizer."""
        from transformers import AutoTokenizer  # heavy: transformers

        model, meta, lexical = load_artefact(artefact_path(settings))
        folder = ensure_model(settings, meta.base)
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(folder))
        except (OSError, ValueError) as exc:
            raise UserError(f"{folder}: cannot load the tokenizer of {meta.base!r}: {exc}") from exc
        return cls(model, tokenizer, meta, BATCH_SIZE, settings.classifier.device, lexical)

    def logits(self, questions: Sequence[str]) -> np.ndarray:
        """Raw logits, shape ``(n, 8)``."""
        return logits_of(self.model, self.tokenizer, questions, self.meta.max_length,
                         self.batch_size, self.device)  # fmt: skip

    def predict_proba(self, questions: Sequence[str]) -> list[list[float]]:
        if not questions:
            return []
        p = softmax(self.logits(questions), self.meta.temperature)
        if self.lexical is not None:
            p = self.lexical.join(p, questions)
        return p.tolist()


def tokenize_questions(
    tokenizer: Any, texts: Sequence[str], max_length: int
) -> dict[str, torch.Tensor]:
    """Lower-cased questions as padded token tensors (the classifier reads lower case)."""
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
            enc = tokenize_questions(tokenizer, [questions[i] for i in idx], max_length)
            z = model(enc["input_ids"].to(device), enc["attention_mask"].to(device))
            out[idx] = z.float().cpu().numpy()
    return out
