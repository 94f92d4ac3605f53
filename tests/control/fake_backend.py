"""A file-backed actuator for the controller tests: the backend's whole state (replica targets, caps,
where moved replicas run, moves in flight with their successors, and the list of effective changes
with the action id that made each) lives in one JSON file written atomically, so a process killed
with SIGKILL leaves either the change with its record or neither. It keeps the Actuator contract:
absolute targets, idempotent by action id; a relocation is make-before-break over successive calls
(a successor starts, then serves, then the old replica drains), like the testbed front's moves."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inferslice.actions import Action, ActionKind
from inferslice.control.actuators.base import (
    ApplyResult,
    ApplyStatus,
    PermanentActuatorError,
    ReplicaPlacement,
    TierObservation,
    require_kind,
)
from inferslice.topology import Topology

# A move's phases, one per apply call: the successor starts, then serves beside the old replica, then the old one drains.
STARTING, SERVING, DONE = "starting", "serving", "done"


class FileActuator:
    name = "file"
    kinds = frozenset({ActionKind.SET_REPLICAS, ActionKind.SET_CAP, ActionKind.RELOCATE})

    def __init__(self, path: Path, topology: Topology, apply_delay_s: float = 0.0) -> None:
        self.path = Path(path)
        self.topology = topology
        self.apply_delay_s = apply_delay_s
        if not self.path.exists():
            tiers = {t.name: {"replicas": 1, "cap_bps": None, "moved": {}} for t in topology.tiers}
            self._write({"tiers": tiers, "effects": [], "moves": {}, "shares": {}})

    def _read(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.path.read_text())
        return data

    def _write(self, data: dict[str, Any]) -> None:
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            json.dump(data, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def _slot(self, data: dict[str, Any], tier: str, k: int) -> str:
        moved = data["tiers"][tier].get("moved", {})
        return str(moved.get(str(k), self.topology.tier(tier).placement[k]))

    def observe(self) -> Mapping[str, TierObservation]:
        data = self._read()
        shares = data.get("shares", {})
        out = {}
        for t in self.topology.tiers:
            st = data["tiers"][t.name]
            reps = []
            for k in range(st["replicas"]):
                slot = self._slot(data, t.name, k)
                pop, _, gpu = slot.partition("/gpu")
                reps.append(ReplicaPlacement(f"{t.name}-{k}", pop, int(gpu), "ready", float(shares.get(slot, 1.0))))
            for m in data.get("moves", {}).values():
                if m["tier"] == t.name and m["phase"] != DONE:  # the successor, beside the replica it replaces
                    pop, _, gpu = m["dest"].partition("/gpu")
                    reps.append(ReplicaPlacement(m["successor"], pop, int(gpu), "starting" if m["phase"] == STARTING else "ready"))
            out[t.name] = TierObservation(t.name, st["replicas"], tuple(reps), st["cap_bps"])
        return out

    def _begin(self, action: Action) -> None:
        with open(self.path.with_name("begun.log"), "a") as fh:  # diagnostic only: shows a kill hit mid-apply
            fh.write(action.id + "\n")
        time.sleep(self.apply_delay_s)  # the window a SIGKILL should hit

    def apply(self, action: Action) -> ApplyResult:
        require_kind(self, action)
        data = self._read()
        if action.kind is ActionKind.RELOCATE:
            return self._relocate(action, data)
        key = "replicas" if action.kind is ActionKind.SET_REPLICAS else "cap_bps"
        if any(e["id"] == action.id for e in data["effects"]) or data["tiers"][action.slice][key] == action.value:
            return ApplyResult(action.id, ApplyStatus.ALREADY_APPLIED)
        self._begin(action)
        data["tiers"][action.slice][key] = action.value
        data["effects"].append({"id": action.id, "tier": action.slice, key: action.value})
        self._write(data)
        return ApplyResult(action.id, ApplyStatus.APPLIED)

    def _relocate(self, action: Action, data: dict[str, Any]) -> ApplyResult:
        move = data["moves"].get(action.id)
        if move is not None and move["phase"] == DONE:
            return ApplyResult(action.id, ApplyStatus.ALREADY_APPLIED)
        self._begin(action)
        if move is None:
            n = data["tiers"][action.slice]["replicas"]
            k = next((k for k in range(n) if f"{action.slice}-{k}" == action.replica), None)
            if k is None or not isinstance(action.value, str):
                raise PermanentActuatorError(f"file: no replica {action.replica!r} in {action.slice}")
            if any(m["tier"] == action.slice and m["slot"] == k and m["phase"] != DONE for m in data["moves"].values()):
                raise PermanentActuatorError(f"file: {action.replica} is already moving")
            successor = f"{action.replica}-{action.id}"
            data["moves"][action.id] = {"tier": action.slice, "slot": k, "dest": action.value, "phase": STARTING, "successor": successor}
            self._write(data)
            return ApplyResult(action.id, ApplyStatus.IN_PROGRESS, f"starting {successor}")
        if move["phase"] == STARTING:
            move["phase"] = SERVING
            self._write(data)
            return ApplyResult(action.id, ApplyStatus.IN_PROGRESS, f"{move['successor']} serves beside {action.replica}")
        # SERVING: the old replica drains; its slot index now runs at the destination
        data["tiers"][action.slice].setdefault("moved", {})[str(move["slot"])] = move["dest"]
        move["phase"] = DONE
        data["effects"].append({"id": action.id, "tier": action.slice, "relocate": move["dest"], "slot": move["slot"]})
        self._write(data)
        return ApplyResult(action.id, ApplyStatus.APPLIED, f"{action.replica} drained")
