"""The original NF-CATS classifier (``Lurunchik/nf-cats``, Bolotova et al., SIGIR 2022).

The checkpoint is a RoBERTa encoder (fine-tuned from deepset/roberta-base-squad2)
whose first-token state goes through a pooler (dense + tanh), then a
feed-forward head 768 -> 768 -> 512 with Mish after each layer, then a
linear layer to the 8 types. Its state dict, as published with the model
card's ``RobertaNFQAClassification`` class, uses these names:

- ``embedder.*``: the ``RobertaModel`` (its own ``embedder.pooler.*`` is unused);
- ``pooler.dense.{weight,bias}``: the pooler that is used;
- ``feedforward.linear_layers.{i}.{weight,bias}``: the hidden layers;
- ``feedforward.classification_layer.{weight,bias}``: the output layer.

:func:`map_state_dict` renames them to this module's layout; the head sizes
are read from the weight shapes, so a small checkpoint of the same layout
(as the tests build) loads the same way. The model was trained on
lower-cased questions, so inputs are lower-cased here too.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from typed_rag.classifier.base import BATCH_SIZE, TypeClassifier
from typed_rag.config import Settings
from typed_rag.config_sections import NFCATS_CHECKPOINT
from typed_rag.errors import UserError
from typed_rag.types import LABELS, QuestionType

log = logging.getLogger(__name__)

DEFAULT_CHECKPOINT = NFCATS_CHECKPOINT
BASE_TOKENIZER = "deepset/roberta-base-squad2"  # the checkpoint's base model; its tokenizer
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "tokenizer_config.json")
MAX_LENGTH = 512  # tokens of a question: RoBERTa's limit; no NF-CATS question comes near it
_HIDDEN_RE = re.compile(r"^feedforward\.linear_layers\.(\d+)\.(weight|bias)$")


class NFCatsModel(nn.Module):
    """RoBERTa -> first-token pooler (tanh) -> [Linear, Mish]* -> Linear to the labels."""

    def __init__(self, config: Any, head_dims: Sequence[tuple[int, int]], n_labels: int) -> None:
        from transformers import RobertaModel  # heavy: transformers

        super().__init__()
        self.encoder = RobertaModel(config, add_pooling_layer=False)
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size)
        self.hidden_layers = nn.ModuleList(nn.Linear(i, o) for i, o in head_dims)
        self.act = nn.Mish()
        last = head_dims[-1][1] if head_dims else config.hidden_size
        self.classify = nn.Linear(last, n_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        states = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        x = torch.tanh(self.pooler(states[:, 0]))
        for layer in self.hidden_layers:
            x = self.act(layer(x))
        return self.classify(x)


def map_state_dict(
    state: Mapping[str, torch.Tensor],
) -> tuple[dict[str, torch.Tensor], list[tuple[int, int]]]:
    """Rename an nf-cats checkpoint's keys to :class:`NFCatsModel`'s; return the head dims.

    Raises :class:`UserError` naming keys that are missing or not understood.
    """
    out: dict[str, torch.Tensor] = {}
    hidden: dict[int, dict[str, torch.Tensor]] = {}
    unknown: list[str] = []
    for key, value in state.items():
        if key.endswith("position_ids") or key.startswith("embedder.pooler."):
            continue  # a buffer older transformers saved; the encoder's unused own pooler
        if key.startswith("embedder."):
            out["encoder." + key.removeprefix("embedder.")] = value
        elif key in ("pooler.dense.weight", "pooler.dense.bias"):
            out["pooler." + key.rsplit(".", 1)[1]] = value
        elif key.startswith("feedforward.classification_layer."):
            out["classify." + key.rsplit(".", 1)[1]] = value
        elif m := _HIDDEN_RE.match(key):
            hidden.setdefault(int(m.group(1)), {})[m.group(2)] = value
            out[f"hidden_layers.{m.group(1)}.{m.group(2)}"] = value
        else:
            unknown.append(key)
    if unknown:
        shown = ", ".join(sorted(unknown)[:8])
        raise UserError(f"not an nf-cats checkpoint: unexpected weights {shown}")
    for need in ("pooler.weight", "classify.weight"):
        if need not in out:
            raise UserError(f"not an nf-cats checkpoint: no weights for {need}")
    if sorted(hidden) != list(range(len(hidden))):
        raise UserError(f"nf-cats checkpoint: hidden layers {sorted(hidden)} are not 0..n-1")
    dims = [
        (int(hidden[i]["weight"].shape[1]), int(hidden[i]["weight"].shape[0]))
        for i in sorted(hidden)
    ]
    width = int(out["pooler.weight"].shape[0])
    for i, (d_in, _) in enumerate(dims):
        prev = width if i == 0 else dims[i - 1][1]
        if d_in != prev:
            raise UserError(f"nf-cats checkpoint: hidden layer {i} takes {d_in}, gets {prev}")
    return out, dims


def label_order(id2label: Mapping[int, str] | None, n: int) -> list[int]:
    """For each output column of the checkpoint, the index of its type in :data:`LABELS`."""
    names = [str((id2label or {}).get(i, "")) for i in range(n)]
    if n != len(LABELS):
        raise UserError(f"nf-cats checkpoint has {n} outputs, expected {len(LABELS)}")
    if all(not s or s.upper().startswith("LABEL_") for s in names):
        log.warning("checkpoint has no label names; assuming the nf-cats order")
        return list(range(n))
    try:
        order = [LABELS.index(QuestionType.parse(s)) for s in names]
    except ValueError as exc:
        raise UserError(f"nf-cats checkpoint: {exc}") from None
    if sorted(order) != list(range(n)):
        raise UserError(f"nf-cats checkpoint: labels {names} do not cover the 8 types once each")
    return order


def _read_weights(folder: Path) -> dict[str, torch.Tensor]:
    for name in WEIGHT_FILES:
        path = folder / name
        if not path.is_file():
            continue
        try:
            if name.endswith(".safetensors"):
                from safetensors.torch import load_file  # heavy: safetensors

                return load_file(str(path))
            return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # corrupt file: say which one
            raise UserError(f"{path}: cannot read the checkpoint weights: {exc}") from exc
    raise UserError(f"{folder}: no {' or '.join(WEIGHT_FILES)} in the nf-cats checkpoint folder")


def _fetch_hub(settings: Settings, repo_id: str, patterns: list[str]) -> Path:
    """Download a Hub repo into ``<models_dir>/hub`` (only where the Hub is reachable)."""
    try:
        from huggingface_hub import snapshot_download  # heavy: huggingface_hub

        return Path(
            snapshot_download(
                repo_id, cache_dir=str(settings.models_dir / "hub"), allow_patterns=patterns
            )
        )
    except Exception as exc:  # offline, unknown repo, auth: all the user's to fix
        raise UserError(
            f"cannot fetch {repo_id!r} from the Hugging Face Hub ({type(exc).__name__}: {exc}); "
            "download it where the Hub is reachable and set classifier.path to the local "
            "checkpoint folder (with its tokenizer files)"
        ) from exc


def resolve_source(settings: Settings, name: str, patterns: list[str]) -> Path:
    """A local folder as is, else a Hub id downloaded; anything else is a UserError."""
    local = Path(name).expanduser()
    if local.is_dir():
        return local
    if local.exists():
        raise UserError(f"{local}: expected a checkpoint folder, got a file")
    if re.fullmatch(r"[\w.-]+/[\w.-]+", name):
        return _fetch_hub(settings, name, patterns)
    raise UserError(f"{name}: no such folder, and not a Hugging Face Hub id (owner/name)")


class NFCatsClassifier(TypeClassifier):
    """The released nf-cats RoBERTa classifier, batched on one torch device."""

    name = "nfcats"

    def __init__(
        self,
        model: NFCatsModel,
        tokenizer: Any,
        columns: list[int],
        device: str = "cpu",
        batch_size: int = 32,
        max_length: int = MAX_LENGTH,
    ) -> None:
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.columns = columns
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length

    @classmethod
    def from_folder(
        cls,
        folder: Path,
        tokenizer_source: str | Path,
        settings: Settings,
    ) -> NFCatsClassifier:
        from transformers import AutoTokenizer, RobertaConfig  # heavy: transformers

        try:
            config = RobertaConfig.from_pretrained(str(folder))
        except (OSError, ValueError) as exc:
            raise UserError(f"{folder}: cannot read config.json of the checkpoint: {exc}") from exc
        state, dims = map_state_dict(_read_weights(folder))
        n_out = int(state["classify.weight"].shape[0])
        columns = label_order(config.id2label, n_out)
        model = NFCatsModel(config, dims, n_out)
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise UserError(
                f"{folder}: checkpoint does not fit its config: missing {missing[:5]}, "
                f"unexpected {unexpected[:5]}"
            )
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_source))
        except (OSError, ValueError) as exc:
            raise UserError(f"{tokenizer_source}: cannot load the tokenizer: {exc}") from exc
        return cls(model, tokenizer, columns, settings.classifier.device, BATCH_SIZE)

    @classmethod
    def load(cls, settings: Settings) -> NFCatsClassifier:
        """``classifier.path`` (folder or Hub id; default Lurunchik/nf-cats) and its tokenizer."""
        source = str(settings.classifier.path or DEFAULT_CHECKPOINT)
        folder = resolve_source(
            settings, source, ["config.json", "*.safetensors", "pytorch_model.bin", "*.txt"]
        )
        if not any((folder / f).is_file() for f in WEIGHT_FILES):
            raise UserError(
                f"{folder}: no {' or '.join(WEIGHT_FILES)} in the nf-cats checkpoint folder"
            )
        has_own = any((folder / f).is_file() for f in TOKENIZER_FILES)
        tok = str(folder) if has_own else BASE_TOKENIZER
        tok_folder = resolve_source(settings, tok, ["*.json", "*.txt"])
        return cls.from_folder(folder, tok_folder, settings)

    def predict_proba(self, questions: Sequence[str]) -> list[list[float]]:
        out = np.zeros((len(questions), len(LABELS)))
        for start in range(0, len(questions), self.batch_size):
            batch = [q.lower() for q in questions[start : start + self.batch_size]]
            enc = self.tokenizer(
                batch,
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            )
            with torch.inference_mode():
                logits = self.model(
                    enc["input_ids"].to(self.device), enc["attention_mask"].to(self.device)
                )
            probs = torch.softmax(logits.float(), dim=-1).cpu().numpy()
            out[start : start + len(batch)][:, self.columns] = probs
        return out.tolist()
