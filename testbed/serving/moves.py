"""Make-before-break moves of a tier's replicas between PoPs.

A move of slot k to PoP X starts a successor at X's engine host (``ReplicaSet.incoming``; it is
routed to once ready, alongside the replica it replaces), waits until the successor serves, then
swaps it into the slot, marks the old replica unroutable and deletes it (its host drains in-flight
requests first). So a request is never without a ready replica because of a move. A move is named
by its caller's id: asking again with the same id returns the same move (the controller's actuator
retries by action id). If the successor does not serve within its time limit, or the slot is
scaled away meanwhile, the successor is deleted and the old replica keeps serving.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from inferslice.testbed.serving.replicas import Replica, ReplicaSet

log = logging.getLogger(__name__)

POLL_S = 0.1  # how often a move looks at its successor's state (the front refreshes states every tick)


class MoveRefused(Exception):
    """The move cannot start as asked; ``status`` is the HTTP status the admin API answers."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Move:
    id: str
    replica: str  # the replica that moves
    slot: int
    source: str  # "pop/gpuN"
    dest: str  # "pop/gpuN"
    phase: str = "starting"  # starting (successor cold-starts) | draining (old one) | done | failed
    successor: str | None = None
    detail: str = ""
    started_s: float = field(default_factory=time.time)
    finished_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def check_move(rs: ReplicaSet, moves: dict[str, Move], replica: str, pop: str, gpu: int, pops: dict[str, int]) -> Replica:
    """The replica to move, or MoveRefused naming why not (422 bad destination, 404, 409)."""
    if pop not in pops:
        raise MoveRefused(f"pop must be one of {sorted(pops)}", 422)
    if not 0 <= gpu < pops[pop]:
        raise MoveRefused(f"gpu must be within [0, {pops[pop] - 1}] at {pop}", 422)
    r = rs.by_id(replica)
    if r is None:
        raise MoveRefused(f"no replica {replica!r} in tier {rs.tier_name}", 404)
    if r.slot in rs.incoming or any(m.slot == r.slot and m.phase in ("starting", "draining") for m in moves.values()):
        raise MoveRefused(f"{replica} is already moving", 409)
    if r.state in ("pending", "stopping"):
        raise MoveRefused(f"{replica} is {r.state}", 409)
    return r


async def run_move(
    move: Move,
    rs: ReplicaSet,
    session: aiohttp.ClientSession,
    old: Replica,
    pop: str,
    gpu: int,
    *,
    ready_timeout_s: float,
    publish: Callable[[], None],
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Drive ``move`` to done or failed (see the module docstring)."""
    if old.pop == pop and old.gpu == gpu:
        move.phase, move.detail, move.finished_s = "done", "already there", time.time()
        return
    new = rs.place(old.slot, pop, gpu)
    move.successor = new.id
    rs.incoming[old.slot] = new
    publish()
    try:
        if not await rs.start(session, new):
            raise _Abort(f"the engine host at {pop} refused {new.id}")
        deadline = clock() + ready_timeout_s
        while new.state != "ready":
            if rs.by_slot.get(old.slot) is not old:
                raise _Abort(f"slot {old.slot} was scaled away during the move")
            if clock() > deadline:
                raise _Abort(f"{new.id} did not serve within {ready_timeout_s:g} s")
            await asyncio.sleep(POLL_S)
    except (_Abort, asyncio.CancelledError) as err:
        rs.incoming.pop(old.slot, None)
        new.state = "stopping"
        rs.router.set_routable(new.id, False)
        await rs.delete(session, new)
        publish()
        move.phase, move.detail, move.finished_s = "failed", str(err) or "cancelled", time.time()
        log.warning("front %s: move %s failed: %s", rs.tier_name, move.id, move.detail)
        if isinstance(err, asyncio.CancelledError):
            raise
        return
    # The successor serves: it takes the slot, then the old replica stops taking requests and drains.
    rs.incoming.pop(old.slot, None)
    rs.by_slot[old.slot] = new
    rs.set_placed(old.slot, pop, gpu)  # persisted: a restarted front keeps the slot here
    old.state = "stopping"
    rs.router.set_routable(old.id, False)
    move.phase = "draining"
    publish()
    await rs.delete(session, old)
    publish()
    move.phase, move.finished_s = "done", time.time()
    log.info("front %s: moved %s to %s/gpu%d as %s", rs.tier_name, old.id, pop, gpu, new.id)


class _Abort(Exception):
    pass
