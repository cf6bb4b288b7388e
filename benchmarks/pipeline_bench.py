"""Pipeline cost and speed: LLM vs RAG vs Typed-RAG, one question at a time vs batched.

What a deployment pays for typing: each method answers the same questions
twice, first one after another with ``TypedRAG.answer`` (what one chat user
waits for), then all at once with ``TypedRAG.answer_many`` (what a batch
evaluation or a busy server sends the engine). Per method it prints the
median seconds per question, LLM calls, engine rounds and tokens per
question, questions/minute both ways and their ratio; per question type, the
Typed-RAG median latency and calls next to RAG's on the same questions.

Types are forced (``--classify`` uses the classifier instead), so every
typed pipeline is measured whatever the classifier would say.

    .venv/bin/python benchmarks/pipeline_bench.py --set engine.n_threads=2
    .venv/bin/python benchmarks/pipeline_bench.py --set engine.backend=vllm \\
        --set engine.model=qwen2.5-coder-0.5b-instruct-q4km

Prints tables and writes JSON (``--out``, default artifacts/bench/pipeline_bench.json).
vLLM starts worker processes with spawn, hence the ``__main__`` guard.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from eval.data.methods import METHODS, parse_methods
from typed_rag.config import Settings, load_settings, parse_overrides
from typed_rag.errors import UserError
from typed_rag.result import Result
from typed_rag.system import TypedRAG

# Two questions per typed pipeline, in the style of Wiki-NFQA / NF-CATS.
QUESTIONS: list[tuple[str, str]] = [
    ("EVIDENCE-BASED", "What is photosynthesis and where does it take place?"),
    ("EVIDENCE-BASED", "What does the International Monetary Fund do?"),
    ("COMPARISON", "What is the difference between a crocodile and an alligator?"),
    ("COMPARISON", "Is the violin harder to learn than the piano?"),
    ("EXPERIENCE", "What are the best ways to learn a second language as an adult?"),
    ("EXPERIENCE", "What is it like to live in Tokyo as a foreigner?"),
    ("REASON", "Why did the Roman Empire fall?"),
    ("REASON", "Why do leaves change colour in autumn?"),
    ("INSTRUCTION", "How do I bake sourdough bread at home?"),
    ("INSTRUCTION", "How do I start a vegetable garden?"),
    ("DEBATE", "Is nuclear power a good way to fight climate change?"),
    ("DEBATE", "Should homework be banned in primary schools?"),
    # more of each type, so a latency run of 24 questions has four per type
    ("EVIDENCE-BASED", "What is the function of the ozone layer?"),
    ("EVIDENCE-BASED", "What causes the northern lights?"),
    ("COMPARISON", "What is the difference between a virus and a bacterium?"),
    ("COMPARISON", "Is tea healthier than coffee?"),
    ("EXPERIENCE", "What is it like to hike the Appalachian Trail?"),
    ("EXPERIENCE", "What are good tips for a first trip to Iceland?"),
    ("REASON", "Why did the Titanic sink?"),
    ("REASON", "Why is the sky blue?"),
    ("INSTRUCTION", "How do I change a flat tyre on a bicycle?"),
    ("INSTRUCTION", "How do I brew beer at home?"),
    ("DEBATE", "Should voting be compulsory?"),
    ("DEBATE", "Is space exploration worth its cost?"),
    # two more of each (issue 79: the same 24 plus 12), so a run of 36 has six per type
    ("EVIDENCE-BASED", "What is the role of mitochondria in a cell?"),
    ("EVIDENCE-BASED", "What does a central bank do?"),
    ("COMPARISON", "What is the difference between weather and climate?"),
    ("COMPARISON", "Is a laptop or a desktop computer better for a student?"),
    ("EXPERIENCE", "What is it like to work night shifts?"),
    ("EXPERIENCE", "What are good ways to stay motivated when training for a marathon?"),
    ("REASON", "Why did the dinosaurs go extinct?"),
    ("REASON", "Why do people dream?"),
    ("INSTRUCTION", "How do I write a good cover letter?"),
    ("INSTRUCTION", "How do I train a puppy to sit?"),
    ("DEBATE", "Should zoos be abolished?"),
    ("DEBATE", "Is social media harmful to teenagers?"),
]


def _row(result: Result, qtype: str, wall_s: float | None) -> dict[str, Any]:
    return {
        "type": qtype,
        "routed_type": result.type,
        "latency_s": result.timings.get("total", 0.0),
        "wall_s": wall_s,
        "calls": len(result.calls),
        "rounds": result.rounds,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "fallbacks": list(result.fallbacks),
        "stages": {k: round(v, 3) for k, v in result.timings.items()},
    }


async def bench_method(
    rag: TypedRAG, method: str, questions: list[tuple[str, str]], forced: bool, concurrency: int
) -> dict[str, Any]:
    """One method: sequential answers (per-question latency), then one batched call."""
    types = [t if forced and method == "typed-rag" else None for t, _ in questions]
    texts = [q for _, q in questions]
    sequential: list[dict[str, Any]] = []
    seq_start = time.perf_counter()
    for (qtype, text), force in zip(questions, types, strict=True):
        t0 = time.perf_counter()
        result = await rag.answer(text, mode=method, force_type=force)
        sequential.append(_row(result, qtype, time.perf_counter() - t0))
    seq_wall = time.perf_counter() - seq_start
    print(f"  {method}: sequential {seq_wall:.1f} s", flush=True)

    t0 = time.perf_counter()
    results = await rag.answer_many(texts, mode=method, force_type=types, concurrency=concurrency)
    batch_wall = time.perf_counter() - t0
    batched = [_row(r, qtype, None) for r, (qtype, _) in zip(results, questions, strict=True)]
    print(f"  {method}: batched {batch_wall:.1f} s", flush=True)
    n = len(questions)
    return {
        "sequential_wall_s": seq_wall,
        "batched_wall_s": batch_wall,
        "questions_per_min_sequential": 60 * n / seq_wall,
        "questions_per_min_batched": 60 * n / batch_wall,
        "batched_over_sequential": seq_wall / batch_wall,
        "median_latency_s": statistics.median(r["wall_s"] for r in sequential),
        "calls_per_question": statistics.mean(r["calls"] for r in sequential),
        "rounds_per_question": statistics.mean(r["rounds"] for r in sequential),
        "tokens_per_question": statistics.mean(
            r["prompt_tokens"] + r["completion_tokens"] for r in sequential
        ),
        "sequential": sequential,
        "batched": batched,
    }


def by_type(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Typed-RAG's sequential latency and calls per type, next to RAG's on the same questions."""
    runs = report["methods"]
    if "typed-rag" not in runs:
        return []
    out = []
    for qtype in dict.fromkeys(r["type"] for r in runs["typed-rag"]["sequential"]):
        typed = [r for r in runs["typed-rag"]["sequential"] if r["type"] == qtype]
        row: dict[str, Any] = {
            "type": qtype,
            "questions": len(typed),
            "typed_median_s": statistics.median(r["wall_s"] for r in typed),
            "typed_calls": statistics.mean(r["calls"] for r in typed),
            "typed_rounds": statistics.mean(r["rounds"] for r in typed),
        }
        if "rag" in runs:
            rag = [r for r in runs["rag"]["sequential"] if r["type"] == qtype]
            row["rag_median_s"] = statistics.median(r["wall_s"] for r in rag)
            row["typed_over_rag"] = row["typed_median_s"] / row["rag_median_s"]
        out.append(row)
    return out


async def run(
    settings: Settings, methods: list[str], per_type: int, forced: bool, concurrency: int
) -> dict[str, Any]:
    picked: dict[str, int] = {}
    questions = []
    for qtype, text in QUESTIONS:
        if picked.get(qtype, 0) < per_type:
            picked[qtype] = picked.get(qtype, 0) + 1
            questions.append((qtype, text))
    rag = TypedRAG.from_settings(settings)
    t0 = time.perf_counter()
    await rag.start()
    load_s = time.perf_counter() - t0
    report: dict[str, Any] = {
        "engine": f"{settings.engine.backend}:{settings.engine.model}",
        "engine_threads": settings.engine.n_threads,
        "max_tokens": settings.sampling.max_tokens,
        "concurrency": concurrency,
        "types_forced": forced,
        "questions": len(questions),
        "machine": platform.platform(),
        "load_s": load_s,
        "methods": {},
    }
    try:
        # Warm-up outside the timings: first-call costs (JIT, caches, the reranker).
        await rag.answer(questions[0][1], mode="rag")
        for method in methods:
            report["methods"][method] = await bench_method(
                rag, method, questions, forced, concurrency
            )
    finally:
        await rag.close()
    report["by_type"] = by_type(report)
    return report


def print_tables(report: dict[str, Any]) -> None:
    print(
        f"\n{report['engine']} (threads {report['engine_threads']}), "
        f"{report['questions']} questions, max_tokens {report['max_tokens']}, "
        f"concurrency {report['concurrency']}"
    )
    print(
        "| method | median s/question | LLM calls/q | rounds/q | tokens/q "
        "| q/min one at a time | q/min batched | batched/sequential |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for method, m in report["methods"].items():
        print(
            f"| {method} | {m['median_latency_s']:.1f} | {m['calls_per_question']:.1f} "
            f"| {m['rounds_per_question']:.1f} | {m['tokens_per_question']:.0f} "
            f"| {m['questions_per_min_sequential']:.2f} | {m['questions_per_min_batched']:.2f} "
            f"| {m['batched_over_sequential']:.2f}x |"
        )
    if report["by_type"]:
        print("\n| type | n | Typed-RAG median s | RAG median s | Typed/RAG | calls | rounds |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for row in report["by_type"]:
            rag_s = f"{row['rag_median_s']:.1f}" if "rag_median_s" in row else "-"
            ratio = f"{row['typed_over_rag']:.2f}x" if "typed_over_rag" in row else "-"
            print(
                f"| {row['type']} | {row['questions']} | {row['typed_median_s']:.1f} | {rag_s} "
                f"| {ratio} | {row['typed_calls']:.1f} | {row['typed_rounds']:.1f} |"
            )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", help="TOML settings file")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma list of llm,rag,typed-rag")
    ap.add_argument("--per-type", type=int, default=2, choices=(1, 2), help="questions per type")
    ap.add_argument("--max-tokens", type=int, default=128, help="sampling.max_tokens (128)")
    ap.add_argument("--concurrency", type=int, help="answer_many concurrency (engine default)")
    ap.add_argument("--classify", action="store_true", help="route by the classifier")
    ap.add_argument("--out", type=Path, default=Path("artifacts/bench/pipeline_bench.json"))
    args = ap.parse_args(argv)
    try:
        methods = parse_methods(args.methods)
        overrides: dict[str, Any] = {"sampling.max_tokens": args.max_tokens}
        overrides.update(parse_overrides(args.set))
    except UserError as exc:
        ap.error(str(exc))
    settings = load_settings(args.config, **overrides)
    concurrency = args.concurrency or settings.engine.max_concurrency
    report = asyncio.run(run(settings, methods, args.per_type, not args.classify, concurrency))
    print_tables(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
