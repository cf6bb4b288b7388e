"""LLM engine throughput: one stream, batches of 1/8/32, and the cost of JSON-schema decoding.

Runs each requested backend with its model, prints a table and writes JSON.
Tokens/s is completion tokens divided by wall time (for a batch: all of its
completion tokens over the wall time of the whole batch).

    python benchmarks/engine_bench.py                          # llama.cpp, CPU default model
    python benchmarks/engine_bench.py --backends llamacpp vllm --vllm-model qwen2.5-coder-0.5b-instruct-q4km
    python benchmarks/engine_bench.py --backends llamacpp llama-server --slots 4

benchmarks/latency_bench.py compares llama-server at 1/2/4/8 slots and the pipelines on top.

``--variant NAME=DIR[:GGUF]`` (twice or more) compares llama.cpp builds and model files
instead: the engine's limit (:func:`engine_limit`, the server's threads, batch and context)
timed in a fresh process per variant and round, the variants alternated round by round so
the machine's drift falls on each alike; DIR holds a ``llama_cpp`` package (an unpacked
wheel, put first on the path; ``-`` for the installed one), GGUF a model file (the default
model if left out). Medians and each variant's ratio to the first:

    python benchmarks/engine_bench.py --variant portable=- --variant native=/tmp/llama-native \
        --rounds 4 --out results/latency/builds.json

``--draft-cost`` times what speculative decoding would pay: one evaluation of 1, 2, 4 and 8
tokens after a RAG-sized context, against one decode step (:func:`draft_check_cost`):

    python benchmarks/engine_bench.py --draft-cost --out results/latency/draft-cost.json

``--lookup-replay RUN`` replays prompt-lookup speculative decoding on a run's stored answers
without building it (:func:`replay`): each answer's tokens are drafted from its question,
shown passages and own earlier text (the longest match of the text's last n-gram, its first
occurrence, as llama-cpp-python's ``LlamaPromptLookupDecoding`` drafts), and each check of d
drafted tokens is paid at the measured cost of evaluating d + 1 (``draft-cost.json``). The
answers were sampled at temperature 0.8, where a check takes a drafted token with the
probability the model gives it, so an exact match stands for the likely case; stored
answers are the finished text, close to what was decoded. Prefill is not counted:

    python benchmarks/engine_bench.py --lookup-replay results/dev/protocol \
        --out results/latency/lookup-acceptance.json

vLLM starts worker processes with spawn, hence the ``__main__`` guard.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from typed_rag.config import load_settings
from typed_rag.engines.base import ChatRequest, Engine
from typed_rag.models import ensure_model

QUESTIONS = [
    "Why do leaves change color in autumn?",
    "How do I bake sourdough bread at home?",
    "What are the differences between coffee and tea?",
    "Is nuclear power a good way to fight climate change?",
    "Why is Python popular for data science?",
    "How does a refrigerator keep food cold?",
    "What was it like to travel in Europe by train in the 1990s?",
    "Why do cats purr?",
]
PLAN_SCHEMA = {
    "type": "object",
    "properties": {
        "sub_queries": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 2,
            "maxItems": 4,
        }
    },
    "required": ["sub_queries"],
    "additionalProperties": False,
}


def answer_request(i: int, max_tokens: int) -> ChatRequest:
    question = QUESTIONS[i % len(QUESTIONS)]
    return ChatRequest(
        messages=[
            {"role": "system", "content": "You are a helpful assistant. Answer in a paragraph."},
            {"role": "user", "content": question},
        ],
        max_tokens=max_tokens,
        seed=1000 + i,
    )


def plan_request(i: int, max_tokens: int, schema: bool) -> ChatRequest:
    question = QUESTIONS[i % len(QUESTIONS)]
    return ChatRequest(
        messages=[
            {
                "role": "system",
                "content": "Split the question into 2 to 4 short search queries. "
                'Reply with JSON: {"sub_queries": ["...", "..."]}.',
            },
            {"role": "user", "content": question},
        ],
        max_tokens=max_tokens,
        seed=2000 + i,
        json_schema=PLAN_SCHEMA if schema else None,
    )


def _valid_plan(text: str) -> bool:
    try:
        data = json.loads(text)
    except ValueError:
        return False
    subs = data.get("sub_queries") if isinstance(data, dict) else None
    return isinstance(subs, list) and 2 <= len(subs) <= 4 and all(isinstance(s, str) for s in subs)


async def bench_engine(
    engine: Engine, batches: list[int], max_tokens: int, plan_max_tokens: int
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    start = time.perf_counter()
    await engine.start()
    out["load_s"] = time.perf_counter() - start
    await engine.generate([answer_request(0, 4)])  # warm-up

    # One stream: time to first token and tokens/s.
    start = time.perf_counter()
    first = None
    result = None
    async for delta in engine.stream(answer_request(1, max_tokens)):
        if first is None and delta.text:
            first = time.perf_counter() - start
        if delta.result is not None:
            result = delta.result
    wall = time.perf_counter() - start
    assert result is not None
    out["stream"] = {
        "ttft_s": first,
        "wall_s": wall,
        "completion_tokens": result.completion_tokens,
        "tok_s": result.completion_tokens / wall,
    }

    out["batch"] = {}
    for size in batches:
        reqs = [answer_request(i, max_tokens) for i in range(size)]
        start = time.perf_counter()
        results = await engine.generate(reqs)
        wall = time.perf_counter() - start
        tokens = sum(r.completion_tokens for r in results)
        out["batch"][str(size)] = {
            "wall_s": wall,
            "completion_tokens": tokens,
            "tok_s": tokens / wall,
            "mean_latency_s": sum(r.latency_s for r in results) / len(results),
        }
        print(
            f"  batch {size}: {tokens / wall:.1f} tok/s ({tokens} tokens in {wall:.1f} s)",
            flush=True,
        )

    out["json"] = {}
    for schema in (False, True):
        reqs = [plan_request(i, plan_max_tokens, schema) for i in range(8)]
        start = time.perf_counter()
        results = await engine.generate(reqs)
        wall = time.perf_counter() - start
        tokens = sum(r.completion_tokens for r in results)
        out["json"]["with_schema" if schema else "without_schema"] = {
            "wall_s": wall,
            "completion_tokens": tokens,
            "tok_s": tokens / wall,
            "valid_plans": sum(_valid_plan(r.text) for r in results),
            "truncated": sum(r.finish_reason == "length" for r in results),
            "of": len(results),
        }
    return out


LIMIT_TEXT = " ".join(
    f"Passage {i}: the river town number {i} keeps a stone bridge, a market on Fridays "
    f"and a library that opened in {1800 + i}."
    for i in range(200)
)


class LimitProbe:
    """The engine's own rates, a bare loop over llama-cpp-python with the server's settings,
    kept loaded so they can be timed beside each request: this machine's speed drifts by
    more than the gap between served and bare rates (results/latency/README.md), so a
    limit timed once at the start says little about a question answered 40 minutes later.

    A probe (:meth:`rates`) re-evaluates the last ``block`` tokens of a ``context``-token
    prompt (prefill tokens/s at the offset a RAG prompt reaches) and decodes ``decode``
    greedy tokens after it; about 4 s on 2 cores."""

    def __init__(
        self, model_path: Path, *, n_ctx: int, n_threads: int, n_batch: int, context: int = 768
    ) -> None:
        from typed_rag.engines.llamacpp_model import load_gguf

        self.llm, _ = load_gguf(model_path, n_ctx=n_ctx, n_threads=n_threads, n_batch=n_batch)
        self.model_path = model_path
        self.n_threads, self.n_batch = n_threads, n_batch
        self.ids = self.llm.tokenize(LIMIT_TEXT.encode())
        assert len(self.ids) >= 1024, "LIMIT_TEXT is shorter than the largest prompt"
        self.context = context
        self.llm.reset()
        self.llm.eval(self.ids[:context])  # the context every probe starts from

    def prefill(self, n: int) -> float:
        """Prompt tokens/s of ``n`` tokens evaluated from an empty cache."""
        self.llm.reset()
        t = time.perf_counter()
        self.llm.eval(self.ids[:n])
        return n / (time.perf_counter() - t)

    def decode(self, after: int, tokens: int) -> float:
        """Greedy tokens/s after an ``after``-token prompt."""
        self.llm.reset()
        self.llm.eval(self.ids[:after])
        return self._decode(tokens)

    def _decode(self, tokens: int) -> float:
        t = time.perf_counter()
        for _ in range(tokens):
            self.llm.eval([self.llm.sample(temp=0.0)])
        return tokens / (time.perf_counter() - t)

    def rates(self, block: int = 128, decode: int = 32) -> dict[str, float]:
        """Prefill and decode tokens/s now, at the probe's context length."""
        llm, start = self.llm, self.context - block
        llm.n_tokens = start
        llm._ctx.kv_cache_seq_rm(0, start, -1)
        t = time.perf_counter()
        llm.eval(self.ids[start : self.context])
        prefill = block / (time.perf_counter() - t)
        out = {"prefill_tok_s": prefill, "decode_tok_s": self._decode(decode)}
        self._back_to_context()
        return out

    def step_s(self, tokens: int, repeats: int = 6) -> float:
        """Median seconds of one evaluation of ``tokens`` tokens after the probe's context:
        one decode step (1), or the check of a speculative draft (1 + drafted tokens)."""
        llm, times = self.llm, []
        for _ in range(repeats):
            t = time.perf_counter()
            llm.eval(self.ids[self.context : self.context + tokens])
            times.append(time.perf_counter() - t)
            self._back_to_context()
        return statistics.median(times)

    def _back_to_context(self) -> None:
        """Drop what was evaluated after the probe's context, so the next probe starts there."""
        self.llm.n_tokens = self.context
        self.llm._ctx.kv_cache_seq_rm(0, self.context, -1)

    def close(self) -> None:
        self.llm.close()


def draft_check_cost(probe: LimitProbe, sizes: tuple[int, ...] = (1, 2, 4, 8)) -> dict[str, Any]:
    """What speculative decoding would pay on this machine: the seconds of evaluating 1, 2,
    4 and 8 tokens in one step after a RAG-sized context, and each against one decode step.
    A draft of k-1 tokens gains only when more than (cost(k) - 1) of them are accepted per
    step on average."""
    seconds = {str(k): probe.step_s(k) for k in sizes}
    return {
        "context": probe.context,
        "step_s": seconds,
        "cost_vs_one_token": {k: v / seconds["1"] for k, v in seconds.items()},
    }


# Prompt lookup (--lookup-replay): drafted tokens per check, and the (least, most) tokens of
# the matched n-gram (llama-cpp-python's rule is 1-2).
LOOKUP_DRAFTS = (1, 3, 7)
LOOKUP_NGRAMS = ((1, 2), (1, 3), (2, 3), (3, 4))


def step_cost(costs: dict[int, float]) -> Callable[[int], float]:
    """Cost of evaluating ``n`` tokens in one step, in decode steps, linear between the
    measured sizes (and beyond the largest, at the largest's rate per token)."""
    sizes = sorted(costs)

    def cost(n: int) -> float:
        if n in costs:
            return costs[n]
        hi = next((s for s in sizes if s > n), None)
        if hi is None:
            return costs[sizes[-1]] * n / sizes[-1]
        lo = max(s for s in sizes if s < n)
        return costs[lo] + (costs[hi] - costs[lo]) * (n - lo) / (hi - lo)

    return cost


class NgramIndex:
    """The text so far and where each of its n-grams (n <= ``max_ngram``) first ends."""

    def __init__(self, max_ngram: int, min_ngram: int = 1) -> None:
        self.max_ngram, self.min_ngram = max_ngram, min_ngram
        self.tokens: list[int] = []
        self.first: dict[tuple[int, ...], int] = {}

    def extend(self, tokens: Sequence[int]) -> None:
        for t in tokens:
            self.tokens.append(t)
            end = len(self.tokens)
            for n in range(1, min(self.max_ngram, end) + 1):
                self.first.setdefault(tuple(self.tokens[end - n : end]), end)

    def draft(self, size: int) -> list[int]:
        """What followed the first occurrence of the text's last n-gram, the longest n that
        occurred before (llama-cpp-python's rule, which has ``min_ngram`` 1), at most ``size``
        tokens; [] when none."""
        length = len(self.tokens)
        for n in range(min(self.max_ngram, length - 1), self.min_ngram - 1, -1):
            end = self.first.get(tuple(self.tokens[length - n :]))
            if end is not None and end < length - n:
                return self.tokens[end : min(end + size, length)]
        return []


def replay(
    prompt: Sequence[int],
    answer: Sequence[int],
    ngrams: tuple[int, int],
    draft: int,
    cost: Callable[[int], float],
) -> dict[str, float]:
    """Decode steps, their cost and the drafted and accepted tokens of one answer, drafting
    from matches of ``ngrams`` (least, most) tokens."""
    i = steps = drafted = accepted = 0
    paid = 0.0
    seen = NgramIndex(ngrams[1], ngrams[0])
    seen.extend(prompt)
    while i < len(answer):
        proposal = seen.draft(draft)
        a = 0
        while a < len(proposal) and i + a < len(answer) and proposal[a] == answer[i + a]:
            a += 1
        got = min(a + 1, len(answer) - i)
        paid += cost(len(proposal) + 1) if proposal else 1.0
        steps += 1
        drafted += len(proposal)
        accepted += a
        seen.extend(answer[i : i + got])
        i += got
    return {"tokens": len(answer), "steps": steps, "cost": paid, "drafted": drafted,
            "accepted": accepted}  # fmt: skip


def load_answers(run: Path, methods: Sequence[str]) -> list[dict[str, Any]]:
    """The run's non-empty answers of ``methods``."""
    from eval.runs.runner import ANSWERS
    from eval.store import read_jsonl

    rows = read_jsonl(run / ANSWERS)
    return [r for r in rows if r["method"] in methods and (r.get("answer") or "").strip()]


def lookup_replay(run: Path, methods: list[str], costs_path: Path) -> dict[str, Any]:
    """Prompt lookup replayed on ``run``'s stored answers (:func:`replay`), per method,
    route, matched n-gram sizes and draft size."""
    from llama_cpp import Llama

    from cli.lab.eval_papers import index_lookup
    from eval.grounding.run import shown_passages

    settings = load_settings()
    answers = load_answers(run, methods)
    texts = shown_passages(answers, index_lookup(settings))
    model = Llama(model_path=str(ensure_model(settings, settings.engine.model)),
                  vocab_only=True, verbose=False)  # fmt: skip

    def tokens(text: str) -> list[int]:
        return model.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    costs = json.loads(costs_path.read_text())["cost_vs_one_token"]
    cost = step_cost({int(k): float(v) for k, v in costs.items()})
    groups: dict[tuple[str, str, tuple[int, int], int], list[dict[str, float]]]
    groups = defaultdict(list)
    for row in answers:
        shown = [texts.get(str(p["id"])) for p in row["result"].get("passages") or []]
        prompt = tokens(
            row["question"] + "\n" + "\n\n".join(f"{p['title']}\n{p['text']}" for p in shown if p)
        )
        answer = tokens(row["answer"])
        route = row["route"] if row["method"] == "typed-rag" else "all"
        for n in LOOKUP_NGRAMS:
            for d in LOOKUP_DRAFTS:
                r = replay(prompt, answer, n, d, cost)
                groups[(row["method"], route, n, d)].append(r)
                if route != "all":
                    groups[(row["method"], "all", n, d)].append(r)
    rows = []
    for (method, route, n, d), rs in sorted(groups.items()):
        drafted = sum(r["drafted"] for r in rs)
        rows.append({
            "method": method, "route": route, "ngram": f"{n[0]}-{n[1]}", "draft": d,
            "answers": len(rs), "tokens_median": statistics.median(r["tokens"] for r in rs),
            "accepted_of_drafted": sum(r["accepted"] for r in rs) / drafted if drafted else 0.0,
            "tokens_per_step": sum(r["tokens"] for r in rs) / sum(r["steps"] for r in rs),
            "decode_speedup_median": statistics.median(r["tokens"] / r["cost"] for r in rs),
            "decode_speedup_total": sum(r["tokens"] for r in rs) / sum(r["cost"] for r in rs),
        })  # fmt: skip
    return {"run": str(run), "costs": str(costs_path), "rows": rows}


def engine_limit(
    probe: LimitProbe, prompts: tuple[int, ...] = (256, 1024), decode_tokens: int = 128
) -> dict[str, Any]:
    """The engine's rates at the start of a run: each prompt size evaluated from an empty
    cache (prefill tokens/s), then greedy decoding of ``decode_tokens`` after a short and
    after the longest prompt; the best of each."""
    probe.llm.reset()
    probe.llm.eval(probe.ids[:16])  # warm-up: the first evaluation pays one-time costs
    prefill = {str(n): probe.prefill(n) for n in prompts}
    decode = {str(n): probe.decode(n, decode_tokens) for n in (32, max(prompts))}
    probe.llm.reset()
    probe.llm.eval(probe.ids[: probe.context])
    return {
        "n_threads": probe.n_threads,
        "n_batch": probe.n_batch,
        "prefill_tok_s": prefill,
        "decode_tok_s_after_prompt": decode,
        "prefill_tok_s_limit": max(prefill.values()),
        "decode_tok_s_limit": max(decode.values()),
    }


def greedy_texts(llm: Any, tokens: int = 64) -> list[str]:
    """Greedy continuations of a short prompt per question: two builds whose kernels round
    alike give the same text (a check that a faster build answers as the other does)."""
    texts = []
    for question in QUESTIONS:
        llm.reset()
        llm.eval(llm.tokenize(f"Question: {question}\nAnswer:".encode()))
        out = []
        for _ in range(tokens):
            token = llm.sample(temp=0.0)
            if token == llm.token_eos():
                break
            out.append(token)
            llm.eval([token])
        texts.append(llm.detokenize(out).decode("utf-8", errors="replace"))
    return texts


def server_probe(model: str = "-") -> LimitProbe:
    """A probe with the server's engine settings, on ``model`` ("-": the server's model)."""
    from typed_rag.config_resolve import resolve_settings
    from typed_rag.engines import build_engine

    settings = resolve_settings(load_settings().with_section("engine", backend="llamacpp"))
    engine: Any = build_engine(settings)
    path = Path(model) if model != "-" else engine.model_path
    return LimitProbe(path, n_ctx=engine.n_ctx, n_threads=engine.n_threads, n_batch=engine.n_batch)


def limit_worker(model: str) -> dict[str, Any]:
    """One variant's limit in this process (``--limit-worker``): the engine's own rates with
    the server's settings, the CPU features the loaded llama.cpp was built for, and the
    greedy texts of :func:`greedy_texts`."""
    import llama_cpp  # heavy: llama_cpp, the variant's own

    probe = server_probe(model)
    path = probe.model_path
    try:
        limit = engine_limit(probe)
        texts = greedy_texts(probe.llm)
    finally:
        probe.close()
    features = llama_cpp.llama_print_system_info().decode()
    return {**limit, "model": path.name, "llama_cpp": str(Path(llama_cpp.__file__).parent),
            "system_info": features, "greedy_texts": texts}  # fmt: skip


def compare_variants(variants: list[str], rounds: int) -> dict[str, Any]:
    """Each ``NAME=DIR[:GGUF]`` variant's limit, one fresh process per variant and round,
    alternated; the median per variant and its ratio to the first variant's."""
    parsed = []
    for spec in variants:
        name, _, rest = spec.partition("=")
        folder, _, model = rest.partition(":")
        parsed.append((name, folder or "-", model or "-"))
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in parsed}
    for r in range(rounds):
        for name, folder, model in parsed:
            env = dict(os.environ)
            if folder != "-":
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [folder, env.get("PYTHONPATH")]))
            proc = subprocess.run(
                [sys.executable, __file__, "--limit-worker", model],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            runs[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            last = runs[name][-1]
            print(f"round {r + 1} {name}: prefill {last['prefill_tok_s_limit']:.1f} tok/s, "
                  f"decode {last['decode_tok_s_limit']:.1f} tok/s", flush=True)  # fmt: skip
    first = parsed[0][0]
    summary: dict[str, Any] = {}
    for name in runs:
        med = {k: statistics.median(run[k] for run in runs[name])
               for k in ("prefill_tok_s_limit", "decode_tok_s_limit")}  # fmt: skip
        texts = runs[name][0]["greedy_texts"]
        same = sum(a == b for a, b in zip(texts, runs[first][0]["greedy_texts"], strict=True))
        summary[name] = {**med, "model": runs[name][0]["model"],
                         "system_info": runs[name][0]["system_info"],
                         "greedy_texts_same_as_" + first: f"{same}/{len(texts)}"}  # fmt: skip
    for name in runs:
        for k in ("prefill_tok_s_limit", "decode_tok_s_limit"):
            summary[name][k.replace("_limit", "_vs_" + first)] = round(
                summary[name][k] / summary[first][k], 3
            )
    return {"rounds": rounds, "variants": summary, "runs": runs}


def build(backend: str, model: str, settings: Any, threads: int | None, slots: int = 4) -> Engine:
    if backend == "llamacpp":
        from typed_rag.engines.llamacpp import LlamaCppEngine

        return LlamaCppEngine(
            ensure_model(settings, model, fmt="gguf"),
            n_ctx=4096,
            n_threads=threads,
            model_name=model,
        )
    if backend == "llama-server":
        from typed_rag.engines.llama_server import LlamaServerEngine, find_binary

        return LlamaServerEngine(
            ensure_model(settings, model, fmt="gguf"),
            binary=find_binary(settings.engine.server_bin, settings.home),
            slots=slots,
            n_ctx=4096,
            n_threads=threads,
            model_name=model,
            log_dir=settings.home / "logs",
        )
    if backend == "vllm":
        from typed_rag.engines.vllm_engine import VllmEngine

        return VllmEngine(
            str(ensure_model(settings, model, fmt="hf")),
            served_name=model,
            max_model_len=4096,
            enforce_eager=True,
        )
    raise SystemExit(f"unknown backend {backend!r}")


def print_table(report: dict[str, Any], batches: list[int]) -> None:
    head = ["backend", "model", "load s", "stream tok/s", "ttft s"]
    head += [f"batch {b} tok/s" for b in batches]
    head += ["json off tok/s", "json on tok/s", "json on valid (cut at max)"]
    rows = [head]
    for name, run in report["runs"].items():
        backend, model = name.split(":", 1)
        js = run["json"]
        rows.append(
            [
                backend,
                model,
                f"{run['load_s']:.1f}",
                f"{run['stream']['tok_s']:.1f}",
                f"{run['stream']['ttft_s']:.2f}",
                *[f"{run['batch'][str(b)]['tok_s']:.1f}" for b in batches],
                f"{js['without_schema']['tok_s']:.1f}",
                f"{js['with_schema']['tok_s']:.1f}",
                f"{js['with_schema']['valid_plans']}/{js['with_schema']['of']}"
                f" ({js['with_schema'].get('truncated', '?')} cut)",
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for row in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def write_report(report: dict[str, Any], out: str | None, name: str) -> Path:
    """``report`` as JSON at ``out``, else at ``<home>/benchmarks/<name>``; returns the path."""
    path = Path(out or load_settings().home / "benchmarks" / name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    return path


async def main_async(args: argparse.Namespace) -> None:
    settings = load_settings()
    report: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "loadavg_start": os.getloadavg(),
        },
        "max_tokens": args.max_tokens,
        "plan_max_tokens": args.plan_max_tokens,
        "runs": {},
    }
    for backend in args.backends:
        model = args.vllm_model if backend == "vllm" else args.model
        print(f"== {backend} / {model}", flush=True)
        engine = build(backend, model, settings, args.threads, args.slots)
        try:
            report["runs"][f"{backend}:{model}"] = await bench_engine(
                engine, args.batches, args.max_tokens, args.plan_max_tokens
            )
        finally:
            await engine.close()
    report["machine"]["loadavg_end"] = os.getloadavg()
    print()
    print_table(report, args.batches)
    out = write_report(report, args.out, "engine_bench.json")
    print(f"\nwrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--backends", nargs="+", default=["llamacpp"], choices=["llamacpp", "llama-server", "vllm"]
    )
    parser.add_argument("--slots", type=int, default=4, help="llama-server parallel slots")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4km")
    parser.add_argument("--vllm-model", default="qwen2.5-coder-1.5b-instruct-q4km")
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 8, 32])
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument(
        "--plan-max-tokens", type=int, default=128, help="max tokens of the JSON-plan requests"
    )
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads")
    parser.add_argument("--out", default=None, help="JSON path (default <home>/benchmarks/)")
    parser.add_argument(
        "--variant",
        action="append",
        metavar="NAME=DIR[:GGUF]",
        help="compare llama.cpp builds / model files by the engine's limit (see above)",
    )
    parser.add_argument("--rounds", type=int, default=4, help="--variant: rounds per variant")
    parser.add_argument(
        "--draft-cost", action="store_true", help="the cost of checking a speculative draft"
    )
    parser.add_argument(
        "--lookup-replay", type=Path, metavar="RUN", help="prompt lookup replayed on RUN's answers"
    )
    parser.add_argument("--methods", default="rag,typed-rag", help="--lookup-replay: methods")
    parser.add_argument("--limit-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.limit_worker:
        print(json.dumps(limit_worker(args.limit_worker)))
        return
    if args.draft_cost:
        probe = server_probe()
        try:
            report = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                      **draft_check_cost(probe)}  # fmt: skip
        finally:
            probe.close()
        print(json.dumps(report, indent=1))
        write_report(report, args.out, "draft_cost.json")
        return
    if args.lookup_replay:
        report = lookup_replay(
            args.lookup_replay, args.methods.split(","), Path("results/latency/draft-cost.json")
        )
        print("method     route           n    d answers accepted tok/step speed-up (median, all)")
        for r in report["rows"]:
            print(f"{r['method']:10} {r['route']:15} {r['ngram']}  {r['draft']} {r['answers']:7d}"
                  f" {r['accepted_of_drafted']:8.2f} {r['tokens_per_step']:8.2f}"
                  f" {r['decode_speedup_median']:.2f}, {r['decode_speedup_total']:.2f}")  # fmt: skip
        print(f"wrote {write_report(report, args.out, 'lookup_acceptance.json')}")
        return
    if args.variant:
        report = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                              "loadavg_start": os.getloadavg()},
                  **compare_variants(args.variant, args.rounds)}  # fmt: skip
        report["machine"]["loadavg_end"] = os.getloadavg()
        for name, v in report["variants"].items():
            print(f"{name}: prefill {v['prefill_tok_s_limit']:.1f} tok/s "
                  f"({v[next(k for k in v if k.startswith('prefill_tok_s_vs_'))]}x), "
                  f"decode {v['decode_tok_s_limit']:.1f} tok/s "
                  f"({v[next(k for k in v if k.startswith('decode_tok_s_vs_'))]}x)")  # fmt: skip
        print(f"wrote {write_report(report, args.out, 'engine_variants.json')}")
        return
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
