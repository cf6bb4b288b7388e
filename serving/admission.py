"""Back-pressure: at most ``max_concurrent`` requests run, at most ``max_queue`` wait.

A request beyond both limits is refused at once (429 with ``Retry-After``)
instead of piling up, so a client learns early that it should back off and
the server's latency stays bounded under overload.
"""

from __future__ import annotations

import asyncio

from serving.errors import overloaded
from serving.metrics import ServerMetrics


class Slot:
    """A reserved place: first in the waiting queue, then (after ``acquire``) running."""

    def __init__(self, admission: Admission) -> None:
        self._admission = admission
        self._waiting = True
        self._running = False

    async def acquire(self) -> None:
        """Wait for a free running slot. Cancellation leaves the queue cleanly."""
        adm = self._admission
        try:
            await adm._sem.acquire()
        except BaseException:
            self._leave_queue()
            raise
        self._leave_queue()
        self._running = True
        adm._metrics.in_flight.inc()

    def release(self) -> None:
        """Give the place back; safe to call more than once and from any state."""
        self._leave_queue()
        if self._running:
            self._running = False
            self._admission._sem.release()
            self._admission._metrics.in_flight.dec()

    def _leave_queue(self) -> None:
        if self._waiting:
            self._waiting = False
            self._admission._waiting -= 1
            self._admission._metrics.queue_depth.set(self._admission._waiting)


class Admission:
    """Semaphore of running requests plus a bounded count of waiting ones."""

    def __init__(self, max_concurrent: int, max_queue: int, metrics: ServerMetrics) -> None:
        if max_concurrent < 1:
            raise ValueError("server.max_concurrent must be at least 1")
        if max_queue < 0:
            raise ValueError("server.max_queue must be 0 or more")
        self.max_concurrent = max_concurrent
        self.max_queue = max_queue
        self._sem = asyncio.Semaphore(max_concurrent)
        self._waiting = 0
        self._metrics = metrics

    @property
    def waiting(self) -> int:
        return self._waiting

    def reserve(self) -> Slot:
        """Join the queue, or raise 429 when it is full (no free slot and no room to wait)."""
        if self._sem.locked() and self._waiting >= self.max_queue:
            raise overloaded(
                f"server busy: {self.max_concurrent} requests running and "
                f"{self._waiting} waiting (server.max_queue={self.max_queue}); retry later",
                status=429,
                retry_after_s=1,
            )
        self._waiting += 1
        self._metrics.queue_depth.set(self._waiting)
        return Slot(self)
