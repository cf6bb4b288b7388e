"""llama.cpp's own HTTP server (``llama-server``) as a supervised child process.

The in-process engine (:mod:`typed_rag.engines.llamacpp`) answers one request at
a time, so the 3-5 sub-answers of a typed question run one after another.
``llama-server`` runs ``slots`` sequences in parallel with continuous batching:
on a CPU, decoding several sequences together costs little more per step than
one, so a batch of sub-answers (or several users) finishes much sooner. It also
reuses the KV cache of a request's common prefix (``cache_prompt``).

This module owns the process: it picks a free port, starts the binary (built
once by ``scripts/setup.sh llama-server``), waits for ``/health``, restarts it if
it dies (requests wait for the restart), and stops it on close, at interpreter
exit, or when this process dies (``PR_SET_PDEATHSIG``), so no server outlives
us. Requests go through :class:`~typed_rag.engines.openai_client.OpenAIEngine`;
JSON-schema plans use ``response_format`` (llama-server compiles the schema to
a grammar).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import IO

import httpx

from typed_rag.engines.base import ChatRequest, ChatResult, EngineError, StreamDelta
from typed_rag.engines.llamacpp_jobs import default_threads
from typed_rag.engines.openai_client import MAX_RETRIES, OpenAIEngine

log = logging.getLogger(__name__)

LLAMA_CPP_VERSION = "0.3.36"  # scripts/setup.sh builds llama-server from this sdist
PR_SET_PDEATHSIG = 1
START_TIMEOUT_S = 300.0  # loading a 1.5B GGUF and its first health check take ~10 s here
MAX_RESTARTS = 3  # a child that died this often is broken, not unlucky: fail clearly
# Per request, queueing for a slot included: a CPU batch of long answers is slow.
REQUEST_TIMEOUT_S = 1800.0


def default_binary(home: Path) -> Path:
    """Where ``scripts/build_llama_server.sh`` puts the binary."""
    return home / "llama-server" / LLAMA_CPP_VERSION / "bin" / "llama-server"


def find_binary(configured: str | Path | None, home: Path) -> Path:
    """The configured binary, else the set-up's build, else ``llama-server`` on PATH."""
    if configured:
        path = Path(configured).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise EngineError(f"engine.server_bin {path} is not an executable file")
        return path
    built = default_binary(home)
    if built.is_file() and os.access(built, os.X_OK):
        return built
    found = shutil.which("llama-server")
    if found:
        return Path(found)
    raise EngineError(
        f"engine.backend=llama-server needs the llama-server binary: none at {built} "
        "or on PATH; build it once with `scripts/setup.sh llama-server` "
        "(or set engine.server_bin)"
    )


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to SIGTERM the child when the thread that started it dies (no orphans)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


_LIVE: weakref.WeakSet[LlamaServerEngine] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    """Interpreter exit without ``close()``: stop every server still running."""
    for engine in list(_LIVE):
        engine.kill()


class LlamaServerEngine(OpenAIEngine):
    """A GGUF model served by a ``llama-server`` child with parallel slots."""

    name = "llama-server"

    def __init__(
        self,
        model_path: str | Path,
        *,
        binary: str | Path,
        slots: int = 4,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        model_name: str | None = None,
        host: str = "127.0.0.1",
        start_timeout_s: float = START_TIMEOUT_S,
        max_restarts: int = MAX_RESTARTS,
        extra_args: Sequence[str] = (),
        log_dir: str | Path | None = None,
        timeout_s: float = 600.0,
        max_retries: int = MAX_RETRIES,
        max_concurrency: int = 8,
    ) -> None:
        if slots < 1:
            raise EngineError(f"engine.server_slots must be at least 1, got {slots}")
        self.model_path = Path(model_path)
        self.binary = Path(binary)
        self.slots = slots
        self.n_ctx = n_ctx  # per slot
        self.n_threads = n_threads or default_threads()
        self.host = host
        self.start_timeout_s = start_timeout_s
        self.max_restarts = max_restarts
        self.extra_args = list(extra_args)
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.gettempdir())
        self.port = 0
        self.restarts = 0
        self.generation = 0  # how many times the child was started
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_path: Path | None = None
        self._ready = asyncio.Event()
        self._watchdog: asyncio.Task[None] | None = None
        self._start_lock = asyncio.Lock()
        self._closing = False
        self._dead: str | None = None  # why it cannot be restarted any more
        super().__init__(
            base_url="http://invalid/v1",  # set once the port is known
            model=model_name or self.model_path.stem,
            timeout_s=timeout_s,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
            json_mode="json_schema",
        )

    # ------------------------------------------------------------ lifecycle

    def command(self, port: int) -> list[str]:
        """The child's command line: ``slots`` parallel sequences of ``n_ctx`` tokens each."""
        return [
            str(self.binary),
            "--model",
            str(self.model_path),
            "--host",
            self.host,
            "--port",
            str(port),
            "--parallel",
            str(self.slots),
            "--ctx-size",
            str(self.n_ctx * self.slots),
            "--threads",
            str(self.n_threads),
            "--threads-batch",
            str(self.n_threads),
            "--cont-batching",
            "--jinja",
            "--no-webui",
            *self.extra_args,
        ]

    async def start(self) -> None:
        if self._ready.is_set() and self._client is not None:
            return
        async with self._start_lock:
            if self._dead is not None:
                raise EngineError(self._dead)
            if self._proc is None:
                await self._spawn()
                self._watchdog = asyncio.ensure_future(self._watch())
                _LIVE.add(self)
            await super().start()

    async def _spawn(self) -> None:
        """Start the child and wait until it answers ``/health``.

        The first start takes a free port; a restart reuses it, so the HTTP
        client (and requests retrying through it) need not change.
        """
        if not self.port:
            self.port = free_port(self.host)
            self.base_url = f"http://{self.host}:{self.port}/v1"
        self.generation += 1
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._log_path = self.log_dir / f"llama-server-{os.getpid()}-{self.port}.log"
        self._log = open(self._log_path, "wb")  # noqa: SIM115 - closed in _reap
        cmd = self.command(self.port)
        log.info("starting %s", " ".join(cmd))
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - only prctl, async-signal-safe
        )
        await self._wait_healthy(self._proc)
        self._ready.set()
        log.info("llama-server ready on port %d (%d slots)", self.port, self.slots)

    async def _wait_healthy(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        url = f"http://{self.host}:{self.port}/health"
        async with httpx.AsyncClient(timeout=5.0) as client:
            while True:
                if proc.poll() is not None:
                    self._reap()
                    raise EngineError(
                        f"llama-server exited with code {proc.returncode} while starting:\n"
                        f"{self.log_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(url)).status_code == 200:
                        return
                if time.monotonic() > deadline:
                    self.kill()
                    raise EngineError(
                        f"llama-server did not become healthy within {self.start_timeout_s:.0f} s"
                        f":\n{self.log_tail()}"
                    )
                await asyncio.sleep(0.2)

    async def _watch(self) -> None:
        """Restart the child when it dies; after ``max_restarts`` give up (unhealthy)."""
        while not self._closing:
            await asyncio.sleep(0.5)
            proc = self._proc
            if proc is None or proc.poll() is None or self._closing:
                continue
            self._ready.clear()
            tail = self.log_tail()
            self._reap()
            if self.restarts >= self.max_restarts:
                self._dead = (
                    f"llama-server died {self.restarts + 1} times (last exit code "
                    f"{proc.returncode}); not restarting:\n{tail}"
                )
                log.error("%s", self._dead)
                self._healthy = False
                self._ready.set()  # waiting requests wake up and fail
                return
            self.restarts += 1
            log.warning(
                "llama-server exited with code %s; restart %d/%d",
                proc.returncode,
                self.restarts,
                self.max_restarts,
            )
            try:
                await self._spawn()
                await super().start()
                self._healthy = True
            except EngineError as exc:
                log.error("llama-server restart failed: %s", exc)

    def _reap(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
        self._proc = None

    def log_tail(self, lines: int = 20) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        text = self._log_path.read_bytes()[-8192:].decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    def kill(self, timeout_s: float = 10.0) -> None:
        """Stop the child now (SIGTERM, then SIGKILL) and reap it. Safe to call twice."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._reap()

    async def close(self) -> None:
        self._closing = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            await asyncio.gather(self._watchdog, return_exceptions=True)
            self._watchdog = None
        await super().close()
        await asyncio.get_running_loop().run_in_executor(None, self.kill)
        self._ready.clear()
        _LIVE.discard(self)
        self._closing = False

    def healthy(self) -> bool:
        return self._dead is None and self._healthy

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # -------------------------------------------------------------- requests

    async def _await_ready(self) -> None:
        await self.start()
        await self._ready.wait()
        if self._dead is not None:
            raise EngineError(self._dead)

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    async def _one(self, req: ChatRequest) -> ChatResult:
        """One request; if the server died under it, wait for the restart and send it again."""
        for _attempt in range(self.max_restarts + 1):
            await self._await_ready()
            generation = self.generation
            try:
                return await super()._one(req)
            except EngineError:
                if self._dead is not None or (self._alive() and self.generation == generation):
                    raise
                log.info("llama-server went away during a request; retrying after its restart")
                while not self._dead and not self._alive() and self.generation == generation:
                    await asyncio.sleep(0.2)  # until the watchdog has noticed
        raise EngineError(f"llama-server kept dying (restarted {self.max_restarts} times)")

    async def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        await self._await_ready()
        return await super().generate(requests)

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        await self._await_ready()
        async for delta in super().stream(request):
            yield delta
