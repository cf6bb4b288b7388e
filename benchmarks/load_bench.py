"""Load benchmark of the server: what a user waits for while others are being answered.

The default run (``waiting``), on a server it starts itself (``--serve``, with the
usual ``--set`` settings) or on a running one (``--url``):

- ``first_request_s`` / ``tenth_request_s``: ten different ``rag`` questions one after
  another, the first sent as soon as ``/health`` says ready;
- ``short_alone_s``: a short ``llm`` request (8 tokens) alone (median of three);
- ``short_p50_s_under_load`` / ``short_p95_s_under_load``: the same request while four
  long typed-rag requests (REASON) are in flight;
- ``queued_first_byte_s_p95``: how soon a streamed request that has to queue behind
  them gets its first byte;
- ``timings_error_max``: over every traced answer, how far the step timings
  (plan, retrieval, sub-answers, final answer, finishing, ...) are from the total.

It writes those keys to ``results/serving/summary.json`` (``--out``; keys other runs
wrote there, e.g. ``benchmarks/instructions_bench.py``, are kept). ``--throughput``
instead runs N clients back to back for a fixed time (requests/s, latency percentiles).
``--replicas`` runs the server as Ray Serve replicas on one local Ray cluster (fake engine,
``--fake-delay`` s a round, a 32-passage index): ``replicas_rps`` with 1 and 2 replicas,
then one replica killed under the same load (``failed_requests`` not in flight at the kill,
``in_flight_failed``, ``recovery_s`` until 2 run again), into ``results/scale/summary.json``.
``--uploads DIR`` uploads DIR's documents (every file of an indexed type below it, 20 a
request) into a new collection over the documents API while the short request runs back
to back, and adds to ``results/serving/summary.json``: ``upload_short_p95_ratio`` (the
short request's p95 while an ingestion job runs, over its median of ``--short-requests``
alone), ``upload_files_per_s`` (the files of the jobs that succeeded, from the first
upload sent to the last job done) and ``job_overhead_s`` (median over the jobs, from the upload's 202, or the previous job's
end for a queued one, to the job's build reporting its first phase: the worker process
started), with the samples under ``uploads``. The collection is deleted afterwards.

    python benchmarks/load_bench.py --serve --set engine.backend=fake --fake-delay 0.3 \\
        --set retrieval.index_dir=... --out /tmp/summary.json     # a quick check
    python benchmarks/load_bench.py --serve                        # the configured model
    python benchmarks/load_bench.py --url http://127.0.0.1:8000 --throughput -c 8 -d 60
    python benchmarks/load_bench.py --replicas -c 16 -d 15 --fake-delay 0.2   # ~2.5 min
    python benchmarks/load_bench.py --serve --uploads /tmp/documents-bench/set --short-requests 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from indexes.build import build_index
from serving import replicas
from serving.uploads import MAX_FILES_PER_REQUEST
from typed_rag.config import Settings, load_settings
from typed_rag.retrieval.collections import DOCUMENT_SUFFIXES

QUESTIONS = [
    "Why do leaves change color in autumn?",
    "How do I bake sourdough bread at home?",
    "Is nuclear power a good idea for fighting climate change?",
    "What is the difference between coffee and tea?",
    "What was it like to go backpacking in Europe?",
    "Why did the Western Roman Empire fall?",
    "What are the health effects of regular exercise?",
    "Should programmers learn Python or Java first?",
    "How does a vaccine train the immune system?",
    "What causes the seasons on Earth?",
]
LONG = "Why did the Western Roman Empire fall?"
SHORT = "What is the capital of France?"
STEPS = ("classify", "plan", "retrieve", "rerank", "sub_answers", "draft", "generate", "finish")


def pct(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    xs = sorted(values)
    return xs[max(0, min(len(xs) - 1, int(round(p / 100 * len(xs) + 0.5)) - 1))]


def timings_error(info: dict[str, Any] | None) -> float | None:
    """|sum of the step timings - total| / total of one answer's ``typed_rag.timings``."""
    timings = dict((info or {}).get("timings") or {})
    total = timings.pop("total", None)
    if not total:
        return None
    return abs(sum(v for k, v in timings.items() if k in STEPS) - total) / total


class Client:
    """The benchmark's view of the server: one request, timed, with its ``typed_rag``."""

    def __init__(self, base: str, http: httpx.AsyncClient, seed: int) -> None:
        self.url = base.rstrip("/") + "/v1/chat/completions"
        self.http = http
        self.seed = seed
        self.errors: Counter[str] = Counter()
        self.timing_errors: list[float] = []

    def body(self, question: str, model: str, **extra: Any) -> dict[str, Any]:
        return {
            "model": model,
            "messages": [{"role": "user", "content": question}],
            "seed": self.seed,
            "include_trace": False,
            **extra,
        }

    async def ask(self, question: str, model: str, **extra: Any) -> float | None:
        """Seconds to the whole answer (None: it failed, counted by error code)."""
        start = time.perf_counter()
        try:
            r = await self.http.post(self.url, json=self.body(question, model, **extra))
        except httpx.HTTPError as exc:
            self.errors[type(exc).__name__] += 1
            return None
        if r.status_code != 200:
            self.errors[str(r.status_code)] += 1
            return None
        error = timings_error(r.json().get("typed_rag"))
        if error is not None:
            self.timing_errors.append(error)
        return time.perf_counter() - start

    async def first_byte(self, question: str, model: str, **extra: Any) -> float | None:
        """Seconds to the first SSE event of a streamed request, which is then dropped."""
        start = time.perf_counter()
        body = self.body(question, model, stream=True, **extra)
        try:
            async with self.http.stream("POST", self.url, json=body) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data: "):
                        return time.perf_counter() - start
        except httpx.HTTPError as exc:
            self.errors[type(exc).__name__] += 1
        return None


async def waiting(base: str, args: argparse.Namespace) -> dict[str, Any]:
    """The measurements of the module docstring, on the server at ``base``."""
    timeout = httpx.Timeout(args.timeout, connect=10)
    async with httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=32)) as h:
        health = (await h.get(base + "/health")).json()
        c = Client(base, h, args.seed)
        budget = {"max_tokens": args.rag_tokens}
        sequence = [await c.ask(q, "rag", **budget) for q in QUESTIONS[:10]]
        short = {"max_tokens": 8}
        alone = [s for s in [await c.ask(SHORT, "llm", **short) for _ in range(3)] if s]
        long_type = {"force_type": args.long_type}
        stop = asyncio.Event()

        async def long_worker() -> None:
            while not stop.is_set():
                await c.ask(LONG, "typed-rag", **long_type)

        workers = [asyncio.create_task(long_worker()) for _ in range(args.long)]
        await asyncio.sleep(args.settle)  # the long ones reach the engine
        under: list[float] = []
        queued: list[float] = []
        for _ in range(args.short_requests):
            got = await c.ask(SHORT, "llm", **short)
            under += [got] if got is not None else []
            fb = await c.first_byte(LONG, "typed-rag", **long_type)
            queued += [fb] if fb is not None else []
        stop.set()
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    first, tenth = sequence[0], sequence[-1]
    alone_s = statistics.median(alone) if alone else None
    return {
        "queued_first_byte_s_p95": pct(queued, 95),
        "short_alone_s": alone_s,
        "short_p50_s_under_load": pct(under, 50),
        "short_p95_s_under_load": pct(under, 95),
        "short_p95_over_alone": pct(under, 95) / alone_s if under and alone_s else None,
        "first_request_s": first,
        "tenth_request_s": tenth,
        "first_request_s / tenth_request_s": first / tenth if first and tenth else None,
        "timings_error_max": max(c.timing_errors, default=None),
        "long_in_flight": args.long,
        "samples": {
            "sequence_s": sequence,
            "short_alone_s": alone,
            "short_under_load_s": under,
            "queued_first_byte_s": queued,
            "timing_errors": c.timing_errors,
        },
        "errors": dict(c.errors),
        "server": health,
        "settings": args.set,
        "fake_delay_s": args.fake_delay,
        "machine": {"python": sys.version.split()[0], "platform": platform.platform()},
    }


def upload_set(folder: Path) -> list[tuple[str, Path]]:
    """Every file of an indexed type below ``folder``, named by its path there ('/' as '-',
    since an upload is one flat folder)."""
    found = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    files = [p for p in found if p.suffix.lower() in DOCUMENT_SUFFIXES]
    return [(str(p.relative_to(folder)).replace(os.sep, "-"), p) for p in files]


@dataclass
class Upload:
    """One upload request and the job that indexes it, on the client's clock."""

    files: int
    job: str | None = None
    sent: float = 0.0
    accepted: float | None = None  # the 202
    working: float | None = None  # first seen with a build phase: the worker runs
    finished: float | None = None
    status: str | None = None
    passages: int = 0
    error: str | None = None


class Ingestion:
    """``--uploads``: the files uploaded into a new collection, and its jobs followed."""

    def __init__(self, http: httpx.AsyncClient, base: str, files: list[tuple[str, Path]]):
        self.http = http
        self.api = base.rstrip("/") + "/v1"
        self.files = files
        self.name = f"load-bench-{os.getpid()}-{int(time.time())}"
        self.uploads: list[Upload] = []

    async def create(self) -> None:
        r = await self.http.post(self.api + "/collections", json={"name": self.name})
        if r.status_code != 201:
            raise SystemExit(
                f"load_bench: POST /v1/collections answered {r.status_code}: {r.text} "
                "(--serve turns documents.uploads on; a server with a key needs --api-key)"
            )

    async def delete(self) -> None:
        with contextlib.suppress(httpx.HTTPError):
            await self.http.delete(f"{self.api}/collections/{self.name}")

    async def run(self) -> None:
        """Send every batch at once (their jobs queue, one at a time), then follow them."""
        for i in range(0, len(self.files), MAX_FILES_PER_REQUEST):
            batch = self.files[i : i + MAX_FILES_PER_REQUEST]
            up = Upload(files=len(batch), sent=time.monotonic())
            self.uploads.append(up)
            parts = [("files", (name, path.read_bytes())) for name, path in batch]
            r = await self.http.post(f"{self.api}/collections/{self.name}/files", files=parts)
            if r.status_code != 202:
                up.error = f"{r.status_code}: {r.text[:300]}"
                continue
            up.accepted, up.job = time.monotonic(), r.json()["id"]
        waiting = [u for u in self.uploads if u.job]
        while any(u.finished is None for u in waiting):
            for up in waiting:
                if up.finished is None:
                    await self._look(up)
            await asyncio.sleep(0.1)

    async def _look(self, up: Upload) -> None:
        job = (await self.http.get(f"{self.api}/jobs/{up.job}")).json()
        now = time.monotonic()
        if up.working is None and job.get("phase"):
            up.working = now
        if job["status"] in ("succeeded", "failed"):
            up.finished, up.status, up.passages = now, job["status"], job.get("passages", 0)
            up.working = up.working or now
            up.error = job.get("error")

    def window(self) -> tuple[float, float] | None:
        """From the first job at work to the last one's end (None: no job ran)."""
        ran = [(u.working, u.finished) for u in self.uploads if u.working and u.finished]
        if not ran:
            return None
        return min(a for a, _ in ran), max(b for _, b in ran)

    @staticmethod
    def record(up: Upload, t0: float) -> dict[str, Any]:
        """``up`` with its times in seconds from ``t0`` (the first upload sent)."""
        out = asdict(up)
        for key in ("sent", "accepted", "working", "finished"):
            out[key] = None if out[key] is None else round(out[key] - t0, 3)
        return out

    def overheads(self) -> list[float]:
        """Each job's wait for its worker: from its 202 (or the job before it ending)."""
        out: list[float] = []
        previous_end = 0.0
        for up in self.uploads:
            if up.accepted is None or up.working is None:
                continue
            out.append(max(0.0, up.working - max(up.accepted, previous_end)))
            previous_end = up.finished or previous_end
        return out


async def uploads_run(base: str, args: argparse.Namespace) -> dict[str, Any]:
    """``--uploads DIR``: the short request alone, then while DIR's files are indexed."""
    files = upload_set(Path(args.uploads))
    if not files:
        raise SystemExit(f"load_bench: no file of an indexed type under {args.uploads}")
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    timeout = httpx.Timeout(args.timeout, connect=10)
    async with httpx.AsyncClient(timeout=timeout, headers=headers) as h:
        health = (await h.get(base + "/health")).json()
        c = Client(base, h, args.seed)
        short = {"max_tokens": 8}
        await c.ask(SHORT, "llm", **short)  # the first request of a fresh server: not counted
        alone = [await c.ask(SHORT, "llm", **short) for _ in range(args.short_requests)]
        alone = [s for s in alone if s is not None]
        ingestion = Ingestion(h, base, files)
        await ingestion.create()
        timed: list[tuple[float, float, float]] = []  # (start, end, seconds) of each
        try:
            started = time.monotonic()
            task = asyncio.create_task(ingestion.run())
            while not task.done():
                t0 = time.monotonic()
                got = await c.ask(SHORT, "llm", **short)
                if got is not None:
                    timed.append((t0, time.monotonic(), got))
            await task
            states = (await h.get(f"{ingestion.api}/collections/{ingestion.name}/files")).json()
        finally:
            await ingestion.delete()
    window = ingestion.window()
    during = [s for a, b, s in timed if window and a >= window[0] and b <= window[1]]
    ends = [u.finished for u in ingestion.uploads if u.finished is not None]
    indexed = sum(u.files for u in ingestion.uploads if u.status == "succeeded")
    alone_s = statistics.median(alone) if alone else None
    p95 = pct(during, 95)
    overheads = ingestion.overheads()
    return {
        "upload_short_p95_ratio": p95 / alone_s if p95 and alone_s else None,
        "upload_files_per_s": indexed / (max(ends) - started) if ends and indexed else None,
        "job_overhead_s": statistics.median(overheads) if overheads else None,
        "uploads": {
            "folder": str(args.uploads),
            "files": len(files),
            "files_in_succeeded_jobs": indexed,
            "bytes": sum(p.stat().st_size for _, p in files),
            "jobs": [ingestion.record(u, started) for u in ingestion.uploads],
            "states": dict(Counter(f["state"] for f in states.get("data", []))),
            "ingestion_s": window[1] - window[0] if window else None,
            "short_alone_s": alone_s,
            "short_p95_s_during_uploads": p95,
            "samples": {
                "short_alone_s": alone,
                "short_during_uploads_s": during,
                "job_overhead_s": overheads,
            },
            "errors": dict(c.errors),
            "server": health,
            "settings": args.set,
            "fake_delay_s": args.fake_delay,
            "machine": {
                "python": sys.version.split()[0],
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
            },
        },
    }


async def throughput(base: str, args: argparse.Namespace) -> dict[str, Any]:
    """N clients back to back for ``--duration`` seconds."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(args.timeout, connect=10)) as h:
        c = Client(base, h, args.seed)
        latencies: list[float] = []
        deadline = time.perf_counter() + args.duration
        started = time.perf_counter()

        async def worker(i: int) -> None:
            while time.perf_counter() < deadline:
                got = await c.ask(QUESTIONS[i % len(QUESTIONS)], args.model)
                latencies.extend([got] if got is not None else [])
                i += args.concurrency

        await asyncio.gather(*(worker(i) for i in range(args.concurrency)))
        wall = time.perf_counter() - started
    return {
        "model": args.model,
        "concurrency": args.concurrency,
        "requests_per_s": len(latencies) / wall,
        "latency_s": {f"p{p}": pct(latencies, p) for p in (50, 95, 99)},
        "errors": dict(c.errors),
        "timings_error_max": max(c.timing_errors, default=None),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def started_server(args: argparse.Namespace) -> Iterator[str]:
    """``--serve``: this module as a server in a child process; its URL once /health is 200."""
    port = free_port()
    cmd = [sys.executable, __file__, "--child", "--port", str(port)]
    cmd += ["--fake-delay", str(args.fake_delay)] if args.fake_delay else []
    cmd += [x for kv in args.set for x in ("--set", kv)]
    cmd += ["--set", "documents.uploads=on"] if args.uploads else []  # no key needed
    cmd += ["--config", args.config] if args.config else []
    proc = subprocess.Popen(cmd)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + args.ready_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"load_bench: the server exited with {proc.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            time.sleep(0.05)
        else:
            raise SystemExit(f"load_bench: no healthy server after {args.ready_timeout} s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def child(args: argparse.Namespace) -> int:
    """The server of ``--serve``: built from the settings, with a fake engine that takes
    ``--fake-delay`` seconds per engine round when asked for one."""
    import uvicorn

    from serving.app import create_app
    from typed_rag.config import load_settings, parse_overrides
    from typed_rag.engines.fake import FakeEngine
    from typed_rag.system import TypedRAG

    settings = load_settings(args.config, **parse_overrides(args.set))
    settings = settings.with_section("server", ui=False, port=args.port)
    rag = None
    if args.fake_delay:
        rag = TypedRAG.from_settings(settings)
        rag.engine = FakeEngine(delay_s=args.fake_delay)
    uvicorn.run(create_app(settings, rag), host="127.0.0.1", port=args.port, log_level="warning")
    return 0


REPLICA_QUESTIONS = [
    "Why do leaves change color in autumn?",
    "How do I bake sourdough bread at home?",
    "What is the difference between coffee and tea?",
    "Why did the Western Roman Empire fall?",
]
PASSAGES = [
    (str(i), f"Topic {i}", f"Passage {i} about leaves, bread, coffee, tea and Rome, part {i}.")
    for i in range(32)
]


@dataclass
class Done:
    start: float
    end: float
    ok: bool


def bench_settings(tmp: Path) -> Settings:
    """The fake engine over a BM25 index of 32 passages built here."""
    corpus = tmp / "corpus.tsv"
    corpus.write_text("id\ttext\ttitle\n" + "".join(f"{i}\t{x}\t{t}\n" for i, t, x in PASSAGES))
    settings = load_settings(
        None,
        **{
            "home": str(tmp / "home"),
            "corpus.path": str(corpus),
            "retrieval.index_dir": str(tmp / "index"),
            "reranker.kind": "none",
            "engine.backend": "fake",
            "server.ui": False,
            "server.warm_up": False,
            "server.host": "127.0.0.1",
            "server.port": free_port(),
        },
    )
    build_index(settings, show_progress=False)
    return settings


def load(url: str, clients: int, seconds: float, log: list[Done]) -> float:
    """``clients`` threads sending requests back to back; requests/s of the successes."""
    deadline = time.monotonic() + seconds

    def client(i: int) -> None:
        with httpx.Client(timeout=60) as http:
            while time.monotonic() < deadline:
                body = {
                    "model": "rag",
                    "messages": [
                        {"role": "user", "content": REPLICA_QUESTIONS[i % len(REPLICA_QUESTIONS)]}
                    ],
                }
                t0 = time.monotonic()
                try:
                    ok = http.post(url + "/v1/chat/completions", json=body).status_code == 200
                except httpx.HTTPError:
                    ok = False
                log.append(Done(t0, time.monotonic(), ok))
                i += clients

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(d.ok for d in log) / (time.monotonic() - started)


def kill_one(url: str, clients: int, seconds: float) -> dict[str, Any]:
    """Kill a replica 2 s into a load of ``seconds``; what failed, and the recovery."""
    import ray

    log: list[Done] = []
    out: dict[str, Any] = {}

    def killer() -> None:
        time.sleep(2.0)
        victim = sorted(replicas.replica_ids())[0]
        ray.kill(replicas.replica_actor(victim), no_restart=True)
        out["at"] = kill_at = time.monotonic()
        while not (
            victim not in (ids := replicas.replica_ids())
            and len(ids) == 2
            and replicas.healthy_replicas() == 2
        ):
            time.sleep(0.1)
        out["recovery_s"] = time.monotonic() - kill_at

    thread = threading.Thread(target=killer)
    thread.start()
    load(url, clients, seconds, log)
    thread.join()
    at = out["at"]
    in_flight = [d for d in log if d.start <= at + 1.0 and d.end >= at]
    others = [d for d in log if not (d.start <= at + 1.0 and d.end >= at)]
    return {
        "failed_requests": sum(not d.ok for d in others),
        "in_flight_failed": sum(not d.ok for d in in_flight),
        "requests_during_kill_run": len(log),
        "recovery_s": round(out["recovery_s"], 2),
    }


def replicas_run(args: argparse.Namespace) -> dict[str, Any]:
    """``--replicas``: requests/s with 1 and 2 Ray Serve replicas, then one killed under load."""

    import ray

    factory = functools.partial(replicas.fake_rag, delay_s=args.fake_delay)
    summary: dict[str, Any] = {"replicas_rps": {}}
    with tempfile.TemporaryDirectory() as tmp:
        settings = bench_settings(Path(tmp))
        ray.init(num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False)
        try:
            for n in (1, 2):
                t0 = time.monotonic()
                url = replicas.deploy(settings, n, rag_factory=factory, num_cpus=0.5)
                print(f"{n} replica(s) ready in {time.monotonic() - t0:.1f} s")
                rps = load(url, args.concurrency, args.duration, [])
                summary["replicas_rps"][str(n)] = round(rps, 2)
                print(f"{n} replica(s): {rps:.2f} requests/s")
            summary |= kill_one(url, args.concurrency, args.duration)
        finally:
            from ray import serve

            serve.shutdown()
            ray.shutdown()
    summary["replicas_setup"] = {
        "engine": f"fake, {args.fake_delay} s a round",
        "clients": args.concurrency,
        "duration_s": args.duration,
        "max_concurrent_per_replica": settings.server.max_concurrent,
        "ray_cpus": args.ray_cpus,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs",
    }
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = p.add_mutually_exclusive_group()
    where.add_argument("--url", help="a running server (default: --serve)")
    where.add_argument("--serve", action="store_true", help="start a server (the default)")
    p.add_argument("--set", action="append", default=[], help="a setting of --serve, k=v")
    p.add_argument("--config", help="the settings file of --serve")
    p.add_argument("--fake-delay", type=float, default=0.0, help="--serve: fake engine, s/round")
    p.add_argument("--ready-timeout", type=float, default=1800.0, help="--serve: s to ready")
    p.add_argument("--long", type=int, default=4, help="long requests in flight (4)")
    p.add_argument("--long-type", default="REASON", help="their forced type (REASON)")
    p.add_argument(
        "--short-requests", type=int, default=5, help="short requests under load (--uploads: alone)"
    )
    p.add_argument("--settle", type=float, default=2.0, help="s before the first short one")
    p.add_argument("--rag-tokens", type=int, default=32, help="max_tokens of the ten in a row")
    p.add_argument("--throughput", action="store_true", help="N clients for a fixed time")
    p.add_argument("-c", "--concurrency", type=int, default=8)
    p.add_argument("-d", "--duration", type=float, default=30.0)
    p.add_argument("--model", default="typed-rag", choices=["typed-rag", "rag", "llm"])
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--timeout", type=float, default=1800.0, help="per-request client timeout")
    p.add_argument("--replicas", action="store_true", help="Ray Serve replicas: 1, 2, one killed")
    p.add_argument("--ray-cpus", type=int, default=2, help="--replicas: the local cluster's CPUs")
    p.add_argument("--uploads", metavar="DIR", help="upload DIR's files during short requests")
    p.add_argument("--api-key", help="--url: the server's server.api_key (--uploads)")
    p.add_argument("--out", help="results/serving/summary.json (--replicas: results/scale/)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args)
    run = uploads_run if args.uploads else throughput if args.throughput else waiting
    if args.replicas:
        summary = replicas_run(args)
    elif args.url:
        summary = asyncio.run(run(args.url, args))
        summary.get("uploads", summary)["fresh_server"] = False
    else:
        with started_server(args) as url:
            summary = asyncio.run(run(url, args))
        summary.get("uploads", summary)["fresh_server"] = True
    out = Path(args.out or f"results/{'scale' if args.replicas else 'serving'}/summary.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    kept = json.loads(out.read_text()) if out.exists() else {}  # other benchmarks' keys
    out.write_text(json.dumps(kept | summary, indent=1, ensure_ascii=False) + "\n")
    shown = {k: v for k, v in summary.items() if not isinstance(v, dict | list)}
    print(json.dumps(shown, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
