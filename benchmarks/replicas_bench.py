"""Ray Serve replicas benchmark: requests/s with 1 and 2 replicas, and a replica killed.

One local Ray cluster; the server (``serving/replicas.py``) over a tiny BM25 index with the
fake engine taking ``--delay`` seconds a round (a stand-in for a per-replica engine that
answers ``server.max_concurrent`` requests at once). ``-c`` clients send ``rag`` requests
back to back for ``-d`` seconds, first to 1 replica, then to 2 (the same application,
redeployed). Then, under the same load, one replica is killed (``ray.kill``):

- ``replicas_rps``: {"1": requests/s, "2": requests/s};
- ``failed_requests``: requests that failed although they were not in flight at the kill
  (sent more than 1 s after it, or finished before it);
- ``in_flight_failed``: requests in flight at the kill that failed (a client may retry);
- ``recovery_s``: from the kill until Serve runs 2 replicas again.

It merges those keys into ``results/scale/summary.json`` (``--out``; other keys are kept).

    python benchmarks/replicas_bench.py                 # ~2 minutes on 2 cores
    python benchmarks/replicas_bench.py -d 10 -c 8
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from indexes.build import build_index
from serving import replicas
from typed_rag.config import Settings, load_settings

QUESTIONS = [
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
                    "messages": [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-c", "--clients", type=int, default=16, help="concurrent clients (16)")
    p.add_argument("-d", "--duration", type=float, default=15.0, help="s per configuration")
    p.add_argument("--delay", type=float, default=0.2, help="fake engine s/round (0.2)")
    p.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray cluster (2)")
    p.add_argument("--out", default="results/scale/summary.json")
    args = p.parse_args(argv)

    import ray

    factory = functools.partial(replicas.fake_rag, delay_s=args.delay)
    summary: dict[str, Any] = {"replicas_rps": {}}
    with tempfile.TemporaryDirectory() as tmp:
        settings = bench_settings(Path(tmp))
        ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
        try:
            for n in (1, 2):
                t0 = time.monotonic()
                url = replicas.deploy(settings, n, rag_factory=factory, num_cpus=0.5)
                print(f"{n} replica(s) ready in {time.monotonic() - t0:.1f} s")
                rps = load(url, args.clients, args.duration, [])
                summary["replicas_rps"][str(n)] = round(rps, 2)
                print(f"{n} replica(s): {rps:.2f} requests/s")
            summary |= kill_one(url, args.clients, args.duration)
        finally:
            from ray import serve

            serve.shutdown()
            ray.shutdown()
    summary["replicas_setup"] = {
        "engine": f"fake, {args.delay} s a round",
        "clients": args.clients,
        "duration_s": args.duration,
        "max_concurrent_per_replica": settings.server.max_concurrent,
        "ray_cpus": args.cpus,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs",
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    kept = json.loads(out.read_text()) if out.exists() else {}  # other benchmarks' keys
    out.write_text(json.dumps(kept | summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
