"""Which compute dtype the dense encoder runs in (``retrieval.dense_dtype``).

bfloat16 gives the same rankings as float32 (cosine >= 0.9997 between a passage's two
embeddings, docs/retrieval.md), so the choice is only about speed, and a CPU flag does not
decide it: with ``avx512_bf16`` on both, bfloat16 encoded 1.9-2.4x faster than float32 on an
AMD EPYC and 0.69x as fast on an Intel Xeon (``benchmarks/hybrid_bench.py --dtype-check``).
So ``auto`` on such a CPU times both once (a few seconds) and remembers the answer per CPU,
thread count, torch version and model in ``<home>/cache/dense-dtype.json``. An existing
dense index keeps the dtype it was encoded in (:func:`with_index_dtype`): its queries and a
continued build never re-probe.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from pathlib import Path
from typing import Any, TypeVar

from typed_rag.config import Settings
from typed_rag.config_sections import DenseDtype
from typed_rag.cpuinfo import cpu_name
from typed_rag.encoder import cpu_has_bf16, encode, load_sentence_model

log = logging.getLogger(__name__)
S = TypeVar("S", bound=Settings)

# Tokens per passage/query; longer text is truncated. 128, the length all-MiniLM-L6-v2 was
# trained at: the default corpus's ~100-word passages lose little, and the full index
# encodes 1.4x faster than at 256 (82.7 vs 60.5 passages/s on 2 cores).
MAX_LENGTH = 128
BATCH_SIZE = 64  # texts per encoder forward pass (passages when building, queries searching)
DTYPES = ("float32", "bfloat16")
# bfloat16 must be this much faster to be chosen: float32 is the exact one, and two timings
# of the same dtype differ by a few percent on a shared machine.
MIN_SPEEDUP = 1.1
PROBE_PASSAGES = 48
PROBE_WORDS = 100  # a corpus passage is ~100 words (DPR-style split)
_VOCAB = (
    "the of and in to was is for on as by with from his that at which he it an were are "
    "first new other its also city school war team season during after born known world "
    "river film album national century government north state population music church "
    "species leaves autumn chlorophyll engine light water energy family village history"
).split()
_chosen: dict[str, DenseDtype] = {}  # per process: repeated loads never re-read the cache file


def compute_dtype(settings: Settings) -> DenseDtype:
    """``retrieval.dense_dtype`` in force on the configured device (resolved settings hold
    it; declared ones apply ``RetrievalSettings.dense_dtype_with`` with this machine's facts)."""
    return settings.retrieval.dense_dtype_with(
        cuda_bf16=_cuda_bf16,
        cpu_bf16=lambda: cpu_has_bf16(),
        measured=lambda: faster_cpu_dtype(settings),
    )


def _cuda_bf16() -> bool:
    import torch  # heavy: torch

    return bool(torch.cuda.is_bf16_supported())


def with_index_dtype(settings: S, manifest: dict[str, Any] | None) -> S:
    """``settings`` with an ``auto`` dtype pinned to the one an existing dense index (its
    manifest) was encoded in, so its queries and a continued build match its passages.
    ``auto`` as declared: a resolved copy's dtype is that of ``dense_model``'s index, and
    each encoder that hybrid search fuses keeps its own index's."""
    declared = settings.declared().retrieval.dense_dtype
    built = (manifest or {}).get("compute_dtype")
    if declared != "auto" or built not in DTYPES or settings.retrieval.dense_dtype == built:
        return settings
    return settings.with_section("retrieval", dense_dtype=built)


def faster_cpu_dtype(settings: Settings) -> DenseDtype:
    """bfloat16 where it encodes at least ``MIN_SPEEDUP`` x faster than float32 on this CPU
    with the configured model and threads, else float32; measured once, then cached."""
    import torch

    r = settings.retrieval
    key = "|".join(
        [
            cpu_name(),
            f"threads={torch.get_num_threads()}",
            f"torch={torch.__version__}",
            r.dense_model,
            f"max_length={MAX_LENGTH}",
            f"batch={BATCH_SIZE}",
        ]
    )
    if key in _chosen:
        return _chosen[key]
    path = settings.home / "cache" / "dense-dtype.json"
    cache = _read(path)
    if cache.get(key, {}).get("dtype") in DTYPES:
        _chosen[key] = cache[key]["dtype"]
        return _chosen[key]
    speeds = probe_speeds(settings)
    dtype: DenseDtype = (
        "bfloat16" if speeds["bfloat16"] >= MIN_SPEEDUP * speeds["float32"] else "float32"
    )
    log.info(
        "dense encoder dtype: %s (passages/s here: bfloat16 %.1f, float32 %.1f; cached in %s)",
        dtype,
        speeds["bfloat16"],
        speeds["float32"],
        path,
    )
    cache[key] = {
        "dtype": dtype,
        "passages_per_s": speeds,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    _write(path, cache)
    _chosen[key] = dtype
    return dtype


def probe_speeds(settings: Settings, passages: int = PROBE_PASSAGES) -> dict[str, float]:
    """Passages per second of the dense model in each dtype on passage-length synthetic text,
    after one warm-up batch each."""
    import torch

    r = settings.retrieval
    rng = random.Random(0)
    texts = [" ".join(rng.choices(_VOCAB, k=PROBE_WORDS)) for _ in range(passages)]
    model = load_sentence_model(settings, r.dense_model, "cpu")
    model.max_seq_length = MAX_LENGTH
    model.eval()
    speeds: dict[str, float] = {}
    for dt in DTYPES:
        if dt == "bfloat16":
            model.to(torch.bfloat16)
        encode(model, texts[:BATCH_SIZE], BATCH_SIZE)
        t0 = time.perf_counter()
        encode(model, texts, BATCH_SIZE)
        speeds[dt] = round(len(texts) / max(time.perf_counter() - t0, 1e-9), 1)
    return speeds


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # no cache yet, or a damaged one: measure again
    return data if isinstance(data, dict) else {}


def _write(path: Path, data: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:  # a read-only home only costs the probe again next time
        log.warning("could not cache the dense dtype choice in %s: %s", path, exc)
