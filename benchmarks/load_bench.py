"""Load benchmark: N concurrent clients against a running ``typed-rag serve`` for a fixed time.

Each client sends chat completions back to back (``include_trace`` on, so the
server's own timings come back) until the time is up. Reported: requests/s,
client latency percentiles, errors by status, and where the time went, from
the traces: engine time (per round, the slowest call of the round, since a
round's calls run together), the rest of the pipeline (classifier, retrieval,
rerank), and the server's own overhead (queueing, HTTP, JSON).

    python benchmarks/load_bench.py --url http://127.0.0.1:8000 -c 8 -d 30 --model typed-rag

Prints a table and writes JSON (``--out``, default artifacts/bench/load-<model>-c<N>.json).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import platform
import statistics
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

QUESTIONS = [
    "Why do leaves change color in autumn?",
    "How do I bake sourdough bread at home?",
    "Is nuclear power a good idea for fighting climate change?",
    "What is the difference between coffee and tea?",
    "What was it like to go backpacking in Europe?",
    "Why did the Western Roman Empire fall?",
    "What are the health effects of regular exercise?",
    "Should programmers learn Python or Java first?",
]


@dataclass
class Sample:
    ok: bool
    status: int
    latency_s: float
    ttft_s: float | None = None
    server_s: float | None = None
    pipeline_s: float | None = None
    engine_s: float | None = None
    rounds: int = 0
    completion_tokens: int = 0
    question_type: str | None = None
    error: str | None = None


@dataclass
class Report:
    url: str
    model: str
    concurrency: int
    duration_s: float
    stream: bool
    requests: int = 0
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    requests_per_s: float = 0.0
    completion_tokens_per_s: float = 0.0
    latency_s: dict[str, float] = field(default_factory=dict)
    ttft_s: dict[str, float] = field(default_factory=dict)
    breakdown_s: dict[str, float] = field(default_factory=dict)
    types: dict[str, int] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)
    machine: dict[str, Any] = field(default_factory=dict)


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    xs = sorted(values)

    def pct(p: float) -> float:
        # nearest-rank percentile
        k = max(0, min(len(xs) - 1, int(round(p / 100 * len(xs) + 0.5)) - 1))
        return xs[k]

    return {
        "mean": statistics.fmean(xs),
        "p50": pct(50),
        "p95": pct(95),
        "p99": pct(99),
        "max": xs[-1],
    }


def engine_time(trace: dict[str, Any]) -> float:
    """Engine seconds on the critical path: per round, the slowest call of that round."""
    by_round: dict[int, float] = {}
    for call in trace.get("calls", []):
        r = int(call.get("round", 0))
        by_round[r] = max(by_round.get(r, 0.0), float(call.get("latency_s", 0.0)))
    return sum(by_round.values())


def from_info(sample: Sample, info: dict[str, Any] | None) -> Sample:
    if not info:
        return sample
    sample.server_s = (info.get("server_timings") or {}).get("total")
    sample.pipeline_s = (info.get("timings") or {}).get("total")
    sample.rounds = int(info.get("rounds") or 0)
    sample.question_type = info.get("type")
    trace = info.get("trace")
    if trace:
        sample.engine_s = engine_time(trace)
    return sample


async def one_request(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], stream: bool
) -> Sample:
    start = time.perf_counter()
    try:
        if not stream:
            r = await client.post(url, json=body)
            latency = time.perf_counter() - start
            if r.status_code != 200:
                return Sample(False, r.status_code, latency, error=_error_code(r))
            data = r.json()
            s = Sample(True, 200, latency)
            s.completion_tokens = int(data.get("usage", {}).get("completion_tokens", 0))
            return from_info(s, data.get("typed_rag"))
        ttft = None
        info = None
        usage: dict[str, Any] = {}
        async with client.stream("POST", url, json={**body, "stream": True}) as r:
            if r.status_code != 200:
                await r.aread()
                return Sample(
                    False, r.status_code, time.perf_counter() - start, error=_error_code(r)
                )
            async for line in r.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if "error" in event:
                    code = event["error"].get("code") or "stream_error"
                    return Sample(False, 200, time.perf_counter() - start, error=code)
                choices = event.get("choices") or []
                if ttft is None and choices and choices[0].get("delta", {}).get("content"):
                    ttft = time.perf_counter() - start
                info = event.get("typed_rag") or info
                usage = event.get("usage") or usage
        s = Sample(True, 200, time.perf_counter() - start, ttft_s=ttft)
        s.completion_tokens = int(usage.get("completion_tokens", 0))
        return from_info(s, info)
    except httpx.HTTPError as exc:
        return Sample(False, 0, time.perf_counter() - start, error=type(exc).__name__)


def _error_code(r: httpx.Response) -> str:
    try:
        return str(r.json()["error"].get("code") or r.status_code)
    except (ValueError, KeyError, TypeError, AttributeError):
        return str(r.status_code)


async def run(args: argparse.Namespace) -> tuple[Report, list[Sample]]:
    base = args.url.rstrip("/")
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    questions = QUESTIONS
    if args.questions:
        questions = [q.strip() for q in Path(args.questions).read_text().splitlines() if q.strip()]
        if not questions:
            raise SystemExit(f"load_bench: no questions in {args.questions}")
    timeout = httpx.Timeout(args.timeout, connect=10)
    limits = httpx.Limits(max_connections=args.concurrency + 4)
    async with httpx.AsyncClient(timeout=timeout, headers=headers, limits=limits) as client:
        health = await client.get(base + "/health")
        if health.status_code != 200:
            raise SystemExit(f"load_bench: server not ready: {health.status_code} {health.text}")
        samples: list[Sample] = []
        deadline = time.perf_counter() + args.duration
        counter = 0

        async def worker() -> None:
            nonlocal counter
            sent = 0
            while time.perf_counter() < deadline and sent < args.max_requests_per_client:
                q = questions[counter % len(questions)]  # round robin over all clients
                counter += 1
                sent += 1
                body = {
                    "model": args.model,
                    "messages": [{"role": "user", "content": q}],
                    "include_trace": True,
                    "seed": args.seed,
                }
                samples.append(
                    await one_request(client, base + "/v1/chat/completions", body, args.stream)
                )

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        wall = time.perf_counter() - started
    return summarise(args, samples, wall, health.json()), samples


def summarise(
    args: argparse.Namespace, samples: list[Sample], wall: float, health: dict[str, Any]
) -> Report:
    ok = [s for s in samples if s.ok]
    rep = Report(
        url=args.url,
        model=args.model,
        concurrency=args.concurrency,
        duration_s=round(wall, 3),
        stream=args.stream,
        requests=len(samples),
        ok=len(ok),
        errors=dict(Counter(s.error or str(s.status) for s in samples if not s.ok)),
        requests_per_s=len(ok) / wall if wall else 0.0,
        completion_tokens_per_s=sum(s.completion_tokens for s in ok) / wall if wall else 0.0,
        latency_s=percentiles([s.latency_s for s in ok]),
        ttft_s=percentiles([s.ttft_s for s in ok if s.ttft_s is not None]),
        types=dict(Counter(s.question_type or "none" for s in ok)),
        server=health,
        machine={"python": sys.version.split()[0], "platform": platform.platform()},
    )
    traced = [s for s in ok if s.server_s is not None and s.pipeline_s is not None]
    if traced:
        mean = statistics.fmean
        engine = [s.engine_s or 0.0 for s in traced]
        rep.breakdown_s = {
            "client_latency": mean(s.latency_s for s in traced),
            "server_total": mean(s.server_s or 0.0 for s in traced),
            "pipeline_total": mean(s.pipeline_s or 0.0 for s in traced),
            "engine": mean(engine),
            "pipeline_non_engine": mean(
                (s.pipeline_s or 0.0) - e for s, e in zip(traced, engine, strict=True)
            ),
            # queue wait + request parsing + response building
            "server_overhead": mean((s.server_s or 0.0) - (s.pipeline_s or 0.0) for s in traced),
            # connection, transfer, client parsing
            "http_and_client": mean(s.latency_s - (s.server_s or 0.0) for s in traced),
            "rounds": mean(s.rounds for s in traced),
        }
    return rep


def print_table(rep: Report) -> None:
    def ms(x: float | None) -> str:
        return "-" if x is None else f"{x * 1000:,.1f}"

    print(
        f"\nload: {rep.url}  model={rep.model}  clients={rep.concurrency}  "
        f"{rep.duration_s:.1f}s  stream={rep.stream}  engine={rep.server.get('model')}"
    )
    print(f"{'requests':<26}{rep.requests:>12}")
    print(f"{'ok':<26}{rep.ok:>12}")
    print(f"{'errors':<26}{sum(rep.errors.values()):>12}  {rep.errors or ''}")
    print(f"{'requests/s':<26}{rep.requests_per_s:>12.2f}")
    print(f"{'completion tokens/s':<26}{rep.completion_tokens_per_s:>12.1f}")
    print(f"\n{'latency (ms)':<26}{'mean':>10}{'p50':>10}{'p95':>10}{'p99':>10}{'max':>10}")
    for name, d in (("client latency", rep.latency_s), ("time to first token", rep.ttft_s)):
        if d:
            print(
                f"{name:<26}"
                + "".join(f"{ms(d[k]):>10}" for k in ("mean", "p50", "p95", "p99", "max"))
            )
    if rep.breakdown_s:
        b = rep.breakdown_s
        print(f"\n{'where the time went (mean ms)':<32}{'ms':>10}{'share':>8}")
        total = b["client_latency"] or 1.0
        for key in ("engine", "pipeline_non_engine", "server_overhead", "http_and_client"):
            print(f"{key:<32}{ms(b[key]):>10}{b[key] / total:>8.1%}")
        print(f"{'= client latency':<32}{ms(b['client_latency']):>10}")
        print(f"{'engine rounds per request':<32}{b['rounds']:>10.2f}")
    if rep.types:
        print(f"\nquestion types: {rep.types}")


def _loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:8000", help="server base URL")
    p.add_argument("-c", "--concurrency", type=int, default=8, help="concurrent clients")
    p.add_argument("-d", "--duration", type=float, default=30.0, help="seconds to send for")
    p.add_argument("--model", default="typed-rag", choices=["typed-rag", "rag", "llm"])
    p.add_argument(
        "--stream", action="store_true", help="stream answers (adds time to first token)"
    )
    p.add_argument("--questions", help="file with one question per line (default: built-in 8)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--timeout", type=float, default=600.0, help="per-request client timeout")
    p.add_argument("--max-requests-per-client", type=int, default=10_000, help="safety bound")
    p.add_argument("--api-key")
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --url")
    p.add_argument("--out", help="JSON output path")
    args = p.parse_args(argv)
    if args.concurrency < 1 or args.duration <= 0:
        p.error("--concurrency must be >= 1 and --duration > 0")
    if not _loopback(args.url) and not args.allow_remote:
        p.error(f"{args.url} is not a loopback address; pass --allow-remote to load it anyway")
    try:
        report, samples = asyncio.run(run(args))
    except httpx.ConnectError as exc:
        print(f"load_bench: cannot connect to {args.url}: {exc}", file=sys.stderr)
        return 2
    print_table(report)
    out = Path(args.out or f"artifacts/bench/load-{args.model}-c{args.concurrency}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"report": asdict(report), "samples": [asdict(s) for s in samples]}, indent=1)
    )
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
