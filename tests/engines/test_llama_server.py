"""Supervision of the llama-server child: start, health wait, restart, clean shutdown.

A fake ``llama-server`` (tests/engines/fake_llama_server.py: same flags, real
HTTP) stands in for the binary, so these run without a model; the slow test at
the end runs the real binary on SmolLM2.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from typed_rag.config import load_settings
from typed_rag.engines.base import ChatRequest, EngineError
from typed_rag.engines.factory import build_engine
from typed_rag.engines.llama_server import LlamaServerEngine, default_binary, find_binary
from typed_rag.errors import UserError

FAKE = Path(__file__).with_name("fake_llama_server.py")


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """An executable named llama-server that runs the fake server."""
    path = tmp_path / "llama-server"
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    path.chmod(0o755)
    return path


def make(fake_bin: Path, tmp_path: Path, **kw: object) -> LlamaServerEngine:
    params: dict[str, object] = {"binary": fake_bin, "slots": 3, "n_ctx": 1024, "log_dir": tmp_path}
    params.update(kw)
    return LlamaServerEngine(tmp_path / "model.gguf", **params)  # type: ignore[arg-type]


def ask(text: str, **kw: object) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}], **kw)  # type: ignore[arg-type]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0): look at its state
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def test_command_runs_parallel_slots_with_continuous_batching(tmp_path: Path) -> None:
    eng = LlamaServerEngine(tmp_path / "m.gguf", binary="/x/llama-server", slots=4, n_ctx=2048)
    cmd = eng.command(8123)
    assert cmd[0] == "/x/llama-server"
    flags = dict(zip(cmd[1::2], cmd[2::2], strict=False))
    assert flags["--parallel"] == "4" and flags["--port"] == "8123"
    assert flags["--ctx-size"] == str(4 * 2048)  # n_ctx tokens per slot
    assert "--cont-batching" in cmd and "--jinja" in cmd
    with pytest.raises(EngineError, match="at least 1"):
        LlamaServerEngine(tmp_path / "m.gguf", binary="/x", slots=0)


async def test_starts_answers_and_stops_without_orphans(fake_bin: Path, tmp_path: Path) -> None:
    eng = make(fake_bin, tmp_path)
    await eng.start()
    pid = eng.pid
    assert pid is not None and alive(pid) and eng.healthy()
    assert eng.base_url == f"http://127.0.0.1:{eng.port}/v1"
    results = await eng.generate([ask("one"), ask("two")])
    assert [r.text for r in results] == ["echo: one", "echo: two"]
    (plan,) = await eng.generate([ask("plan", json_schema={"title": "sub_query_plan"})])
    assert json.loads(plan.text) == {"schema_title": "sub_query_plan"}  # sent as json_schema
    seen = [i async for i, _ in eng.generate_each([ask("SLOW a"), ask("b")])]
    assert seen == [1, 0]  # the quick one is yielded first
    await eng.close()
    assert not alive(pid) and eng.pid is None
    assert (
        "fake llama-server" in (tmp_path / f"llama-server-{os.getpid()}-{eng.port}.log").read_text()
    )


async def test_restarts_a_dead_server_and_retries_the_request_it_was_running(
    fake_bin: Path, tmp_path: Path
) -> None:
    eng = make(fake_bin, tmp_path)
    await eng.start()
    first = eng.pid
    assert first is not None
    task = asyncio.ensure_future(eng.generate([ask("SLOW question")]))
    await asyncio.sleep(0.5)
    os.kill(first, signal.SIGKILL)
    (res,) = await asyncio.wait_for(task, 30)  # answered by the restarted server
    assert res.text == "echo: SLOW question"
    assert eng.restarts == 1 and eng.pid not in (None, first) and eng.healthy()
    await eng.close()


async def test_gives_up_after_max_restarts(fake_bin: Path, tmp_path: Path) -> None:
    eng = make(fake_bin, tmp_path, max_restarts=1)
    await eng.start()
    with pytest.raises(EngineError):
        await asyncio.wait_for(eng.generate([ask("DIE")]), 30)  # dies, restarts, dies again
    deadline = time.monotonic() + 10
    while eng.healthy() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert not eng.healthy()
    with pytest.raises(EngineError, match="not restarting"):
        await eng.generate([ask("hello")])
    await eng.close()


async def test_start_failure_reports_the_servers_own_words(
    fake_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LLAMA_EXIT", "3")
    eng = make(fake_bin, tmp_path)
    with pytest.raises(EngineError, match="code 3(.|\n)*failed to load model"):
        await eng.start()
    await eng.close()


async def test_waits_while_loading_and_times_out_if_never_ready(
    fake_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LLAMA_LOADING_S", "1.0")
    eng = make(fake_bin, tmp_path)
    t0 = time.monotonic()
    await eng.start()
    assert time.monotonic() - t0 >= 1.0  # /health said 503 (loading) until then
    await eng.close()

    monkeypatch.setenv("FAKE_LLAMA_NEVER_READY", "1")
    eng = make(fake_bin, tmp_path, start_timeout_s=1.0)
    with pytest.raises(EngineError, match="did not become healthy"):
        await eng.start()
    assert eng.pid is None  # killed, not left running
    await eng.close()


def test_server_dies_with_its_parent(fake_bin: Path, tmp_path: Path) -> None:
    """SIGKILL the Python process that owns the engine: the server must not outlive it."""
    script = (
        "import asyncio, sys, time\n"
        "from typed_rag.engines.llama_server import LlamaServerEngine\n"
        "async def main():\n"
        f"    eng = LlamaServerEngine('m.gguf', binary={str(fake_bin)!r}, log_dir={str(tmp_path)!r})\n"
        "    await eng.start()\n"
        "    print(eng.pid, flush=True)\n"
        "    time.sleep(60)\n"
        "asyncio.run(main())\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=Path.cwd()
    )
    try:
        assert owner.stdout is not None
        child = int(owner.stdout.readline())
        assert alive(child)
        owner.kill()
        owner.wait()
        deadline = time.monotonic() + 10
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(child)
    finally:
        if owner.poll() is None:
            owner.kill()


def test_missing_binary_names_the_setup_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EngineError, match="scripts/setup.sh llama-server"):
        find_binary(None, tmp_path)
    with pytest.raises(EngineError, match="not an executable"):
        find_binary(tmp_path / "nope", tmp_path)
    built = default_binary(tmp_path)
    built.parent.mkdir(parents=True)
    built.write_text("#!/bin/sh\n")
    built.chmod(0o755)
    assert find_binary(None, tmp_path) == built


def test_factory_builds_it_from_settings(fake_bin: Path, tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    settings = load_settings(
        **{
            "home": str(tmp_path),
            "engine.backend": "llama-server",
            "engine.model": str(model),
            "engine.server_bin": str(fake_bin),
            "engine.server_slots": 2,
        }
    )
    eng = build_engine(settings)
    assert isinstance(eng, LlamaServerEngine) and eng.slots == 2
    bad = settings.model_copy(
        update={"engine": settings.engine.model_copy(update={"server_bin": str(tmp_path / "x")})}
    )
    with pytest.raises(UserError, match="server_bin"):
        build_engine(bad)


# --- the real binary ------------------------------------------------------------------


@pytest.mark.slow
async def test_real_llama_server_batches_plans_and_restarts(smollm2_gguf: Path) -> None:
    """SmolLM2 on the real llama-server: parallel answers, a schema plan, a restart, no orphan."""
    from typed_rag.pipelines.decomposition import SUB_QUERY_SCHEMA, parse_sub_queries

    try:
        binary = find_binary(None, load_settings().home)
    except EngineError as exc:
        pytest.skip(str(exc))
    eng = LlamaServerEngine(
        smollm2_gguf, binary=binary, slots=2, n_ctx=1024, n_threads=1, model_name="smollm2"
    )
    await eng.start()
    try:
        question = [{"role": "user", "content": "Why do leaves change color in autumn?"}]
        plan_req = ChatRequest(
            messages=[
                {"role": "system", "content": "Split the question into 2 to 4 search queries."},
                *question,
            ],
            max_tokens=96,
            seed=3,
            json_schema=SUB_QUERY_SCHEMA,
        )
        answer = ChatRequest(messages=question, max_tokens=16, seed=1)
        done = [i async for i, _ in eng.generate_each([answer, answer, plan_req])]
        assert sorted(done) == [0, 1, 2]
        (plan,) = await eng.generate([plan_req])
        assert plan.finish_reason == "stop"  # the grammar closed the JSON object
        assert 2 <= len(parse_sub_queries(plan.text).sub_queries) <= 5
        pid = eng.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        (res,) = await asyncio.wait_for(eng.generate([answer]), 120)  # after the restart
        assert res.completion_tokens > 0 and eng.restarts == 1
    finally:
        await eng.close()
    assert eng.pid is None and not alive(pid)
