"""Speed of trained question-type classifiers: load time, ms per question one at a time and batched.

Each classifier is named ``label=kind:folder`` (a ``classifier.kind`` and its trained
folder) and timed on the first ``n`` NF-CATS valid questions after a warm-up batch
(``benchmarks/classifier_bench.py --speed``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from training.classifier.data import read_nfcats_csv, split_path
from typed_rag.classifier import build_classifier
from typed_rag.config import load_settings


def speed(specs: list[str], n: int, echo: Callable[[str], None]) -> dict[str, Any]:
    """ms per question of trained classifiers (``label=kind:folder``): one at a time, batched."""
    import torch  # heavy: torch (its thread count is recorded)

    questions = read_nfcats_csv(split_path("valid")).questions[:n]
    out: dict[str, Any] = {}
    for spec in specs:
        label, rest = spec.split("=", 1)
        kind, folder = rest.split(":", 1)
        settings = load_settings(None, **{"classifier.path": folder, "classifier.kind": kind})
        t0 = time.perf_counter()
        clf = build_classifier(settings)
        load_s = time.perf_counter() - t0
        clf.predict_proba(questions[:8])  # warm-up
        single = []
        for q in questions:
            t0 = time.perf_counter()
            clf.predict_proba([q])
            single.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        for start in range(0, len(questions), 64):
            clf.predict_proba(questions[start : start + 64])
        batched = (time.perf_counter() - t0) * 1000 / len(questions)
        out[label] = {
            "kind": kind,
            "folder": folder,
            "load_seconds": load_s,
            "ms_per_question_single_median": float(np.median(single)),
            "ms_per_question_single_p90": float(np.percentile(single, 90)),
            "ms_per_question_batched_64": batched,
            "n": len(questions),
            "torch_threads": torch.get_num_threads(),
            "load_avg": os.getloadavg(),
        }
        echo(f"speed {label}: single median {np.median(single):.1f} ms, p90 "
             f"{np.percentile(single, 90):.1f} ms, batched {batched:.2f} ms/question")  # fmt: skip
    return out
