"""Resume bookkeeping shared by every resumable run (Wiki-NFQA, constraints).

A run directory holds JSONL stores keyed by ``"<method or arm>\\t<question_id>"``.
A phase asks which items are not stored yet (:func:`split_pending`) or which stored
answers still lack a judgement (:func:`awaiting_judgement`), counts what it finds
done (:class:`PhaseCounts`), and appends each finished batch at once
(:func:`store_batch`), so an interrupted run loses nothing and a rerun only does
what is missing. Generators and judges are loaded only when a phase has work
(:class:`Lazy`).
"""

from __future__ import annotations

import inspect
import sys
import time
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tqdm import tqdm

from eval.store import JsonlStore

T = TypeVar("T")


class EvalAborted(RuntimeError):
    """The generator or scorer failed for a whole batch; finished work is kept."""


@dataclass
class PhaseCounts:
    """How much a phase did now versus found already done (resume)."""

    done_before: int = 0
    computed: int = 0
    failed: int = 0


def run_key(method: str, question_id: str) -> str:
    """The store key of one method's (or arm's) record for one question."""
    return f"{method}\t{question_id}"


def split_pending(
    items: Sequence[T], key: Callable[[T], str], done: Container[str]
) -> tuple[list[T], PhaseCounts]:
    """The items whose key is not in ``done``, and the count of those that are."""
    pending = [it for it in items if key(it) not in done]
    return pending, PhaseCounts(done_before=len(items) - len(pending))


def awaiting_judgement(
    labels: Sequence[str],
    items: Sequence[T],
    question_id: Callable[[T], str],
    answers: JsonlStore,
    judged: Container[str],
) -> tuple[list[tuple[str, T, dict[str, Any]]], PhaseCounts]:
    """Stored answers without a judgement, in (label, item) order; judged ones are counted."""
    todo: list[tuple[str, T, dict[str, Any]]] = []
    counts = PhaseCounts()
    for label in labels:
        for item in items:
            key = run_key(label, question_id(item))
            answer = answers.get(key)
            if answer is None:
                continue
            if key in judged:
                counts.done_before += 1
            else:
                todo.append((label, item, answer))
    return todo, counts


def error_row(phase: str, method: str, question_id: str, exc: BaseException) -> dict[str, Any]:
    """One line of ``errors.jsonl``."""
    return {
        "at": time.time(),
        "phase": phase,
        "method": method,
        "question_id": question_id,
        "error": f"{type(exc).__name__}: {exc}",
    }


def write_errors(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Append error rows to ``errors.jsonl`` (nothing when there are none)."""
    if rows:
        JsonlStore(path, key=lambda r: f"{r['at']}\t{r['question_id']}").append(rows)


def store_batch(
    store: JsonlStore,
    records: Sequence[dict[str, Any]],
    errors: Sequence[dict[str, Any]],
    size: int,
    counts: PhaseCounts,
    errors_path: Path,
    what: str,
) -> None:
    """Append one answered batch of ``size``; abort the run if every question of it failed."""
    write_errors(errors_path, errors)
    counts.failed += size - len(records)
    if not records:
        raise EvalAborted(f"every question of a batch failed {what}; see {errors_path}")
    store.append(records)
    counts.computed += len(records)


def progress_bar(total: int, desc: str, enabled: bool = True) -> tqdm:
    """A per-question progress bar (rate and ETA) on stderr."""
    return tqdm(
        total=total, desc=desc, unit="q", disable=not enabled, file=sys.stderr, dynamic_ncols=True
    )


class Lazy:
    """An object given directly, or built on first use by a factory (then started and closed here)."""

    def __init__(self, target: Any, is_factory: bool) -> None:
        self._target = target
        self._factory = is_factory
        self._obj: Any = None if is_factory else target

    async def get(self) -> Any:
        if self._obj is None:
            obj = self._target()
            if inspect.isawaitable(obj):
                obj = await obj
            if hasattr(obj, "start"):
                await obj.start()
            self._obj = obj
        return self._obj

    async def close(self) -> None:
        if self._factory and self._obj is not None and hasattr(self._obj, "close"):
            await self._obj.close()
            self._obj = None


def lazy(target: Any, method: str) -> Lazy:
    """Objects with ``method`` are used as they are; anything else callable is a factory."""
    if hasattr(target, method):
        return Lazy(target, is_factory=False)
    if callable(target):
        return Lazy(target, is_factory=True)
    raise TypeError(f"expected an object with {method}() or a factory, got {target!r}")
