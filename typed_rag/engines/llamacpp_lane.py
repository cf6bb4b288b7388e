"""The llama.cpp engine's short lane: short requests never wait for a long engine call.

On two cores one context runs one request at a time, and a Typed-RAG request's engine
calls (plan, sub-answers, final answer) take tens of seconds each. A short request
(``priority`` > 0: the ``llm`` mode or a small ``max_tokens``) therefore goes to a second
context over the same memory-mapped weights, with its own worker thread, made at the first
short request. While the lane runs a job, the main context pauses at its next token or
prompt block (``_pause``), so the short request has the cores to itself. A lane whose
context cannot be made hands its jobs back to the main queue.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from typed_rag.engines.base import ChatRequest
from typed_rag.engines.llamacpp_jobs import Job

log = logging.getLogger(__name__)


class ShortLane:
    """Mixed into :class:`~typed_rag.engines.llamacpp.LlamaCppEngine` (its queue and
    fields ``_queue``, ``_arrival``, ``_fatal``, ``_spawn`` and the constructor's)."""

    _queue: Any
    _arrival: Any
    _fatal: BaseException | None

    def __init__(self) -> None:
        self._lane: Any = None  # the main context's lane, once made
        self._lane_lock = threading.Lock()
        self._main: Any = None  # a lane's main context
        self.idle = threading.Event()  # a lane's: clear while it runs a job
        self.idle.set()

    def _put(self, job: Job) -> None:
        priority = getattr(job.request, "priority", 0)
        if priority > 0 and isinstance(job.request, ChatRequest):
            with self._lane_lock:
                if self._main is None and self._lane is None:
                    self._lane = self._make_lane()
                if self._lane is not None and self._lane._fatal is None:
                    self._lane._queue.put((0, next(self._arrival), job))
                    return
        self._queue.put((-priority, next(self._arrival), job))

    def _make_lane(self) -> Any:
        e: Any = self
        lane = type(self)(
            e.model_path, n_ctx=e.n_ctx, n_threads=e.n_threads, n_batch=e.n_batch,
            prompt_cache_mib=0, model_name=e.model,
        )  # fmt: skip
        lane._main = self
        lane._spawn()
        return lane

    def _pause(self) -> None:
        """Wait while the short lane runs a job (the lane has the cores meanwhile)."""
        lane = self._lane
        if lane is not None:
            lane.idle.wait()

    def _lane_failed(self, exc: BaseException) -> None:
        """A lane that could not load: its jobs go back to the main queue, and later ones too."""
        with self._main._lane_lock:
            self._fatal = exc
            while not self._queue.empty():
                self._main._queue.put(self._queue.get())
        log.warning("no short lane (%s): short requests share the main context", exc)
