"""The set-up's background classifier fine-tuning waits while the server answers (issue 79):
a real process named like the trainer, stopped while a request runs over HTTP and continued
once the server is idle."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from serving import training_pause
from serving.training_pause import TrainingPause, _state
from tests.serving.conftest import ProbeEngine, live_server, make_rag, server_settings
from typed_rag.classifier.interim import finetune_pid_path

LOOP = "import time\nwhile True: time.sleep(0.02)"


@pytest.fixture()
def trainer() -> Iterator[subprocess.Popen[bytes]]:
    """A process whose command line names it the fine-tuning (``classifier train``)."""
    proc = subprocess.Popen([sys.executable, "-c", LOOP, "classifier", "train"])
    pid_file = Path(f"/proc/{proc.pid}/cmdline")
    deadline = time.monotonic() + 10
    while b"classifier" not in pid_file.read_bytes():  # until the child has exec'd
        assert time.monotonic() < deadline
        time.sleep(0.01)
    yield proc
    proc.send_signal(signal.SIGCONT)
    proc.kill()
    proc.wait()


def wait_for_state(pid: int, stopped: bool, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while (_state(pid) == "T") != stopped:
        assert time.monotonic() < deadline, f"pid {pid} state {_state(pid)}, wanted {stopped=}"
        time.sleep(0.02)


def test_the_trainer_is_stopped_while_a_request_runs_and_continues_when_idle(
    tmp_path: Path, trainer: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(training_pause, "RESUME_AFTER_S", 0.3)
    settings = server_settings(tmp_path)
    pid_file = finetune_pid_path(settings)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.write_text(f"{trainer.pid}\n")
    with live_server(settings, make_rag(settings, ProbeEngine(delay_s=1.5))) as srv:
        assert _state(trainer.pid) != "T"
        got: list[httpx.Response] = []
        body = {"model": "rag", "messages": [{"role": "user", "content": "Why is the sky blue?"}]}
        ask = threading.Thread(
            target=lambda: got.append(
                httpx.post(f"{srv.url}/v1/chat/completions", json=body, timeout=60)
            )
        )
        ask.start()
        wait_for_state(trainer.pid, stopped=True)
        assert ask.is_alive()  # stopped while the answer was under way
        ask.join()
        assert got[0].status_code == 200, got[0].text
        wait_for_state(trainer.pid, stopped=False)


def test_a_pid_file_naming_another_process_is_left_alone(tmp_path: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", LOOP])
    try:
        pid_file = tmp_path / "classifier-finetune.pid"
        pid_file.write_text(str(other.pid))
        pause = TrainingPause(pid_file)
        pause.busy()
        time.sleep(0.1)
        assert pause.stopped is None and _state(other.pid) != "T"
    finally:
        other.kill()
        other.wait()


def test_a_trainer_left_stopped_by_a_killed_server_continues_at_start_up(
    tmp_path: Path, trainer: subprocess.Popen[bytes]
) -> None:
    pid_file = tmp_path / "classifier-finetune.pid"
    pid_file.write_text(str(trainer.pid))
    trainer.send_signal(signal.SIGSTOP)
    wait_for_state(trainer.pid, stopped=True)
    TrainingPause(pid_file).release_left_over()
    wait_for_state(trainer.pid, stopped=False)


def test_idle_outside_an_event_loop_continues_at_once(
    tmp_path: Path, trainer: subprocess.Popen[bytes]
) -> None:
    pid_file = tmp_path / "classifier-finetune.pid"
    pid_file.write_text(str(trainer.pid))
    pause = TrainingPause(pid_file)
    pause.busy()
    wait_for_state(trainer.pid, stopped=True)
    pause.idle()  # no running loop to wait in
    wait_for_state(trainer.pid, stopped=False)
    assert pause.stopped is None
