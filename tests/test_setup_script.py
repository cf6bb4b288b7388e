"""scripts/setup.sh's background jobs, with stand-ins for `typed-rag` and pip (seconds, no
build, no download): the fine-tuning started once and niced while the embedding head is
trained first, and the llama-cpp-python build waited for, cached, and reported when it fails.

Each test sources the script in bash (no step given, so it only defines its functions) and
calls them with a home under tmp_path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "setup.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def run_bash(body: str, home: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HOME": str(home),
        "TYPED_RAG_HOME": str(home / "typed-rag"),
        "VENV": str(Path(sys.executable).parents[1]),
    }
    for key in ("TYPED_RAG_CONFIG", "TYPED_RAG_CLASSIFIER__KIND", "TYPED_RAG_CLASSIFIER__PATH"):
        env.pop(key, None)
    script = f"set -euo pipefail\nsource {SCRIPT}\n{body}"
    return subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_the_script_parses() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


# A stand-in for .venv/bin/typed-rag: records its calls with their niceness; the fine-tuning
# waits for a go file, then saves the artefact.
FAKE_TYPED_RAG = """#!/usr/bin/env bash
echo "$* | nice $(nice)" >>"$TYPED_RAG_HOME/calls"
if [ "$*" = "classifier train --kind finetuned --if-missing" ]; then
  for _ in $(seq 300); do [ -e "$TYPED_RAG_HOME/go" ] && break; sleep 0.1; done
  mkdir -p "$TYPED_RAG_HOME/classifier"
  echo saved >"$TYPED_RAG_HOME/classifier/type_finetuned.safetensors"
  echo "fine-tuned and saved"
fi
"""


def test_the_head_first_then_one_niced_background_fine_tuning(tmp_path: Path) -> None:
    fake = tmp_path / "fake-typed-rag"
    fake.write_text(FAKE_TYPED_RAG)
    fake.chmod(0o755)
    home = tmp_path / "typed-rag"
    home.mkdir()
    body = f"""
step_classifier {fake}
echo "=== while it trains"
step_classifier {fake}
touch "$TYPED_RAG_HOME/go"
while job_alive "$TYPED_RAG_HOME/logs/classifier-finetune.pid" classifier; do sleep 0.1; done
echo "=== once it is saved"
step_classifier {fake}
"""
    out = run_bash(body, tmp_path)
    assert out.returncode == 0, out.stderr
    first, rest = out.stdout.split("=== while it trains")
    during, after = rest.split("=== once it is saved")
    log = home / "logs" / "classifier-finetune.log"
    assert "fine-tuning the classifier in the background, niced, pid" in first
    assert f"(log: {log})" in first
    assert "is being trained by pid" in during
    assert "fine-tuned, there" in after
    calls = (home / "calls").read_text().splitlines()
    ours = os.nice(0)  # the niceness the tests run at; `nice -n 19` caps at 19
    assert calls == [
        f"classifier train --kind embedding-head --quick --if-missing | nice {ours}",
        "classifier train --kind finetuned --if-missing | nice 19",
        f"classifier train --kind embedding-head --quick --if-missing | nice {ours}",
    ]
    assert "fine-tuned and saved" in log.read_text()


# A stand-in for the pip function: `pip wheel --no-deps -w DIR SPEC` writes a wheel after a
# moment, or fails when FAIL is set; each build is counted.
FAKE_PIP = """
pip() {
  echo "build $CMAKE_ARGS" >>"$HOME/builds"
  sleep 0.5
  if [ -n "${FAIL:-}" ]; then echo "c++: internal compiler error"; return 1; fi
  echo wheel >"$4/llama_cpp_python-$LLAMA_CPP_VERSION-py3-none-linux_x86_64.whl"
}
"""


def test_the_llama_build_is_waited_for_then_cached(tmp_path: Path) -> None:
    body = (
        FAKE_PIP
        + """
start_llama_build
[ -n "$LLAMA_BUILD_PID" ]
wait_llama_build
LLAMA_BUILD_PID=
start_llama_build  # cached: no second build
[ -z "$LLAMA_BUILD_PID" ]
wait_llama_build
"""
    )
    out = run_bash(body, tmp_path)
    assert out.returncode == 0, out.stderr
    wheels = tmp_path / ".cache" / "typed-rag" / "wheels"
    assert [p.name for p in wheels.iterdir()] == [
        "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"
    ]
    no_common = ROOT / "scripts" / "llama-no-common.cmake"
    assert (tmp_path / "builds").read_text() == (
        f"build -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE={no_common}\n"
    )
    assert "set(LLAMA_BUILD_COMMON OFF)" in no_common.read_text()
    assert "in the background (log: " in out.stdout


def test_a_failed_llama_build_stops_the_setup_with_its_log(tmp_path: Path) -> None:
    body = (
        FAKE_PIP
        + """
FAIL=1 start_llama_build
wait_llama_build
echo "not reached"
"""
    )
    out = run_bash(body, tmp_path)
    assert out.returncode == 1 and "not reached" not in out.stdout
    assert "building llama-cpp-python 0.3.36 failed" in out.stderr
    assert "c++: internal compiler error" in out.stderr  # the end of the log
    wheels = tmp_path / ".cache" / "typed-rag" / "wheels"
    assert list(wheels.iterdir()) == []  # no half-built wheel, no build folder left


def test_a_build_started_by_another_setup_is_waited_for_not_repeated(tmp_path: Path) -> None:
    body = (
        FAKE_PIP
        + """
start_llama_build
LLAMA_BUILD_PID=  # as if another set-up had started it
start_llama_build
wait_llama_build
"""
    )
    out = run_bash(body, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "is being built by pid" in out.stdout
    assert (tmp_path / "builds").read_text().count("build") == 1
