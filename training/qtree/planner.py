"""Training QPlanner: supervised fine-tuning on the best outlines, then DPO on judged pairs.

After the paper's sec. 4.1 and appendix F, with TRL and a LoRA adapter
(PEFT) instead of full fine-tuning, so a 1.5B model trains on one GPU:

1. SFT: prompt = the planner prompt for the conditioned question, target =
   the question's tree and its best-scored outline (loss on the target only);
   the adapter is merged into ``out_dir/sft``;
2. DPO: chosen = best outline, rejected = worst, skipping questions whose
   best and worst scored the same; a fresh adapter on the SFT model (its
   frozen weights are the reference), merged into ``out_dir/planner``.

``out_dir/planner`` is a plain transformers folder with ``planner.json``
(what the prompt asked for), loadable by :func:`planner.load_planner` or any
engine that serves HF models. Needs the ``planner`` extra (trl, peft).
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from training.qtree.summary import PlannerExample, load_examples
from typed_rag.qtree.planner import META, format_target
from typed_rag.qtree.prompts import planner_messages

log = logging.getLogger(__name__)


@dataclass
class PlannerTrainConfig:
    """Appendix F's schedule (1 epoch, cosine, 10% warm-up, DPO beta 0.01), LoRA learning rates."""

    with_tree: bool = True
    sft_epochs: float = 1.0
    dpo_epochs: float = 1.0
    sft_lr: float = 2e-4  # the paper's 2e-5 is for full fine-tuning; LoRA wants ~10x
    dpo_lr: float = 5e-6
    beta: float = 0.01
    batch_size: int = 4
    grad_accum: int = 2
    max_length: int = 2048
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    max_steps: int = -1  # > 0 caps the SFT stage (tests)
    dpo_max_steps: int = -1  # > 0 caps the DPO stage
    seed: int = 42
    dpo: bool = True


@dataclass
class TrainReport:
    sft_examples: int
    dpo_pairs: int
    sft_dir: str
    planner_dir: str
    sft_loss: float | None = None
    dpo_loss: float | None = None


def sft_rows(examples: list[PlannerExample], with_tree: bool) -> list[dict[str, Any]]:
    """Conversational prompt-completion rows (TRL computes the loss on the completion only)."""
    return [
        {
            "prompt": planner_messages(e.conditioned, with_tree),
            "completion": [
                {"role": "assistant", "content": format_target(e.tree, e.chosen, with_tree)}
            ],
        }
        for e in examples
        if e.tree or not with_tree
    ]


def dpo_rows(examples: list[PlannerExample], with_tree: bool) -> list[dict[str, Any]]:
    """Preference rows: the same tree, the best outline chosen over the worst."""
    rows = []
    for e in examples:
        if e.rejected is None or (with_tree and not e.tree):
            continue
        rows.append(
            {
                "prompt": planner_messages(e.conditioned, with_tree),
                "chosen": [{"role": "assistant", "content": format_target(e.tree, e.chosen, with_tree)}],
                "rejected": [{"role": "assistant", "content": format_target(e.tree, e.rejected, with_tree)}],
            }
        )  # fmt: skip
    return rows


def _lora(cfg: PlannerTrainConfig) -> Any:
    from peft import LoraConfig

    return LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )


def _common(
    cfg: PlannerTrainConfig, out: Path, epochs: float, lr: float, max_steps: int
) -> dict[str, Any]:
    import torch

    return {
        "output_dir": str(out),
        "num_train_epochs": epochs,
        "max_steps": max_steps,
        "learning_rate": lr,
        "lr_scheduler_type": "cosine",
        "warmup_steps": 0.1,  # a float below 1 is a ratio of the steps (transformers 5)
        "per_device_train_batch_size": cfg.batch_size,
        "gradient_accumulation_steps": cfg.grad_accum,
        "max_length": cfg.max_length,
        "seed": cfg.seed,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "bf16": torch.cuda.is_available() and torch.cuda.is_bf16_supported(),
        "use_cpu": not torch.cuda.is_available(),
    }


def _merge_and_save(trainer: Any, tokenizer: Any, dest: Path) -> None:
    """Fold the LoRA adapter into the weights and save a plain transformers folder."""
    model = trainer.model
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(dest), safe_serialization=True)
    tokenizer.save_pretrained(str(dest))


def _last_loss(trainer: Any) -> float | None:
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return float(losses[-1]) if losses else None


def train_planner(
    dataset_path: Path,
    base_model_path: Path,
    out_dir: Path,
    config: PlannerTrainConfig | None = None,
) -> TrainReport:
    """SFT then DPO on a QTREE build folder; returns where the planner is and what it saw."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

    cfg = config or PlannerTrainConfig()
    out = Path(out_dir)
    examples = load_examples(Path(dataset_path))
    sft = sft_rows(examples, cfg.with_tree)
    if not sft:
        raise ValueError(f"{dataset_path}: no judged outlines to train on")
    tokenizer = AutoTokenizer.from_pretrained(str(base_model_path))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    model = AutoModelForCausalLM.from_pretrained(str(base_model_path))
    trainer = SFTTrainer(
        model=model,
        args=SFTConfig(**_common(cfg, out / "sft-run", cfg.sft_epochs, cfg.sft_lr, cfg.max_steps)),
        train_dataset=Dataset.from_list(sft),
        processing_class=tokenizer,
        peft_config=_lora(cfg),
    )
    trainer.train()
    sft_dir = out / "sft"
    _merge_and_save(trainer, tokenizer, sft_dir)
    report = TrainReport(len(sft), 0, str(sft_dir), str(sft_dir), sft_loss=_last_loss(trainer))

    pairs = dpo_rows(examples, cfg.with_tree) if cfg.dpo else []
    final_dir = out / "planner"
    if pairs:
        model = AutoModelForCausalLM.from_pretrained(str(sft_dir))
        dpo = DPOTrainer(
            model=model,
            args=DPOConfig(
                beta=cfg.beta,
                **_common(cfg, out / "dpo-run", cfg.dpo_epochs, cfg.dpo_lr, cfg.dpo_max_steps),
            ),
            train_dataset=Dataset.from_list(pairs),
            processing_class=tokenizer,
            peft_config=_lora(cfg),
        )
        dpo.train()
        _merge_and_save(dpo, tokenizer, final_dir)
        report.dpo_pairs, report.dpo_loss = len(pairs), _last_loss(dpo)
    else:
        log.warning("no DPO pairs (best and worst tie everywhere): the planner is the SFT model")
        shutil.copytree(sft_dir, final_dir, dirs_exist_ok=True)
    report.planner_dir = str(final_dir)
    meta = {"with_tree": cfg.with_tree, "base_model": str(base_model_path), **asdict(cfg)}
    (final_dir / META).write_text(json.dumps(meta, indent=2) + "\n")
    (out / "train_report.json").write_text(json.dumps(asdict(report), indent=2) + "\n")
    return report
