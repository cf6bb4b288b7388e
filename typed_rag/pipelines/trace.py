"""Progress and trace: what one question's run tells its listener and writes in its Result.

Every other part of the run (engine rounds, retrieval, citations) reports through one
:class:`Trace`, so that events, timings and fallbacks are written the same way wherever
they happen, and a broken listener can never break the answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from typed_rag.progress import Kind, Progress, ProgressSink
from typed_rag.result import Result

log = logging.getLogger(__name__)

# Where a question's time goes (``Result.timings``): routing's classification, plan rounds
# (with the follow-up rewrite and constraint detection), retrieval and reranking, the
# sub-answers (generated or extracted), the closed-book draft, the final answer, finishing.
STAGES = (
    "classify",
    "plan",
    "retrieve",
    "rerank",
    "sub_answers",
    "draft",
    "generate",
    "finish",
    "total",
)


@dataclass
class Trace:
    """The Result being written and the progress listener (None: nobody listens).

    ``about`` names the question in log lines; it is read at each fallback because routing
    may replace the question (standalone rewrite, core question) after the run started.
    """

    result: Result
    on_event: ProgressSink | None = None
    started: float = field(default_factory=time.perf_counter)
    about: Callable[[], str] = lambda: ""

    @property
    def listening(self) -> bool:
        """Whether anyone listens: events that cost work to build are skipped otherwise."""
        return self.on_event is not None

    def emit(self, kind: Kind, **data: Any) -> None:
        """Tell the listener (if any) that something now exists; never fails the run."""
        if self.on_event is None:
            return
        try:
            self.on_event(Progress(kind, time.perf_counter() - self.started, data))
        except Exception:  # noqa: BLE001 - a broken listener must not break the answer
            log.exception("progress listener failed on a %s event", kind)

    def set_plan(self, trace: dict[str, Any]) -> None:
        """Record the (final) plan in the trace and announce it."""
        self.result.plan.update(trace)
        self.emit("plan", plan=trace)

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        """Add the time spent inside to ``result.timings[stage]`` (a stage runs many times)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            timings = self.result.timings
            timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - start

    def fallback(self, note: str) -> None:
        """Record a degradation in the trace (never silent) and log it."""
        log.info("fallback for %r: %s", self.about()[:80], note)
        self.result.fallbacks.append(note)
        self.emit("fallback", note=note)
