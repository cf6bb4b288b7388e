"""While the server answers, the set-up's background classifier fine-tuning waits.

On two cores torch and llama.cpp slow each other several-fold even with the trainer at
nice 19 (issue 79: its first epoch took 17 minutes beside a newcomer's first answers, 3.5
with the server idle). :class:`~serving.admission.Admission` says when the first request
starts running (:meth:`TrainingPause.busy`) and when the last one ends
(:meth:`TrainingPause.idle`): the trainer named by the set-up's pid file is stopped
(SIGSTOP) and continued (SIGCONT) once the server has been idle for
:data:`RESUME_AFTER_S`, so a conversation's next question does not find it running. A pid
file whose process is not the trainer (gone, or the pid reused) is left alone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path

log = logging.getLogger(__name__)

# Idle seconds before the trainer continues: a chat's next question usually comes sooner.
RESUME_AFTER_S = 20.0
# The trainer's command line holds these (``typed-rag classifier train --kind finetuned``).
MARKERS = (b"classifier", b"train")


def trainer_pid(pid_file: Path) -> int | None:
    """The live fine-tuning process the pid file names, or None."""
    try:
        pid = int(pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if all(m in cmdline for m in MARKERS) else None


class TrainingPause:
    """Stops the background fine-tuning while requests run; continues it when idle."""

    def __init__(self, pid_file: Path, resume_after_s: float | None = None) -> None:
        self.pid_file = pid_file
        self.resume_after_s = RESUME_AFTER_S if resume_after_s is None else resume_after_s
        self.stopped: int | None = None  # the pid this stopped, until it is continued
        self._resume: asyncio.TimerHandle | None = None

    def busy(self) -> None:
        """A request runs: stop the trainer (if one runs) and cancel a pending resume."""
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        if self.stopped is not None:
            return
        pid = trainer_pid(self.pid_file)
        if pid is not None and self._signal(pid, signal.SIGSTOP):
            self.stopped = pid
            log.info("background classifier fine-tuning (pid %d) paused while requests run", pid)

    def idle(self) -> None:
        """No request runs: continue the trainer after ``resume_after_s`` unless one comes."""
        if self.stopped is None or self._resume is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # released outside the server's loop: continue it now
            self.resume()
            return
        self._resume = loop.call_later(self.resume_after_s, self.resume)

    def resume(self) -> None:
        """Continue the trainer now (also when the server stops)."""
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        pid, self.stopped = self.stopped, None
        if pid is not None and self._signal(pid, signal.SIGCONT):
            log.info("background classifier fine-tuning (pid %d) continues", pid)

    def release_left_over(self) -> None:
        """At start-up: continue a trainer a previous server stopped and could not continue
        (killed while it ran a request)."""
        pid = trainer_pid(self.pid_file)
        if pid is not None and _state(pid) == "T":
            self._signal(pid, signal.SIGCONT)
            log.info("background classifier fine-tuning (pid %d) continued", pid)

    @staticmethod
    def _signal(pid: int, sig: signal.Signals) -> bool:
        try:
            os.kill(pid, sig)
        except OSError as exc:  # gone, or not ours: nothing to pause
            log.debug("could not send %s to %d: %s", sig.name, pid, exc)
            return False
        return True


def _state(pid: int) -> str | None:
    """The process state letter of ``/proc/PID/stat`` ("T": stopped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[0]
