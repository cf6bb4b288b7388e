"""Append-only JSONL files keyed by (method, question_id): what makes a run resumable.

Each finished batch is appended and flushed to disk at once, so a run that
is killed loses at most the batch in flight. On open, a torn last line (the
process died mid-write) is cut off, and a key already present is never
written twice.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

Record = dict[str, Any]
KeyFn = Callable[[Record], str]


def method_question_key(record: Record) -> str:
    return f"{record['method']}\t{record['question_id']}"


class JsonlStore:
    """Records of one kind (answers, scores, ...) for one run directory."""

    def __init__(
        self, path: Path, key: KeyFn = method_question_key, readonly: bool = False
    ) -> None:
        self.path = Path(path)
        self.key = key
        self.readonly = readonly  # readers (reports) of a live run must not truncate it
        self._records: dict[str, Record] = {}
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        good_end = 0
        for lineno, line in enumerate(data.splitlines(keepends=True), start=1):
            if not line.endswith(b"\n"):
                log.warning("%s: dropping a torn last line (%d bytes)", self.path, len(line))
                break
            if line.strip():
                try:
                    record = json.loads(line)
                    self._records.setdefault(self.key(record), record)
                except (json.JSONDecodeError, KeyError, TypeError) as exc:
                    log.warning("%s:%d: skipping unreadable line (%s)", self.path, lineno, exc)
            good_end += len(line)
        if good_end < len(data) and not self.readonly:
            with self.path.open("r+b") as f:
                f.truncate(good_end)

    def __contains__(self, key: str) -> bool:
        return key in self._records

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self._records.values())

    def get(self, key: str) -> Record | None:
        return self._records.get(key)

    def append(self, records: Iterable[Record]) -> int:
        """Write the records whose key is new; returns how many were written."""
        if self.readonly:
            raise RuntimeError(f"{self.path} was opened read-only")
        fresh: list[Record] = []
        for record in records:
            k = self.key(record)
            if k in self._records:
                continue
            self._records[k] = record
            fresh.append(record)
        if not fresh:
            return 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        payload = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in fresh)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        return len(fresh)


def read_jsonl(path: Path) -> list[Record]:
    """All readable records of a JSONL file (missing file -> empty)."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    return out


def rewrite_jsonl(path: Path, records: Iterable[Record]) -> None:
    """Replace a JSONL file as a whole: written beside it, then renamed, so a reader never
    sees half of it (appending stays :meth:`JsonlStore.append`'s job)."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), "utf-8")
    tmp.replace(path)
