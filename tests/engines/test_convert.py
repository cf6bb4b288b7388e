"""GGUF -> bf16 safetensors conversion for vLLM (real model, ``-m slow``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from typed_rag.config import load_settings
from typed_rag.models import convert, ensure_model

pytestmark = pytest.mark.slow


def test_registry_gguf_converts_once_to_a_loadable_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import AutoConfig, AutoTokenizer

    settings = load_settings()
    folder = ensure_model(settings, "smollm2", fmt="hf")
    assert folder.name == "smollm2-135m-instruct-q4_1-hf"
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config
    assert AutoConfig.from_pretrained(folder).num_hidden_layers == 30
    assert (folder / "model.safetensors").stat().st_size > 200_000_000  # bf16, not Q4
    tokenizer = AutoTokenizer.from_pretrained(folder)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert prompt.rstrip().endswith("<|im_start|>assistant")

    def must_not_run(*_args: object, **_kw: object) -> Path:
        raise AssertionError("a finished conversion is reused")

    monkeypatch.setattr(convert, "gguf_to_hf", must_not_run)
    assert ensure_model(settings, "SmolLM2", fmt="hf") == folder
