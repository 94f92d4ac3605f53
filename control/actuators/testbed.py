"""The testbed actuator: replica counts through each tier front's admin API, caps through the
testbed's own operator command, relocations through the front's make-before-break moves. Only
published interfaces: the registry file (where the fronts and the client-edge links are), the
front's admin API (``GET /admin/state``, ``PUT /admin/autoscale``, ``PUT /admin/replicas``,
``POST /admin/moves``, ``GET /admin/moves/{id}``, documented in ``testbed/serving/admin.py``) and
``inferslice testbed cap`` (which changes the HTB class live and keeps the testbed's state and
registry truthful). No testbed module is imported.

A relocation (value ``"pop"`` or the policy's ``"pop/gpuN"`` slot, ``replica`` the id that moves) is
the front's move named by the action id: the first ``apply`` starts it and returns IN_PROGRESS (the
successor cold-starts), later ones read it by id and return APPLIED once the old replica drained.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from inferslice.actions import Action, ActionKind
from inferslice.common.placement import placement_from_front
from inferslice.common.registry import DEFAULT_STATE_DIR, Registry, read_registry
from inferslice.control.actuators.base import (
    ApplyResult,
    ApplyStatus,
    PermanentActuatorError,
    RetryableActuatorError,
    TierObservation,
    require_kind,
)
from inferslice.errors import InferSliceError, ParseError

ADMIN_TIMEOUT_S = 5.0  # local admin calls; a slower answer means the front is stuck
CAP_TIMEOUT_S = 20.0  # the cap command starts an interpreter and talks netlink
Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=CAP_TIMEOUT_S, check=False)


class TestbedActuator:
    name = "testbed"
    kinds = frozenset({ActionKind.SET_REPLICAS, ActionKind.SET_CAP, ActionKind.RELOCATE})
    __test__ = False  # not a pytest class

    def __init__(self, state_dir: str | Path = DEFAULT_STATE_DIR, runner: Runner = _run, client: httpx.Client | None = None) -> None:
        self.state_dir = Path(state_dir)
        self.runner = runner
        self.client = client or httpx.Client(timeout=ADMIN_TIMEOUT_S)
        self._fronts: dict[str, int | None] | None = None  # the fronts' PIDs of the testbed first seen

    # -- reads -------------------------------------------------------------------------------------
    def _registry(self) -> Registry:
        try:
            reg = read_registry(self.state_dir)
        except InferSliceError as err:  # SourceUnavailable (testbed down) or a half-written registry
            raise RetryableActuatorError(f"testbed registry: {err}") from None
        fronts = {f.tier: f.pid for f in reg.fronts}
        if self._fronts is None:
            self._fronts = fronts
        elif fronts != self._fronts:
            # Another testbed was built in this state directory (the one this controller served went
            # down): acting on it would move someone else's replicas and caps.
            raise PermanentActuatorError(f"the testbed in {self.state_dir} is not the one this controller started on (fronts changed)")
        return reg

    def _call(self, method: str, url: str, body: dict[str, Any] | None = None, *, missing_ok: bool = False) -> dict[str, Any]:
        try:
            resp = self.client.request(method, url, json=body)
        except httpx.HTTPError as err:
            raise RetryableActuatorError(f"{method} {url}: {err}") from None
        if missing_ok and resp.status_code == 404:
            return {}
        if resp.status_code in (400, 404, 422):
            raise PermanentActuatorError(f"{method} {url}: HTTP {resp.status_code}: {resp.text[:200]}")
        if resp.status_code >= 300:
            raise RetryableActuatorError(f"{method} {url}: HTTP {resp.status_code}: {resp.text[:200]}")
        data = resp.json()
        return data if isinstance(data, dict) else {}

    def _cap_of(self, reg: Registry, tier: str) -> float | None:
        for link in reg.links:
            if link.kind == "access" and link.tier == tier and link.direction == "receive":
                return link.cap_bps
        return None

    def observe(self) -> Mapping[str, TierObservation]:
        reg = self._registry()
        out: dict[str, TierObservation] = {}
        for front in reg.fronts:
            st = self._call("GET", f"{front.admin_url}/admin/state")
            try:
                reps = tuple(placement_from_front(r) for r in st.get("replicas", []))
            except ParseError as err:
                raise RetryableActuatorError(f"{front.admin_url}/admin/state: {err}") from None
            out[front.tier] = TierObservation(
                front.tier, int(st.get("target", len(reps))), reps, self._cap_of(reg, front.tier), st.get("mode") == "fixed"
            )
        return out

    # -- writes ------------------------------------------------------------------------------------
    def apply(self, action: Action) -> ApplyResult:
        require_kind(self, action)
        reg = self._registry()
        front = reg.front(action.slice)
        if front is None:
            raise PermanentActuatorError(f"no serving front for tier {action.slice!r} in the testbed registry")
        if action.kind is ActionKind.RELOCATE:
            return self._relocate(action, front.admin_url)
        if action.kind is ActionKind.SET_REPLICAS:
            if isinstance(action.value, bool) or not isinstance(action.value, (int, float)):
                raise PermanentActuatorError(f"replicas must be a number, got {action.value!r}")
            n = int(action.value)
            st = self._call("GET", f"{front.admin_url}/admin/state")
            if st.get("mode") == "fixed" and int(st.get("target", -1)) == n:
                return ApplyResult(action.id, ApplyStatus.ALREADY_APPLIED)
            if st.get("mode") != "fixed":  # the front takes a fixed count only with its own autoscaler off
                self._call("PUT", f"{front.admin_url}/admin/autoscale", {"enabled": False})
            self._call("PUT", f"{front.admin_url}/admin/replicas", {"replicas": n})
            return ApplyResult(action.id, ApplyStatus.APPLIED, f"{action.slice}: {n} replicas (cold start follows)")
        # SET_CAP
        if isinstance(action.value, bool) or not isinstance(action.value, (int, float)) or action.value <= 0:
            raise PermanentActuatorError(f"a cap is a positive bit rate, got {action.value!r}")
        cap = float(action.value)
        current = self._cap_of(reg, action.slice)
        if current is not None and abs(current - cap) <= 1.0:
            return ApplyResult(action.id, ApplyStatus.ALREADY_APPLIED)
        argv = [
            sys.executable,
            "-m",
            "inferslice.cli",
            "testbed",
            "cap",
            action.slice,
            str(round(cap)),
            "--state-dir",
            str(self.state_dir),
        ]
        try:
            done = self.runner(argv)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise RetryableActuatorError(f"inferslice testbed cap: {err}") from None
        if done.returncode != 0:
            text = (done.stderr or done.stdout or "").strip()[-300:]
            kind = PermanentActuatorError if "unknown tier" in text or "root" in text else RetryableActuatorError
            raise kind(f"inferslice testbed cap {action.slice} {cap:g}: exit {done.returncode}: {text}")
        return ApplyResult(action.id, ApplyStatus.APPLIED, f"{action.slice}: receive cap {cap / 1e6:g} Mbit/s")

    def _relocate(self, action: Action, admin_url: str) -> ApplyResult:
        dest = action.value
        if not isinstance(dest, str) or not dest or not action.replica:
            raise PermanentActuatorError(
                f"relocate needs a destination PoP (or pop/gpuN) and the replica, got {dest!r}, {action.replica!r}"
            )
        pop, _, gpu_text = dest.partition("/")
        if gpu_text and not (gpu_text.startswith("gpu") and gpu_text[3:].isdigit()):
            raise PermanentActuatorError(f"relocate destination {dest!r} is not pop or pop/gpuN")
        gpu = int(gpu_text[3:]) if gpu_text else 0
        move = self._call("GET", f"{admin_url}/admin/moves/{quote(action.id, safe='')}", missing_ok=True)
        if not move:  # not started yet (the front answers 404 for an unknown replica: permanent)
            move = self._call("POST", f"{admin_url}/admin/moves", {"id": action.id, "replica": action.replica, "pop": pop, "gpu": gpu})
            return ApplyResult(
                action.id,
                ApplyStatus.IN_PROGRESS,
                f"starting {move.get('successor') or 'a replica'} at {pop} before {action.replica} drains",
            )
        phase = move.get("phase")
        if phase == "done":
            return ApplyResult(
                action.id,
                ApplyStatus.APPLIED,
                f"{action.replica} drained; its slot serves at {move.get('dest')} as {move.get('successor')}",
            )
        if phase == "failed":
            raise PermanentActuatorError(f"relocate {action.replica} to {dest}: {move.get('detail')}")
        return ApplyResult(action.id, ApplyStatus.IN_PROGRESS, f"{action.replica} -> {move.get('dest')}: {phase}")
