"""A file-backed actuator for the controller tests: the backend's whole state (replica targets, caps,
and the list of effective changes with the action id that made each) lives in one JSON file written
atomically, so a process killed with SIGKILL leaves either the change with its record or neither.
It keeps the Actuator contract: absolute targets, idempotent by action id."""

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
    ReplicaPlacement,
    TierObservation,
    require_kind,
)
from inferslice.topology import Topology


class FileActuator:
    name = "file"
    kinds = frozenset({ActionKind.SET_REPLICAS, ActionKind.SET_CAP})

    def __init__(self, path: Path, topology: Topology, apply_delay_s: float = 0.0) -> None:
        self.path = Path(path)
        self.topology = topology
        self.apply_delay_s = apply_delay_s
        if not self.path.exists():
            self._write({"tiers": {t.name: {"replicas": 1, "cap_bps": None} for t in topology.tiers}, "effects": []})

    def _read(self) -> dict[str, Any]:
        return json.loads(self.path.read_text())

    def _write(self, data: dict[str, Any]) -> None:
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            json.dump(data, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def observe(self) -> Mapping[str, TierObservation]:
        data = self._read()
        out = {}
        for t in self.topology.tiers:
            st = data["tiers"][t.name]
            reps = []
            for k in range(st["replicas"]):
                pop, _, gpu = t.placement[k].partition("/gpu")
                reps.append(ReplicaPlacement(f"{t.name}-{k}", pop, int(gpu)))
            out[t.name] = TierObservation(t.name, st["replicas"], tuple(reps), st["cap_bps"])
        return out

    def apply(self, action: Action) -> ApplyResult:
        require_kind(self, action)
        data = self._read()
        key = "replicas" if action.kind is ActionKind.SET_REPLICAS else "cap_bps"
        if any(e["id"] == action.id for e in data["effects"]) or data["tiers"][action.slice][key] == action.value:
            return ApplyResult(action.id, ApplyStatus.ALREADY_APPLIED)
        with open(self.path.with_name("begun.log"), "a") as fh:  # diagnostic only: shows a kill hit mid-apply
            fh.write(action.id + "\n")
        time.sleep(self.apply_delay_s)  # the window a SIGKILL should hit
        data["tiers"][action.slice][key] = action.value
        data["effects"].append({"id": action.id, "tier": action.slice, key: action.value})
        self._write(data)
        return ApplyResult(action.id, ApplyStatus.APPLIED)
