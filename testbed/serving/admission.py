"""Admission to a tier's replicas: a request waits (FIFO, at the router) until a replica has room.

The bookkeeping is RouterCore's (pure); this adds the waiting: one future per queued request,
resolved with its replica when dispatch frees a slot, and a cancelled request's slot given back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable

from inferslice.testbed.serving.router import RouterCore


class Admission:
    def __init__(self, router: RouterCore, is_member: Callable[[str], bool]) -> None:
        self.router = router
        self._is_member = is_member  # whether a replica id is still in the tier's set
        self._waiters: dict[Hashable, asyncio.Future[str]] = {}

    def dispatch(self) -> None:
        """Hand freed slots to the queued requests, oldest first."""
        for token, rid in self.router.dispatch():
            fut = self._waiters.pop(token, None)
            if fut is None or fut.done():
                self.router.release(rid)
                continue
            fut.set_result(rid)

    async def acquire(self) -> str:
        """A replica id with a slot reserved for the caller (who must ``release`` it)."""
        token = object()
        rid = self.router.try_assign(token)
        if rid is not None:
            return rid
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiters[token] = fut
        try:
            return await fut
        except asyncio.CancelledError:
            self.router.cancel(token)
            self._waiters.pop(token, None)
            if fut.done() and not fut.cancelled():
                self.release(fut.result())
            raise

    def release(self, rid: str) -> None:
        self.router.release(rid)
        if self.router.in_flight(rid) == 0 and not self._is_member(rid):
            self.router.remove_replica(rid)  # deleted while busy: forget it once idle
        self.dispatch()

    def cancel_all(self) -> None:
        for fut in self._waiters.values():
            if not fut.done():
                fut.cancel()
