"""A Serve replica's engine at the tier's PoP: one placement slot claimed, its replica at the PoP's engine host.

Under ``inferslice testbed up --serving ray`` the Serve replicas run in the gateway namespace (where
Ray is) but their engines stay where a TierFront's would be: slot k's replica at the engine host of
``tier.placement[k]``, addressed by ``AddressPlan.replica(tier, k)``, so every request still crosses
the tier's overlay and the WAN delay to that PoP. A Serve replica does not know its index, so it
claims the lowest free slot by an exclusive ``flock`` on a file in the state directory, held for
the replica process's life (the kernel releases it when the process dies, so a crashed replica's
slot is free again and its successor adopts the engine still at the host). After the engine is
ready the replica writes a claim record beside the lock, which the serving supervisor joins with
Serve's replica list to publish the registry fragment (``serving.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

import aiohttp

from inferslice.common.files import atomic_write_json
from inferslice.errors import PermanentError, RetryableError
from inferslice.testbed.addressing import AddressPlan
from inferslice.testbed.engine.host_client import HostRefused, create_replica, list_replicas
from inferslice.topology import Topology

CLAIMS_DIR = "ray-slots"
ADMIN_TIMEOUT_S = 5.0
READY_TIMEOUT_S = 120.0  # the engine's cold start (a real vLLM's is ~30 s on 2 cores) plus a busy machine
POLL_S = 0.5


class NoFreeSlot(PermanentError):
    """More Serve replicas than the tier's placement has slots."""


class EngineNotReady(RetryableError):
    """The PoP's engine host refused the replica or it did not become ready in time."""


@dataclass(frozen=True)
class SlotClaim:
    """What a Serve replica serves from: its slot's engine, and who it is in Serve."""

    tier: str
    slot: int
    serve_replica_id: str  # Serve's replica unique_id, the ReplicaId tag of its ray_vllm_* series
    engine_id: str  # the engine host's replica id ("premium-0")
    pop: str
    gpu: int
    url: str  # the engine's OpenAI base URL at the PoP
    pid: int  # the Ray worker process holding the slot


def claims_dir(state_dir: str | Path) -> Path:
    return Path(state_dir) / CLAIMS_DIR


def _lock_path(state_dir: str | Path, tier: str, slot: int) -> Path:
    return claims_dir(state_dir) / f"{tier}-{slot}.lock"


def claim_path(state_dir: str | Path, tier: str, slot: int) -> Path:
    return claims_dir(state_dir) / f"{tier}-{slot}.json"


def claim_slot(state_dir: str | Path, tier: str, slots: int) -> tuple[int, IO[bytes]]:
    """The lowest slot whose lock is free, and the open locked file (keep it open to keep the slot)."""
    claims_dir(state_dir).mkdir(parents=True, exist_ok=True)
    for k in range(slots):
        f = _lock_path(state_dir, tier, k).open("ab")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            continue
        return k, f
    raise NoFreeSlot(f"{tier}: all {slots} placement slots are held by other Serve replicas")


def read_claims(state_dir: str | Path, tier: str) -> list[SlotClaim]:
    """The claim records of ``tier`` whose slot lock is still held (a dead replica's record is stale)."""
    out: list[SlotClaim] = []
    for p in sorted(claims_dir(state_dir).glob(f"{tier}-*.json")):
        try:
            claim = SlotClaim(**json.loads(p.read_text()))
        except (OSError, ValueError, TypeError):
            continue  # being replaced, or foreign
        if claim.tier == tier and _held(_lock_path(state_dir, tier, claim.slot)):
            out.append(claim)
    return out


def _held(lock: Path) -> bool:
    try:
        with lock.open("ab") as f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
            return False
    except OSError:
        return False


class PopEngine:
    """The slot's engine at its PoP's host, created (or adopted) for one Serve replica."""

    def __init__(self, topology: Topology, tier: str, state_dir: str, serve_replica_id: str) -> None:
        self.plan = AddressPlan(topology, "netns")
        self.tier = tier
        self.state_dir = state_dir
        self.serve_replica_id = serve_replica_id
        self.gpu_fraction = topology.tier(tier).gpu_per_replica
        self.slots = len(topology.tier(tier).placement)
        self._lock: IO[bytes] | None = None
        self.claim: SlotClaim | None = None

    async def start(self, session: aiohttp.ClientSession) -> SlotClaim:
        slot, self._lock = claim_slot(self.state_dir, self.tier, self.slots)
        pop, gpu = self.plan.slot_of(self.tier, slot)
        ep = self.plan.replica(self.tier, slot)
        claim = SlotClaim(self.tier, slot, self.serve_replica_id, self.plan.replica_id(self.tier, slot), pop, gpu, ep.url, os.getpid())
        admin = self.plan.host_admin(pop).url
        body = {"id": claim.engine_id, "tier": self.tier, "gpu": gpu, "gpu_fraction": self.gpu_fraction, "host": ep.host, "port": ep.port}
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:  # the engine host may still be starting: retry until the deadline
            try:
                # adopts the engine a previous holder of this slot left running (host_client's rule)
                await create_replica(session, admin, body, ADMIN_TIMEOUT_S)
                break
            except HostRefused as err:
                if not err.retry:
                    raise EngineNotReady(str(err)) from None
                if time.monotonic() > deadline:
                    raise EngineNotReady(f"{admin}: {err}") from None
                await asyncio.sleep(POLL_S)
            except (aiohttp.ClientError, TimeoutError) as err:
                if time.monotonic() > deadline:
                    raise EngineNotReady(f"{admin}: {err}") from None
                await asyncio.sleep(POLL_S)
        await self._wait_ready(session, admin, claim.engine_id, deadline)
        atomic_write_json(claim_path(self.state_dir, self.tier, slot), asdict(claim))
        self.claim = claim
        return claim

    async def _wait_ready(self, session: aiohttp.ClientSession, admin: str, engine_id: str, deadline: float) -> None:
        while time.monotonic() < deadline:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
                entries = await list_replicas(session, admin, ADMIN_TIMEOUT_S)
                if any(e.get("id") == engine_id and e.get("state") == "ready" for e in entries):
                    return
            await asyncio.sleep(POLL_S)
        raise EngineNotReady(f"{engine_id} at {admin} not ready within {READY_TIMEOUT_S:g} s")

    def release(self) -> None:
        """Drop the claim record and the slot lock (the engine itself is deleted by ``delete_engine``)."""
        if self.claim is not None:
            claim_path(self.state_dir, self.tier, self.claim.slot).unlink(missing_ok=True)
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def delete_url(self) -> str | None:
        if self.claim is None:
            return None
        return f"{self.plan.host_admin(self.claim.pop).url}/admin/replicas/{self.claim.engine_id}"
