"""LINKAGE scorer benchmark: speed, parse rate, and whether the scorer's ranks follow the gold grades.

For each Wiki-NFQA question the candidates are the question's own graded
answers that did not become references (one per label where the label group
has a spare answer), so their quality is known. A usable scorer ranks a
label-3 candidate above a label-0 one: the Spearman correlation between the
gold label and the scorer's MPR says how well it does, next to
verdicts/minute, tokens/second and the share of verdicts that never parsed.

    python benchmarks/eval_bench.py --questions 40 --scorer-model qwen2.5-coder-1.5b-instruct-q4km
    python benchmarks/eval_bench.py --backend openai --base-url http://127.0.0.1:8000/v1 --scorer-model m

Prints a table and writes JSON (``--out``, default benchmarks/results/eval_bench.json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from eval.linkage import LinkageItem, LinkageScorer, build_references
from eval.metrics import percentile_rank, spearman
from eval.wikinfqa import load_wikinfqa
from typed_rag.config import Settings, load_settings


def candidates(settings: Settings, n_questions: int, seed: int) -> list[tuple[LinkageItem, int]]:
    """(item, gold label) pairs: spare answers of each label, scored against the references."""
    records = load_wikinfqa(settings.eval.data_dir).records
    rng = random.Random(seed)
    rng.shuffle(records)
    out: list[tuple[LinkageItem, int]] = []
    for rec in records[:n_questions]:
        refs = build_references(rec, settings.eval.reference_seed)
        used = {r.text for r in refs}
        for label in (3, 2, 1, 0):
            spare = [
                a
                for a, lab in zip(rec.answers, rec.labels, strict=True)
                if lab == label and a not in used
            ]
            if spare:
                cand = rng.choice(spare)
                out.append(
                    (LinkageItem(f"{rec.question_id}/{label}", rec.question, refs, cand), label)
                )
    return out


async def run(settings: Settings, n_questions: int, batch: int, seed: int) -> dict[str, Any]:
    from typed_rag.engines import build_engine

    pairs = candidates(settings, n_questions, seed)
    engine = build_engine(settings)
    t0 = time.perf_counter()
    await engine.start()
    load_s = time.perf_counter() - t0
    scorer = LinkageScorer.from_settings(engine, settings)
    scores = []
    t0 = time.perf_counter()
    try:
        for start in range(0, len(pairs), batch):
            scores.extend(await scorer.score([item for item, _ in pairs[start : start + batch]]))
    finally:
        await engine.close()
    wall = time.perf_counter() - t0
    parsed = [(s, lab) for s, (_, lab) in zip(scores, pairs, strict=True) if s.rank is not None]
    labels = [float(lab) for _, lab in parsed]
    mprs = [percentile_rank(s.rank, s.n) for s, _ in parsed]  # type: ignore[arg-type]
    by_label = {
        lab: float(np.mean([m for m, g in zip(mprs, labels, strict=True) if g == lab]))
        for lab in sorted(set(labels))
    }
    completion = sum(s.completion_tokens for s in scores)
    prompt = sum(s.prompt_tokens for s in scores)
    return {
        "scorer": f"{settings.engine.backend}:{settings.engine.model}",
        "paper_off_by_one": settings.eval.paper_off_by_one,
        "questions": n_questions,
        "candidates": len(pairs),
        "load_s": load_s,
        "wall_s": wall,
        "verdicts_per_min": 60 * len(scores) / wall if wall else None,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "tokens_per_s": (prompt + completion) / wall if wall else None,
        "parsed_share": len(parsed) / len(scores) if scores else None,
        "mean_attempts": float(np.mean([s.attempts for s in scores])) if scores else None,
        "statuses": {
            k: sum(1 for s in scores if s.status == k) for k in {s.status for s in scores}
        },
        "spearman_label_vs_mpr": spearman(labels, mprs),
        "mpr_by_gold_label": {str(int(k)): v for k, v in by_label.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", help="TOML settings of the scorer")
    ap.add_argument("--backend", help="engine backend (default: settings)")
    ap.add_argument("--scorer-model", help="engine model (default: settings)")
    ap.add_argument("--base-url", help="OpenAI-compatible base URL")
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--paper-off-by-one", action="store_true")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/eval_bench.json"))
    args = ap.parse_args()
    settings = load_settings(
        args.config,
        **{
            "engine.backend": args.backend,
            "engine.model": args.scorer_model,
            "engine.base_url": args.base_url,
            "eval.paper_off_by_one": args.paper_off_by_one or None,
        },
    )
    res = asyncio.run(run(settings, args.questions, args.batch, args.seed))
    rows = [
        ("scorer", res["scorer"]),
        ("candidates (questions)", f"{res['candidates']} ({res['questions']})"),
        ("engine load (s)", f"{res['load_s']:.1f}"),
        ("scoring wall (s)", f"{res['wall_s']:.1f}"),
        ("verdicts / min", f"{res['verdicts_per_min']:.1f}"),
        ("tokens / s (in+out)", f"{res['tokens_per_s']:.1f}"),
        ("parsed share", f"{res['parsed_share']:.3f}"),
        ("mean attempts", f"{res['mean_attempts']:.2f}"),
        ("statuses", json.dumps(res["statuses"])),
        ("Spearman(gold label, MPR)", f"{res['spearman_label_vs_mpr']:.3f}"),
        (
            "MPR by gold label",
            json.dumps({k: round(v, 1) for k, v in res["mpr_by_gold_label"].items()}),
        ),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"| {'metric'.ljust(width)} | value |")
    print(f"|{'-' * (width + 2)}|-------|")
    for k, v in rows:
        print(f"| {k.ljust(width)} | {v} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
