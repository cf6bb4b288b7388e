"""GGUF to a bf16 safetensors folder, for engines that cannot read GGUF (vLLM on CPU).

transformers can dequantise a GGUF while loading it but refuses to save the
result (it still carries a GGUF quantisation config), so the weights are moved
into a fresh model built from the same config without that setting, and saved
from there, together with the tokenizer (and its chat template).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path

log = logging.getLogger(__name__)

DONE_FILE = ".typed-rag-converted.json"


def is_converted(dest: Path, source_id: str) -> bool:
    """True when ``dest`` holds a finished conversion of the source identified by ``source_id``."""
    try:
        data = json.loads((dest / DONE_FILE).read_text())
    except (OSError, ValueError):
        return False
    return data.get("source") == source_id


def gguf_to_hf(gguf: Path, dest: Path, source_id: str, dtype: str = "bfloat16") -> Path:
    """Convert ``gguf`` into a transformers folder at ``dest`` (atomically, via a temp folder)."""
    import torch  # heavy: torch
    from transformers import AutoModelForCausalLM, AutoTokenizer  # heavy: transformers

    torch_dtype = getattr(torch, dtype)
    start = time.perf_counter()
    log.info("converting %s to a %s safetensors folder (takes a minute or two)", gguf, dtype)
    loaded = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch_dtype
    )
    config = loaded.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    # Tied embeddings legitimately appear as "missing" lm_head weights.
    missing = [k for k in missing if not k.startswith("lm_head.")]
    if missing or unexpected:
        raise RuntimeError(
            f"weights do not match the config: missing={missing} unexpected={unexpected}"
        )
    del loaded
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)

    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    fresh.save_pretrained(str(tmp), safe_serialization=True)
    tokenizer.save_pretrained(str(tmp))
    (tmp / DONE_FILE).write_text(
        json.dumps({"source": source_id, "gguf": str(gguf), "dtype": dtype})
    )
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    log.info("converted in %.0f s: %s", time.perf_counter() - start, dest)
    return dest
