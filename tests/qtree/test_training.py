"""QPlanner training end to end on a tiny random Llama on the CPU: SFT, DPO, load, plan.

The QTREE build comes from the fake engine; the base model is the 2-layer
test model of tests/engines. The SFT stage runs long enough at a high rate
to raise the likelihood of its targets well above the untrained base's, which the
reloaded planner must show: the whole path (data, TRL, LoRA merge, saving,
loading, the chat format, decoding) is exercised, not just "it ran".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engines.tiny_models import build_tiny_llama
from tests.qtree.helpers import hashed_score, qtree_responder, rule_following_outlines
from training.qtree.dataset import QTreeQuestion, build_qtree_dataset
from training.qtree.summary import load_examples
from typed_rag.engines.fake import FakeEngine
from typed_rag.qtree import load_planner
from typed_rag.qtree.planner import HFPlanner, format_target, read_meta

pytest.importorskip("trl")
pytest.importorskip("peft")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

QUESTIONS = [
    QTreeQuestion("a", "Tea: how is it made?"),
    QTreeQuestion("b", "Coffee: why is it bitter?"),
    QTreeQuestion(
        "c", "Bread: how to bake it?", conditioned_question="Bread: how to bake it? Skip history."
    ),
]


async def test_sft_then_dpo_gives_a_loadable_planner(tmp_path: Path) -> None:
    from training.qtree.planner import PlannerTrainConfig, train_planner

    data = tmp_path / "qtree"
    engine = FakeEngine(qtree_responder(outlines=rule_following_outlines), chooser=hashed_score)
    await build_qtree_dataset(engine, QUESTIONS, data)
    examples = load_examples(data)
    assert any(e.rejected for e in examples)  # DPO has pairs to train on

    base = build_tiny_llama(tmp_path / "base")
    cfg = PlannerTrainConfig(
        with_tree=False, max_steps=40, dpo_max_steps=2, sft_lr=3e-3, dpo_lr=1e-4, batch_size=3, grad_accum=1,
        lora_r=32, lora_alpha=64, lora_dropout=0.0, max_length=1024,
    )  # fmt: skip
    report = train_planner(data, base, tmp_path / "out", cfg)
    assert report.sft_examples == 3 and report.dpo_pairs >= 1
    assert report.sft_loss is not None and report.dpo_loss is not None

    folder = Path(report.planner_dir)
    assert (folder / "config.json").exists() and read_meta(folder)["with_tree"] is False
    planner = load_planner(str(folder))
    assert isinstance(planner, HFPlanner)
    # The saved, merged and reloaded planner prefers its training outline far more than
    # the untrained base does (a lost LoRA merge or a wrong chat format would not).
    base_planner = HFPlanner(base)
    base_planner.with_tree = False
    target = examples[0]
    reply = format_target(target.tree, target.chosen, with_tree=False)
    gain = planner.reply_logprob(target.conditioned, reply) - base_planner.reply_logprob(
        target.conditioned, reply
    )
    assert gain > 1.0, f"log-prob per token rose by only {gain:.2f}"
    # And it decodes: a short greedy reply comes back as text.
    planner.max_new_tokens = 32
    assert isinstance(planner.generate(target.conditioned), str)
