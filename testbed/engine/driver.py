"""Runs an ``EngineModel`` in real time on the asyncio loop and fans token events out to requests.

Model time is the loop's monotonic clock. Steps start at the model's scheduled times (not at the
loop's late wake-ups), so scheduling jitter never accumulates into the modelled latencies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from inferslice.testbed.engine.model import EngineModel, EngineRequest, TokenEvent

log = logging.getLogger(__name__)


class EngineDriver:
    def __init__(self, model: EngineModel, clock: Callable[[], float] = time.monotonic) -> None:
        self.model = model
        self.clock = clock
        self._queues: dict[str, asyncio.Queue[TokenEvent]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def now(self) -> float:
        return self.clock()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="engine-driver")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def submit(self, replica_id: str, request: EngineRequest) -> asyncio.Queue[TokenEvent]:
        """Queue a request on a replica; its tokens arrive on the returned queue."""
        self.advance()
        queue: asyncio.Queue[TokenEvent] = asyncio.Queue()
        self._queues[request.id] = queue
        try:
            self.model.submit(replica_id, request, self.now())
        except ValueError:
            del self._queues[request.id]
            raise
        self._wake.set()
        return queue

    def abort(self, request_id: str) -> None:
        self._queues.pop(request_id, None)
        self.model.abort(request_id, self.now())
        self._wake.set()

    def remove_replica(self, replica_id: str) -> None:
        self.advance()
        self._dispatch(self.model.remove_replica(replica_id, self.now()))
        self._wake.set()

    def poke(self) -> None:
        """Something changed outside submit (a share, a new replica): recompute the next wake-up."""
        self._wake.set()

    def advance(self) -> None:
        """Bring the model up to now, so a new arrival never lands inside an earlier step."""
        self._dispatch(self.model.step(self.now()).events)

    def _dispatch(self, events: tuple[TokenEvent, ...] | list[TokenEvent]) -> None:
        for ev in events:
            queue = self._queues.get(ev.request_id)
            if queue is None:
                continue
            queue.put_nowait(ev)
            if ev.finish_reason is not None:
                del self._queues[ev.request_id]

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            due = self.model.next_event_time()
            delay = None if due is None else max(0.0, due - self.now())
            if delay is None or delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)
            else:
                await asyncio.sleep(0)  # never starve the loop, even if the model stalls
            self.advance()
