"""Back-pressure and fair scheduling: who runs now, who waits, who is told to come back.

At most ``max_concurrent`` requests run and at most ``max_queue`` wait, first come
first served; a request beyond both is refused at once (429 with ``Retry-After``), so
a client learns early that it should back off and latency stays bounded under load.

Short requests (no plan round and a small answer, see
:attr:`typed_rag.request.Resolved.short`) also have a small lane: ``short_slots``
more places that only they may take, and only while a long request runs. A short
question thus never waits behind typed pipelines, while short requests among
themselves queue as usual. (The engine runs their calls first, too.)
"""

from __future__ import annotations

import asyncio
from collections import deque

from serving.errors import overloaded
from serving.metrics import ServerMetrics
from serving.training_pause import TrainingPause


class Slot:
    """A reserved place: first in the waiting queue, then (once granted) running."""

    def __init__(self, admission: Admission, short: bool) -> None:
        self._admission = admission
        self.short = short
        self.lane = False  # runs in the short lane (not in one of the max_concurrent slots)
        self._granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._released = False

    @property
    def running(self) -> bool:
        return self._granted.done() and not self._released

    @property
    def position(self) -> int:
        """1 for the first in the queue, 2 for the next ...; 0 once running or gone."""
        try:
            return self._admission._queue.index(self) + 1
        except ValueError:
            return 0

    async def acquire(self) -> None:
        """Wait until this request may run. Cancellation leaves the queue cleanly."""
        try:
            await asyncio.shield(self._granted)
        except BaseException:
            self.release()
            raise

    async def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the grant; True once it may run."""
        if not self._granted.done():
            await asyncio.wait({self._granted}, timeout=timeout)
        return self._granted.done()

    def release(self) -> None:
        """Give the place back; safe to call more than once and from any state."""
        if self._released:
            return
        self._released = True
        self._admission._leave(self)


class Admission:
    """Running slots (plus the short lane) and a bounded FIFO queue of waiting requests."""

    def __init__(
        self,
        max_concurrent: int,
        max_queue: int,
        metrics: ServerMetrics,
        short_slots: int = 0,
        pause: TrainingPause | None = None,
    ) -> None:
        if max_concurrent < 1:
            raise ValueError("server.max_concurrent must be at least 1")
        if max_queue < 0 or short_slots < 0:
            raise ValueError("server.max_queue and server.short_slots must be 0 or more")
        self.max_concurrent = max_concurrent
        self.max_queue = max_queue
        self.short_slots = short_slots
        self._queue: deque[Slot] = deque()
        self._running: set[Slot] = set()
        self._metrics = metrics
        self._pause = pause  # background training waits while any request runs

    @property
    def waiting(self) -> int:
        return len(self._queue)

    def reserve(self, short: bool = False) -> Slot:
        """Join the queue (running at once if there is room), or raise 429 when it is full."""
        slot = Slot(self, short)
        if not self._grant(slot) and len(self._queue) >= self.max_queue:
            raise overloaded(
                f"server busy: {self.max_concurrent} requests running and "
                f"{len(self._queue)} waiting (server.max_queue={self.max_queue}); retry later",
                status=429,
                retry_after_s=1,
            )
        if slot.running:
            self._dispatch()  # a long request started: the short lane may have opened
        else:
            self._queue.append(slot)
            self._metrics.queue_depth.set(len(self._queue))
        return slot

    def _grant(self, slot: Slot) -> bool:
        """Let ``slot`` run if a place is free for it: a general one, or the short lane's."""
        general = sum(1 for s in self._running if not s.lane)
        if general < self.max_concurrent:
            slot.lane = False
        elif slot.short and self._lane_open():
            slot.lane = True
        else:
            return False
        self._running.add(slot)
        if self._pause is not None and len(self._running) == 1:
            self._pause.busy()
        slot._granted.set_result(None)
        self._metrics.in_flight.inc()
        return True

    def _lane_open(self) -> bool:
        lane = sum(1 for s in self._running if s.lane)
        return lane < self.short_slots and any(not s.short for s in self._running)

    def _leave(self, slot: Slot) -> None:
        if slot in self._running:
            self._running.discard(slot)
            self._metrics.in_flight.dec()
            if self._pause is not None and not self._running:
                self._pause.idle()
        elif slot in self._queue:
            self._queue.remove(slot)
        self._dispatch()

    def _dispatch(self) -> None:
        """Start every waiting request that now has a place, in arrival order."""
        started = True
        while started:  # a long request that starts may open the lane to earlier short ones
            started = False
            for slot in list(self._queue):
                if self._grant(slot):
                    self._queue.remove(slot)
                    started = True
        self._metrics.queue_depth.set(len(self._queue))
