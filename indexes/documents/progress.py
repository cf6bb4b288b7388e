"""A build's progress as a JSON file, for whoever started it (the server's ingestion jobs).

``typed-rag index build --docs ... --status-file FILE`` keeps ``FILE`` up to date while it
runs: the phase, files done of the total, passages so far, the file being read, and each
file's outcome (``indexed`` with its passages and pages, or ``skipped`` with the reason);
at the end ``done`` or ``failed`` with the error. The file is replaced in one rename, so a
reader never sees half of it, and rewritten at most every ``interval_s`` while files go by.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Literal

Phase = Literal["starting", "reading", "indexing", "dense", "done", "failed"]


class BuildStatus:
    """The status of one build; with no ``path`` it records nothing (a plain CLI build)."""

    def __init__(self, path: Path | None = None, interval_s: float = 0.25) -> None:
        self.path = path
        self.interval_s = interval_s
        self.phase: Phase = "starting"
        self.files_total = 0
        self.files_done = 0
        self.passages = 0
        self.current_file: str | None = None
        self.files: dict[str, dict[str, Any]] = {}
        self.error: str | None = None
        self._written = 0.0
        self._t0 = time.monotonic()

    def start(self, files_total: int) -> None:
        self.files_total = files_total
        self.phase = "reading"
        self.write(force=True)

    def skipped(self, path: str, reason: str) -> None:
        """A file found but not read (discovery's skips count toward no total)."""
        self.files[path] = {"state": "skipped", "reason": reason}
        self.write()

    def reading(self, path: str) -> None:
        self.current_file = path
        self.write()

    def done(
        self,
        path: str,
        *,
        passages: int = 0,
        pages: int | None = None,
        reason: str | None = None,
        unchanged: bool = False,
    ) -> None:
        """One file of the total is through: indexed (``passages``) or skipped (``reason``)."""
        self.files_done += 1
        self.passages += passages
        if reason is not None:
            self.files[path] = {"state": "skipped", "reason": reason}
        else:
            self.files[path] = {
                "state": "indexed",
                "passages": passages,
                "pages": pages,
                "unchanged": unchanged,
            }
        self.write()

    def set_phase(self, phase: Phase) -> None:
        self.phase = phase
        self.current_file = None
        self.write(force=True)

    def finish(self, error: str | None = None) -> None:
        self.error = error
        self.set_phase("failed" if error else "done")

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "files_total": self.files_total,
            "files_done": self.files_done,
            "passages": self.passages,
            "current_file": self.current_file,
            "elapsed_s": round(time.monotonic() - self._t0, 3),
            "files": self.files,
            "error": self.error,
        }

    def write(self, force: bool = False) -> None:
        if self.path is None:
            return
        now = time.monotonic()
        if not force and now - self._written < self.interval_s:
            return
        self._written = now
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.to_json(), ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, self.path)
