"""A tier's replica set: its slots' replicas created, deleted and watched at the PoPs' engine hosts.

Slot k of the tier is placed at tier.placement[k], addressed by AddressPlan.replica(tier, k) and named
AddressPlan.replica_id(tier, k), unless a move placed it elsewhere (``placed``: then replica_at /
replica_id_at of that PoP); the engine hosts' admin API (POST/DELETE/GET /admin/replicas) owns their
processes. Routability follows the replica's state: only a ready replica is routed to. During a move
the slot has two replicas: the one in ``by_slot`` and its successor in ``incoming`` (see moves.py).

Where moves put slots is persisted (``placement-<tier>.json`` in the state directory, written
atomically on every change): a restarted front re-creates a moved slot at the PoP it was moved to,
where the engine host still runs it (the host answers 409 with the replica, which the front adopts),
instead of starting a second copy at the slot's home placement.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from inferslice.common.files import atomic_write_json
from inferslice.common.registry import ReplicaEntry
from inferslice.testbed.addressing import AddressPlan
from inferslice.testbed.engine.host_client import create_replica, list_replicas
from inferslice.testbed.serving.router import RouterCore
from inferslice.topology import Tier

log = logging.getLogger(__name__)

ADMIN_TIMEOUT_S = 5.0
# A host drains in-flight requests (5 s), then cuts them and answers; past this deadline the front
# forgets the replica anyway so its slot is free (the host finishes the removal on its own).
DELETE_TIMEOUT_S = 15.0


@dataclass
class Replica:
    slot: int
    id: str
    pop: str
    gpu: int
    url: str
    admin_url: str
    state: str = "pending"  # pending (POST in flight) | starting | ready | stopping | unhealthy
    gpu_share: float = 1.0
    pid: int | None = None

    def apply(self, e: dict[str, Any]) -> None:
        """Take the state, GPU share and pid an engine host reported."""
        self.state = str(e.get("state", "starting"))
        self.gpu_share = float(e.get("gpu_share", 1.0))
        pid = e.get("pid")
        self.pid = int(pid) if isinstance(pid, int) else None

    def as_dict(self, in_flight: int) -> dict[str, Any]:
        return {
            "id": self.id,
            "slot": self.slot,
            "pop": self.pop,
            "gpu": self.gpu,
            "url": self.url,
            "state": self.state,
            "gpu_share": self.gpu_share,
            "in_flight": in_flight,
        }


def placement_path(state_dir: str | Path, tier: str) -> Path:
    return Path(state_dir) / f"placement-{tier}.json"


def load_placement(path: Path, pops: dict[str, int]) -> dict[int, tuple[str, int]]:
    """slot -> (pop, gpu) from a placement file; entries naming no PoP/GPU of this topology are dropped
    (the file may predate a topology change), and a missing or unreadable file means no moves."""
    try:
        data = json.loads(path.read_text())
        items = data["placed"].items()
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
    out: dict[int, tuple[str, int]] = {}
    for slot, where in items:
        try:
            k, pop, gpu = int(slot), str(where[0]), int(where[1])
        except (ValueError, TypeError, IndexError):
            continue
        if pop in pops and 0 <= gpu < pops[pop] and k >= 0:
            out[k] = (pop, gpu)
    return out


def registry_entries(tier_name: str, tier: Tier, replicas: Iterable[Replica]) -> list[ReplicaEntry]:
    """The registry's view of the set: a replica not yet (or no longer) known ready is starting."""
    return [
        ReplicaEntry(
            id=r.id,
            tier=tier_name,
            pop=r.pop,
            gpu=r.gpu,
            gpu_fraction=tier.gpu_per_replica,
            gpu_share=r.gpu_share,
            url=r.url,
            state={"pending": "starting", "unhealthy": "starting"}.get(r.state, r.state),
            pid=r.pid,
        )
        for r in sorted(replicas, key=lambda r: (r.slot, r.id))
    ]


class ReplicaSet:
    """The replicas of one tier, by slot, and the admin-API calls that change or read them."""

    def __init__(self, tier_name: str, tier: Tier, plan: AddressPlan, router: RouterCore, placement_file: Path | None = None) -> None:
        self.tier_name = tier_name
        self.tier = tier
        self.plan = plan
        self.router = router
        self.by_slot: dict[int, Replica] = {}
        self.incoming: dict[int, Replica] = {}  # slot -> the successor a move is starting
        self.placement_file = placement_file  # None: moves are not persisted (a front without a state dir)
        self.delete_timeout_s = DELETE_TIMEOUT_S  # the retire deadline (tests shorten it)
        pops = {p.name: p.gpus for p in plan.topology.pops}
        # slot -> (pop, gpu) a move put it at; change it through set_placed / clear_placed (they persist)
        self.placed: dict[int, tuple[str, int]] = load_placement(placement_file, pops) if placement_file else {}

    def set_placed(self, slot: int, pop: str, gpu: int) -> None:
        self.placed[slot] = (pop, gpu)
        self._save_placement()

    def clear_placed(self, slot: int) -> None:
        if self.placed.pop(slot, None) is not None:
            self._save_placement()

    def _save_placement(self) -> None:
        if self.placement_file is not None:
            placed = {str(k): [pop, gpu] for k, (pop, gpu) in sorted(self.placed.items())}
            atomic_write_json(self.placement_file, {"tier": self.tier_name, "placed": placed})

    def all(self) -> list[Replica]:
        return [*self.by_slot.values(), *self.incoming.values()]

    def sorted(self) -> list[Replica]:
        return sorted(self.all(), key=lambda r: (r.slot, r.id))

    def url_of(self, rid: str) -> str | None:
        for r in self.all():
            if r.id == rid:
                return r.url
        return None

    def holds(self, rid: str) -> bool:
        return any(r.id == rid for r in self.all())

    def by_id(self, rid: str) -> Replica | None:
        return next((r for r in self.by_slot.values() if r.id == rid), None)

    def home(self, slot: int) -> tuple[str, int]:
        """Where a new replica of ``slot`` starts: its placement entry, unless the tier's other live
        replicas already fill that entry (one was moved onto it): then the first placement entry they
        leave unfilled, remembered as a move's would be. A slot never over-fills its GPU that way, and
        it is the rule the controller's guardrails assume (``control.guardrails.new_replica_slots``)."""
        if slot in self.placed:
            return self.placed[slot]
        default = self.plan.slot_of(self.tier_name, slot)
        live = Counter((r.pop, r.gpu) for r in self.all() if r.slot != slot and r.state != "stopping")
        unfilled: list[tuple[str, int]] = []
        for k in range(len(self.tier.placement)):
            entry = self.plan.slot_of(self.tier_name, k)
            if live[entry] > 0:
                live[entry] -= 1
            else:
                unfilled.append(entry)
        if default in unfilled or not unfilled:
            return default
        self.set_placed(slot, *unfilled[0])
        return unfilled[0]

    def place(self, slot: int, pop: str | None = None, gpu: int | None = None) -> Replica:
        """The replica of ``slot`` at ``pop``/``gpu`` (default: where a move put it, else its ``home``)."""
        if pop is None or gpu is None:  # a move names its destination: the slot's home is not asked (nor remembered)
            home_pop, home_gpu = self.home(slot)
            pop = home_pop if pop is None else pop
            gpu = home_gpu if gpu is None else gpu
        ep = self.plan.replica_at(self.tier_name, slot, pop)
        rid = self.plan.replica_id_at(self.tier_name, slot, pop)
        return Replica(slot, rid, pop, gpu, ep.url, self.plan.host_admin(pop).url)

    def missing_slots(self, target: int) -> list[int]:
        return [k for k in range(target) if k not in self.by_slot]

    def retire(self, target: int) -> list[Replica]:
        """Mark the replicas at slots >= target stopping (unroutable) and return them for deletion."""
        out = []
        for r in list(self.by_slot.values()):
            if r.slot >= target and r.state not in ("pending", "stopping"):
                r.state = "stopping"
                self.router.set_routable(r.id, False)
                self.clear_placed(r.slot)  # a slot created again later starts at its placement
                out.append(r)
        return out

    async def create(self, session: aiohttp.ClientSession, slot: int) -> bool:
        """Ask the slot's PoP host for the replica (adopting one a previous front created); False to retry later."""
        r = self.place(slot)
        self.by_slot[slot] = r
        if await self.start(session, r):
            return True
        self.by_slot.pop(slot, None)  # retried on a later tick
        return False

    async def start(self, session: aiohttp.ClientSession, r: Replica) -> bool:
        """POST the replica to its PoP's engine host; it cold-starts there. False if the host refused."""
        host, _, port = r.url.removeprefix("http://").rpartition(":")
        rid, admin = r.id, r.admin_url
        body = {"id": rid, "tier": self.tier_name, "gpu": r.gpu, "gpu_fraction": self.tier.gpu_per_replica, "host": host, "port": int(port)}
        try:
            data = await create_replica(session, admin, body, ADMIN_TIMEOUT_S)
        except (aiohttp.ClientError, TimeoutError) as err:
            log.warning("front %s: cannot create %s at %s: %s", self.tier_name, rid, admin, err)
            return False
        r.apply(data)
        self.router.add_replica(rid, routable=r.state == "ready")
        return True

    async def delete(self, session: aiohttp.ClientSession, r: Replica) -> None:
        """DELETE the replica at its host, then forget it, whatever the host answered (404: already gone)
        or if it did not answer within delete_timeout_s: a retire always frees the slot."""
        try:
            url = f"{r.admin_url}/admin/replicas/{r.id}"
            async with session.delete(url, timeout=aiohttp.ClientTimeout(total=self.delete_timeout_s)) as resp:
                await resp.read()
                if resp.status >= 400 and resp.status != 404:
                    log.warning("front %s: delete %s answered %d; forgetting it", self.tier_name, r.id, resp.status)
        except (aiohttp.ClientError, TimeoutError) as err:
            log.warning("front %s: cannot delete %s (%s); forgetting it", self.tier_name, r.id, str(err) or type(err).__name__)
        finally:  # also when cancelled (front stop): the slot must not stay 'stopping'
            if self.by_slot.get(r.slot) is r:
                del self.by_slot[r.slot]
            if self.router.in_flight(r.id) == 0:
                self.router.remove_replica(r.id)

    async def refresh(self, session: aiohttp.ClientSession) -> None:
        """Read replica states (starting/ready, GPU share) from the engine hosts' admin APIs."""
        admins = {r.admin_url for r in self.all() if r.state not in ("pending", "stopping")}
        for admin in admins:
            try:
                entries = {e["id"]: e for e in await list_replicas(session, admin, ADMIN_TIMEOUT_S)}
            except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError):
                entries = None
            for r in self.all():
                if r.admin_url != admin or r.state in ("pending", "stopping"):
                    continue
                if entries is None or r.id not in entries:
                    r.state = "unhealthy"
                else:
                    r.apply(entries[r.id])
                    if r.state == "stopping":
                        r.state = "unhealthy"  # stopping, but not by us: the replica is going away
                self.router.set_routable(r.id, r.state == "ready")
