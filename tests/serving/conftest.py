"""Fixtures for the server tests: a real TypedRAG over small parts, and servers to call.

Two ways to run the server, both over real HTTP on 127.0.0.1:
- ``live_server(...)``: uvicorn in a thread of this process, with a TypedRAG
  built from parts the test controls (a FakeEngine with delays or failures),
  so tests can see what the engine saw (cancellations, batches).
- ``cli_server``: ``python -m cli serve`` as a subprocess, built only
  from settings (fake engine backend, tiny BM25 index), as a user runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from serving.app import create_app
from tests.conftest import TINY_PASSAGES
from typed_rag.classifier.base import TypeClassifier
from typed_rag.config import Settings, load_settings
from typed_rag.engines.base import ChatRequest, ChatResult, StreamDelta
from typed_rag.engines.fake import FakeEngine, echo_responder
from typed_rag.retrieval import Passage
from typed_rag.system import TypedRAG
from typed_rag.types import LABELS, QuestionType

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OverlapRetriever:
    """Ranks the tiny corpus by word overlap with the query (enough to give real passages)."""

    def __init__(self, rows: Sequence[tuple[str, str, str]] = TINY_PASSAGES) -> None:
        self.passages = [Passage(id=i, title=t, text=x) for i, t, x in rows]

    @staticmethod
    def _words(text: str) -> set[str]:
        return set(re.findall(r"[a-z]+", text.lower()))

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        out = []
        for q in queries:
            qw = self._words(q)
            scored = [
                Passage(p.id, p.title, p.text, float(len(qw & self._words(p.title + " " + p.text))))
                for p in self.passages
            ]
            scored.sort(key=lambda p: -p.score)
            out.append([p for p in scored if p.score > 0][:k])
        return out


class CueClassifier(TypeClassifier):
    """Types a question by its first words, with a clear top probability."""

    name = "cue"
    CUES = (
        ("why", QuestionType.REASON),
        ("how do", QuestionType.INSTRUCTION),
        ("how to", QuestionType.INSTRUCTION),
        ("is ", QuestionType.DEBATE),
        ("should", QuestionType.DEBATE),
        ("what is the difference", QuestionType.COMPARISON),
        ("what was it like", QuestionType.EXPERIENCE),
    )

    def predict_proba(self, questions: Sequence[str]) -> list[list[float]]:
        out = []
        for q in questions:
            qtype = next(
                (t for cue, t in self.CUES if q.lower().startswith(cue)),
                QuestionType.EVIDENCE_BASED,
            )
            probs = [0.02] * len(LABELS)
            probs[LABELS.index(qtype)] = 1.0 - 0.02 * (len(LABELS) - 1)
            out.append(probs)
        return out


class ProbeEngine(FakeEngine):
    """A FakeEngine that can be slow, fail, or die, and counts what happened to its calls."""

    def __init__(
        self,
        responder: Callable[[ChatRequest], str] = echo_responder,
        delay_s: float = 0.0,
        token_delay_s: float = 0.0,
        fail_with: BaseException | None = None,
        fail_in_stream: BaseException | None = None,
        gate: threading.Event | None = None,
    ) -> None:
        super().__init__(responder, delay_s)
        self.gate = gate  # when given, every call waits until the test sets it: no timing races
        self.token_delay_s = token_delay_s
        self.fail_with = fail_with
        self.fail_in_stream = fail_in_stream
        self.started = 0
        self.finished = 0
        self.cancelled = 0
        self.alive = True

    def healthy(self) -> bool:
        return self.alive

    async def _wait_for_gate(self) -> None:
        while self.gate is not None and not self.gate.is_set():
            await asyncio.sleep(0.01)

    async def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        self.started += 1
        try:
            await self._wait_for_gate()
            if self.fail_with is not None:
                raise self.fail_with
            out = await super().generate(requests)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        self.finished += 1
        return out

    async def stream(self, request: ChatRequest):  # type: ignore[override]
        self.started += 1
        t0 = time.perf_counter()
        try:
            await self._wait_for_gate()
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            if self.fail_with is not None:
                raise self.fail_with
            text = self.responder(request)
            words = text.split(" ")
            for i, word in enumerate(words):
                if self.fail_in_stream is not None and i == 2:
                    raise self.fail_in_stream
                yield StreamDelta(text=word if i == 0 else " " + word)
                await asyncio.sleep(self.token_delay_s)
            yield StreamDelta(
                text="",
                result=ChatResult(
                    text=text,
                    prompt_tokens=7,
                    completion_tokens=len(words),
                    latency_s=time.perf_counter() - t0,
                ),
            )
        except (asyncio.CancelledError, GeneratorExit):
            self.cancelled += 1
            raise
        self.finished += 1


async def collect(stream: AsyncIterator[Any]) -> list[Any]:
    """Everything an async iterator yields (an answer stream, the demo's outputs)."""
    return [item async for item in stream]


def make_rag(settings: Settings, engine: ProbeEngine | None = None) -> TypedRAG:
    return TypedRAG(
        settings,
        engine=engine or ProbeEngine(),
        retriever=OverlapRetriever(),
        reranker=None,
        classifier=CueClassifier(),
    )


def server_settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "home": str(tmp_path / "home"),
        "engine.backend": "fake",
        "server.ui": False,
        # Off here: the warm-up request would show in the engines and retrievers tests
        # watch (tests/serving/test_scheduling.py turns it on).
        "server.warm_up": False,
    }
    values.update(overrides)
    return load_settings(None, **values)


@dataclass
class LiveServer:
    url: str
    app: Any
    server: uvicorn.Server

    @property
    def api(self) -> str:
        return self.url + "/v1"

    def metric(self, name: str, labels: str = "") -> float:
        """One sample of ``/metrics`` (0.0 when absent)."""
        text = httpx.get(self.url + "/metrics", timeout=5).text
        key = f"{name}{{{labels}}}" if labels else name
        for line in text.splitlines():
            if line.startswith(key + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0


def wait_healthy(url: str, timeout_s: float = 60.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            r = httpx.get(url + "/health", timeout=2)
            if r.status_code == 200:
                return
            last = f"{r.status_code} {r.text}"
        except httpx.TransportError as exc:
            last = repr(exc)
        time.sleep(0.1)
    raise TimeoutError(f"server at {url} not healthy after {timeout_s}s: {last}")


@contextlib.contextmanager
def live_server(settings: Settings, rag: Any | None, *, wait: bool = True) -> Iterator[LiveServer]:
    """uvicorn in a background thread serving ``create_app(settings, rag)``."""
    port = free_port()
    server_conf = settings.server.model_copy(update={"host": "127.0.0.1", "port": port})
    settings = settings.model_copy(update={"server": server_conf})
    app = create_app(settings, rag)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("test server did not start")
            time.sleep(0.02)
        if wait:
            wait_healthy(url, 30)
        yield LiveServer(url=url, app=app, server=server)
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@pytest.fixture
def serve(tmp_path: Path) -> Callable[..., contextlib.AbstractContextManager[LiveServer]]:
    """``with serve(engine=..., **{"server.max_queue": 0}) as srv:`` runs a live server."""

    def start(engine: ProbeEngine | None = None, rag: Any | None = None, **overrides: Any):
        settings = server_settings(tmp_path, **overrides)
        return live_server(settings, rag if rag is not None else make_rag(settings, engine))

    return start


# --- the real CLI server in a subprocess --------------------------------------------


# How the tests start the command: this interpreter on the checkout.
CLI = (sys.executable, "-m", "cli")


def _run_cli(
    args: list[str],
    env: dict[str, str],
    timeout: float = 300,
    command: Sequence[str] = CLI,
    cwd: Path = REPO,
) -> None:
    proc = subprocess.run(
        [*command, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"typed-rag {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )


@contextlib.contextmanager
def cli_server(
    tmp: Path,
    corpus: Path,
    extra_config: str = "",
    ready_timeout_s: float = 120,
    backend: str = "fake",
    model: str | None = None,
    home: Path | None = None,
    reranker: str = "none",
    command: Sequence[str] = CLI,
    cwd: Path = REPO,
    env_extra: dict[str, str] | None = None,
    procs: list[subprocess.Popen] | None = None,
) -> Iterator[str]:
    """Build a BM25 index of ``corpus`` with the CLI, then run ``typed-rag serve`` on it.

    ``home`` defaults to a fresh folder; real-model tests pass the user's home
    so that pulled model weights are reused. ``command`` and ``cwd`` say how the CLI is
    started (the packaging tests: an installed wheel, or the image's folders alone).
    ``procs``, when given, gets the server process (a test that kills it).
    """
    index = tmp / "index"
    home = home or tmp / "home"
    port = free_port()
    config = tmp / "typed-rag.toml"
    lines = [
        f'home = "{home}"',
        "[corpus]",
        f'path = "{corpus}"',
        "[retrieval]",
        f'index_dir = "{index}"',
        "[engine]",
        f'backend = "{backend}"',
        *([f'model = "{model}"'] if model else []),
        "[reranker]",
        f'kind = "{reranker}"',
        "[server]",
        "ui = false",
        extra_config,
    ]
    config.write_text("\n".join(lines) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TYPED_RAG_")}
    env["HF_HUB_OFFLINE"] = "1"
    env.update(env_extra or {})
    _run_cli(
        ["--config", str(config), "index", "build", "--corpus", str(corpus), "--out", str(index)],
        env,
        command=command,
        cwd=cwd,
    )
    log_path = tmp / "server.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [
                *command,
                "--config",
                str(config),
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    if procs is not None:
        procs.append(proc)
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_healthy(url, ready_timeout_s, proc)
        except (TimeoutError, RuntimeError) as exc:
            raise RuntimeError(f"{exc}\n--- server log ---\n{log_path.read_text()}") from None
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
