"""Interactive latency on a CPU: in-process llama.cpp vs llama-server slots, and what a user waits for.

One run, two parts, so every ratio is measured under the same machine load:

1. Engines: the same batch of answer requests on the in-process llama.cpp
   engine (one request at a time) and on llama-server with 1/2/4/8 parallel
   slots (continuous batching): aggregate completion tokens/s and per-request
   latency (median, and the slowest).
2. Pipelines, per engine: rag / typed-rag / llm answering the same questions
   one at a time, each method on its own system and the methods taking turns
   question by question (latency p50 and its ratio to RAG's, also the median of
   the per-question ratios; for typed-rag the p50 of its first progress event,
   the type), then the whole set at once with ``answer_many`` (questions/minute,
   the batch-evaluation throughput).

    .venv/bin/python benchmarks/latency_bench.py --questions 3 --max-tokens 256

Prints tables and writes JSON (``--out``, default results/latency/summary.json) in
the issue's shape: ``{"methods": {...}, "eval_q_per_min": {...}, "engine": ...}``
for the chosen engine, with every measured engine under ``"engines"``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.engine_bench import LimitProbe, answer_request, engine_limit
from benchmarks.pipeline_bench import QUESTIONS
from eval.data.methods import answerer_for, mode_of, parse_methods
from typed_rag.config import Settings, load_settings, parse_overrides
from typed_rag.engines import build_engine
from typed_rag.engines.base import Engine
from typed_rag.progress import Progress
from typed_rag.result import Result
from typed_rag.system import TypedRAG

# Interactive questions: one per decomposed pipeline plus plain RAG's route.
PICK = ("REASON", "DEBATE", "INSTRUCTION", "EVIDENCE-BASED", "COMPARISON", "EXPERIENCE")


def pick_questions(n: int) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for qtype in PICK * 6:
        if len(out) >= n:
            break
        for t, q in QUESTIONS:
            if t == qtype and (t, q) not in out:
                out.append((t, q))
                break
    return out


def engine_settings(base: Settings, backend: str, slots: int = 1) -> Settings:
    return base.with_section("engine", backend=backend, server_slots=slots)


async def bench_engine(engine: Engine, requests: int, max_tokens: int) -> dict[str, Any]:
    """``requests`` answer requests sent together; tokens/s over the batch's wall time."""
    await engine.generate([answer_request(0, 8)])  # warm-up
    reqs = [answer_request(i, max_tokens) for i in range(requests)]
    done: list[float] = []
    start = time.perf_counter()
    tokens = 0
    async for _i, res in engine.generate_each(reqs):
        done.append(time.perf_counter() - start)
        tokens += res.completion_tokens
    wall = time.perf_counter() - start
    return {
        "requests": requests,
        "completion_tokens": tokens,
        "wall_s": wall,
        "tok_s": tokens / wall,
        "latency_p50_s": statistics.median(done),
        "latency_max_s": max(done),
    }


async def bench_pipelines(
    settings: Settings,
    questions: list[tuple[str, str]],
    methods: list[str],
    concurrency: int,
    batched: bool = True,
    warm: bool = True,
    probe: LimitProbe | None = None,
) -> dict[str, Any]:
    """Every method on its own system (its own engine and prompt cache, so none finds
    another's prompts cached), taking turns question by question, so a slow spell of a
    shared machine hits them alike; ``warm``: plan prompts prefilled first, as the server
    does at start; ``probe``: the bare loop's rates timed just before each answer, kept in
    its row as ``limit``."""
    out: dict[str, Any] = {"load_s": None, "methods": {}, "eval_q_per_min": {}, "warm": warm}
    systems: dict[str, TypedRAG] = {}
    rows: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    try:
        for method in methods:
            systems[method] = rag = TypedRAG.from_settings(settings)
            t0 = time.perf_counter()
            await rag.start()
            out["load_s"] = out["load_s"] or time.perf_counter() - t0
            if warm:
                await rag.warm_prompts()
            await rag.answer(questions[0][1], mode="llm", sampling={"max_tokens": 8})  # warm-up
        for qtype, text in questions:
            for method in methods:
                limit = probe.rates() if probe is not None else None
                rows[method].append(await time_one(systems[method], method, qtype, text))
                if limit is not None:
                    rows[method][-1]["limit"] = limit
                print(f"    {method} {qtype}: {rows[method][-1]['latency_s']:.1f} s", flush=True)
        for method in methods:
            summarise(method, rows[method], out)
            if batched and mode_of(method) != "llm":
                await bench_batched(systems[method], method, questions, concurrency, out)
    finally:
        for rag in systems.values():
            await rag.close()
    return out


def engine_counts(rag: TypedRAG) -> dict[str, float]:
    """The llama.cpp engine's evaluated tokens and seconds so far, its short lane's included
    (other engines keep none: an empty dict)."""
    contexts = [rag.engine, getattr(rag.engine, "_lane", None)]
    counts = [asdict(c.throughput) for c in contexts if hasattr(c, "throughput")]
    return {k: sum(c[k] for c in counts) for k in counts[0]} if counts else {}


async def time_one(rag: TypedRAG, method: str, qtype: str, text: str) -> dict[str, Any]:
    """One question answered alone and streamed, as the demo shows it: latency, first
    progress event (the type), first answer text, calls, tokens and the engine's rates."""
    answerer, mode = answerer_for(rag, method), mode_of(method)
    first_event: float | None = None
    first_text: float | None = None
    result: Result | None = None
    # Route by the classifier when there is one (its time is in the first
    # event), else force the type so the typed pipeline still runs.
    force = qtype if mode == "typed-rag" and rag.classifier is None else None
    before = engine_counts(rag)
    t = time.perf_counter()
    async for item in answerer.answer_stream(text, progress=True, mode=mode, force_type=force):
        if isinstance(item, Progress):
            first_event = item.elapsed_s if first_event is None else first_event
        elif isinstance(item, str):
            first_text = time.perf_counter() - t if first_text is None else first_text
        else:
            result = item
    latency = time.perf_counter() - t
    assert result is not None
    after = engine_counts(rag)
    return {
        "type": qtype,
        "routed_type": result.type,
        "latency_s": latency,
        "first_event_s": first_event,
        "first_text_s": first_text,
        "calls": len(result.calls),
        "completion_tokens": result.completion_tokens,
        "fallbacks": result.fallbacks,
        "engine": {k: after[k] - before[k] for k in after},
    }


def served_rates(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Prefilled and decoded tokens per second of engine time, over all ``rows``; with the
    probe's rates beside each row, their medians (``limit_*``) and the median per question
    of served / limit (``*_to_limit``), the ratio the machine's drift does not move."""
    total = {
        k: sum(r["engine"].get(k, 0) for r in rows)
        for k in ("prefill_tokens", "prefill_s", "decode_tokens", "decode_s")
    }
    if not total["prefill_s"] or not total["decode_s"]:
        return {}
    out = {
        "prefill_tok_s": total["prefill_tokens"] / total["prefill_s"],
        "decode_tok_s": total["decode_tokens"] / total["decode_s"],
    }
    probed = [r for r in rows if "limit" in r]
    for part in ("prefill", "decode") if probed else ():
        key = f"{part}_tok_s"
        out[f"limit_{key}"] = statistics.median(r["limit"][key] for r in probed)
        ratios = [
            r["engine"][f"{part}_tokens"] / r["engine"][f"{part}_s"] / r["limit"][key]
            for r in probed
            if r["engine"].get(f"{part}_s")
        ]
        if ratios:
            out[f"{part}_to_limit"] = statistics.median(ratios)
    return out


def summarise(method: str, rows: list[dict[str, Any]], out: dict[str, Any]) -> None:
    firsts = [r["first_event_s"] for r in rows if r["first_event_s"] is not None]
    texts = [r["first_text_s"] for r in rows if r["first_text_s"] is not None]
    out["methods"][method] = {
        "p50_s": statistics.median(r["latency_s"] for r in rows),
        "first_event_p50_s": statistics.median(firsts) if firsts else None,
        "first_text_p50_s": statistics.median(texts) if texts else None,
        "served": served_rates(rows),
        "questions": rows,
    }
    if mode_of(method) != "llm":
        # one at a time is the rate unless a batched pass replaces it (a lower bound)
        out["eval_q_per_min"][method] = 60 * len(rows) / sum(r["latency_s"] for r in rows)
        out["eval_q_per_min_source"] = "sequential"


async def bench_batched(
    rag: TypedRAG,
    method: str,
    questions: list[tuple[str, str]],
    concurrency: int,
    out: dict[str, Any],
) -> None:
    """The whole set at once with ``answer_many`` (the batch-evaluation rate)."""
    answerer, mode = answerer_for(rag, method), mode_of(method)
    forced = mode == "typed-rag" and rag.classifier is None
    t = time.perf_counter()
    await answerer.answer_many(
        [q for _, q in questions],
        mode=mode,
        force_type=[qtype if forced else None for qtype, _ in questions],
        concurrency=concurrency,
    )
    wall = time.perf_counter() - t
    out["eval_q_per_min"][method] = 60 * len(questions) / wall
    out["eval_q_per_min_source"] = "batched"
    print(f"    {method} batched: {wall:.1f} s", flush=True)


def ratios_to_rag(methods: dict[str, Any]) -> dict[str, Any]:
    """Each method's p50 over RAG's, and the median of its per-question ratios (paired)."""
    if "rag" not in methods:
        return {}
    rag = [r["latency_s"] for r in methods["rag"]["questions"]]
    out = {}
    for name, m in methods.items():
        mine = [r["latency_s"] for r in m["questions"]]
        out[name] = {
            "p50_ratio": m["p50_s"] / methods["rag"]["p50_s"],
            "per_question_median_ratio": statistics.median(
                a / b for a, b in zip(mine, rag, strict=True)
            ),
        }
    return out


def save(report: dict[str, Any], out: Path) -> None:
    """Written after each part, so a run cut short still leaves what it measured."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    report: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "loadavg_start": os.getloadavg(),
        "model": settings.engine.model,
        "max_tokens": settings.sampling.max_tokens,
        "sub_answer_max_tokens": settings.sampling.sub_answer_max_tokens,
        "top_k": settings.retrieval.top_k,
        "engine_threads": settings.engine.n_threads,
        "command": " ".join(sys.argv),
        "engine_bench": {},
        "engines": {},
    }
    if args.engine_requests:
        print(f"== engines: {args.engine_requests} requests of {args.engine_max_tokens} tokens")
        configs = [("llamacpp", 1)] + [("llama-server", s) for s in args.slots]
        for backend, slots in configs:
            name = backend if backend == "llamacpp" else f"llama-server-{slots}"
            engine = build_engine(engine_settings(settings, backend, slots))
            try:
                await engine.start()
                row = await bench_engine(engine, args.engine_requests, args.engine_max_tokens)
            finally:
                await engine.close()
            report["engine_bench"][name] = row
            save(report, args.out)
            print(
                f"  {name}: {row['tok_s']:.1f} tok/s, request p50 {row['latency_p50_s']:.1f} s",
                flush=True,
            )
    probe: LimitProbe | None = None
    if args.limit:
        print("== engine limit (a bare llama-cpp-python loop, the server's settings)", flush=True)
        engine: Any = build_engine(engine_settings(settings, "llamacpp"))
        probe = LimitProbe(
            engine.model_path,
            n_ctx=engine.n_ctx,
            n_threads=engine.n_threads,
            n_batch=engine.n_batch,
        )
        report["limit"] = engine_limit(probe)
        report["prefill_tok_s_limit"] = report["limit"]["prefill_tok_s_limit"]
        report["decode_tok_s_limit"] = report["limit"]["decode_tok_s_limit"]
        save(report, args.out)
        print(
            f"  prefill {report['limit']['prefill_tok_s']}, decode {report['limit']['decode_tok_s_after_prompt']}"
        )
    questions = pick_questions(args.questions)
    for spec in args.pipeline_engines if questions else []:  # --questions 0: the limit only
        backend, _, slots = spec.partition(":")
        name = backend if backend == "llamacpp" else f"llama-server-{slots or 4}"
        print(f"== pipelines on {name}: {len(questions)} questions", flush=True)
        cfg = engine_settings(settings, backend, int(slots or 4))
        report["engines"][name] = await bench_pipelines(
            cfg,
            questions,
            args.methods,
            concurrency=settings.engine.max_concurrency,
            batched=not args.no_batched,
            warm=not args.cold,
            probe=probe if backend == "llamacpp" else None,
        )
        save(report, args.out)
    if probe is not None:
        probe.close()
    report["loadavg_end"] = os.getloadavg()
    chosen = args.default_engine or next(iter(report["engines"]), None)
    if chosen in report["engines"]:
        run_ = report["engines"][chosen]
        report["engine"] = f"{chosen}:{settings.engine.model}"
        report["methods"] = {
            m: {k: v for k, v in r.items() if k != "questions"} for m, r in run_["methods"].items()
        }
        report["eval_q_per_min"] = run_["eval_q_per_min"]
        report["ratio_to_rag"] = ratios_to_rag(run_["methods"])
        served = run_["methods"].get("typed-rag", {}).get("served")
        if served:  # the rates inside typed requests, where every extra round shows
            report["prefill_tok_s_served"] = served["prefill_tok_s"]
            report["decode_tok_s_served"] = served["decode_tok_s"]
            for part in ("prefill", "decode"):
                if f"{part}_to_limit" in served:  # the limit as timed beside these answers
                    report[f"{part}_tok_s_limit"] = served[f"limit_{part}_tok_s"]
                    report[f"{part}_served_to_limit"] = served[f"{part}_to_limit"]
    return report


def print_tables(report: dict[str, Any]) -> None:
    if report["engine_bench"]:
        print("\n| engine | tok/s (all requests) | request p50 s | slowest s |")
        print("|---|---:|---:|---:|")
        for name, r in report["engine_bench"].items():
            print(
                f"| {name} | {r['tok_s']:.1f} | {r['latency_p50_s']:.1f} | {r['latency_max_s']:.1f} |"
            )
    if report["engines"]:
        print(
            "\n| engine | method | p50 s | first event p50 s | first text p50 s | q/min batched "
            "| prefill tok/s served | decode tok/s served | prefill / limit | decode / limit |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, run_ in report["engines"].items():
            for method, m in run_["methods"].items():
                served = m.get("served") or {}
                cells = [m["p50_s"], m["first_event_p50_s"], m.get("first_text_p50_s"),
                         run_["eval_q_per_min"].get(method), served.get("prefill_tok_s"),
                         served.get("decode_tok_s"), served.get("prefill_to_limit"),
                         served.get("decode_to_limit")]  # fmt: skip
                print(f"| {name} | {method} | " + " | ".join(_cell(c) for c in cells) + " |")
    if "limit" in report:
        lim = report["limit"]
        print(
            f"\nengine limit at the start: prefill {lim['prefill_tok_s_limit']:.1f} tok/s, "
            f"decode {lim['decode_tok_s_limit']:.1f} tok/s (the ratios: the probe beside each "
            "answer, median per question)"
        )


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", help="TOML settings file")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument(
        "--questions", type=int, default=3, help="pipeline questions (3; at most 36; 0: none)"
    )
    ap.add_argument("--methods", default="rag,typed-rag,llm")
    ap.add_argument("--max-tokens", type=int, help="sampling.max_tokens (default: settings)")
    ap.add_argument("--engine-requests", type=int, default=8, help="engine batch size (0: skip)")
    ap.add_argument("--engine-max-tokens", type=int, default=48)
    ap.add_argument("--slots", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument(
        "--pipeline-engines",
        nargs="*",
        default=["llamacpp", "llama-server:4"],
        help="engines for the pipeline part: llamacpp, llama-server:<slots>",
    )
    ap.add_argument(
        "--no-batched", action="store_true", help="skip the answer_many pass (q/min sequential)"
    )
    ap.add_argument(
        "--cold", action="store_true", help="skip the plan-prompt prefill the server does at start"
    )
    ap.add_argument(
        "--no-limit", dest="limit", action="store_false", help="skip the engine-limit loop"
    )
    ap.add_argument("--default-engine", help="which pipeline engine the summary reports")
    ap.add_argument("--out", type=Path, default=Path("results/latency/summary.json"))
    args = ap.parse_args(argv)
    args.methods = parse_methods(args.methods)
    overrides: dict[str, Any] = parse_overrides(args.set)
    if args.max_tokens:
        overrides["sampling.max_tokens"] = args.max_tokens
    settings = load_settings(args.config, **overrides)
    report = asyncio.run(run(args, settings))
    print_tables(report)
    save(report, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
