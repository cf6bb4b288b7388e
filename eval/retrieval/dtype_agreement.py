"""bfloat16 vs float32 dense encoding of an index's passages: speed and agreement.

Whether bfloat16 pays depends on the CPU, and whether it changes what is retrieved
depends on the model; :func:`dtype_check` measures both on a sample of a built index's
passages (``benchmarks/hybrid_bench.py --dtype-check N``). The runtime's own choice of
dtype is :mod:`typed_rag.retrieval.dense_dtype`.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from typed_rag.encoder import encode
from typed_rag.retrieval.dense import load_dense_encoder, top_k_inner_product
from typed_rag.retrieval.dense_dtype import BATCH_SIZE
from typed_rag.retrieval.store import PassageStore
from typed_rag.retrieval.text import encoder_text


def dtype_check(
    settings: Any, index_dir: Path, queries: Sequence[str], n: int, seed: int, rounds: int = 3
) -> dict:
    """bfloat16 vs float32 encoding of ``n`` sampled passages of ``index_dir``: speed, agreement
    of the exact top-10 for 100 questions, and cosine between the two embeddings of a passage.

    Whether bfloat16 pays depends on the CPU (faster on one AMD EPYC, slower on one Intel
    Xeon, both with avx512_bf16), so both dtypes are timed in alternating ``rounds`` after a
    warm-up batch each, and the median speed is reported with every round's."""
    store = PassageStore(index_dir)
    rng = random.Random(seed)
    docs = sorted(rng.sample(range(len(store)), min(n, len(store))))
    texts = [encoder_text(store.get(d)) for d in docs]
    store.close()
    qs = rng.sample(list(queries), min(100, len(queries)))
    batch = BATCH_SIZE
    models = {}
    for dt in ("bfloat16", "float32"):
        models[dt], _ = load_dense_encoder(settings.with_section("retrieval", dense_dtype=dt))
        encode(models[dt], texts[:batch], batch)  # warm-up: first-call allocation and kernels
    speeds: dict[str, list[float]] = {dt: [] for dt in models}
    emb: dict[str, tuple[Any, Any]] = {}
    for _ in range(max(1, rounds)):
        for dt, model in models.items():
            t0 = time.perf_counter()
            p = encode(model, texts, batch)
            speeds[dt].append(round(len(texts) / (time.perf_counter() - t0), 1))
            emb[dt] = (p.astype(np.float16), encode(model, qs, 64))
    out: dict[str, Any] = {"index": str(index_dir), "passages": len(texts), "queries": len(qs)}
    for dt, v in speeds.items():
        out[f"{dt}_passages_per_s"] = round(statistics.median(v), 1)
        out[f"{dt}_rounds"] = v
    out["bfloat16_speedup"] = round(
        out["bfloat16_passages_per_s"] / out["float32_passages_per_s"], 2
    )
    top = {dt: top_k_inner_product(p, q, 10)[0] for dt, (p, q) in emb.items()}
    overlap = [
        len(set(a) & set(b)) / 10
        for a, b in zip(top["float32"].tolist(), top["bfloat16"].tolist(), strict=True)
    ]
    cos = np.sum(emb["float32"][0].astype(np.float32) * emb["bfloat16"][0], axis=1)
    out.update(
        top10_overlap_mean=round(float(np.mean(overlap)), 4),
        top10_overlap_min=float(np.min(overlap)),
        top1_same=round(float(np.mean(top["float32"][:, 0] == top["bfloat16"][:, 0])), 4),
        cosine_mean=round(float(cos.mean()), 6),
        cosine_min=round(float(cos.min()), 6),
    )
    return out
