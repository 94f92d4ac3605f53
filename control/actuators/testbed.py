"""The testbed actuator: replica counts through each tier front's admin API, caps through the
testbed's own operator command. Only published interfaces: the registry file (where the fronts and
the client-edge links are), the front's admin API (``GET /admin/state``, ``PUT /admin/autoscale``,
``PUT /admin/replicas``, documented in ``testbed/serving/front.py``) and ``inferslice testbed cap``
(which changes the HTB class live and keeps the testbed's state and registry truthful). No testbed
module is imported.

Relocation is not offered: the testbed front places replica k of a tier at ``placement[k]`` and has
no API to place one elsewhere, so ``RELOCATE`` is a permanent error here (the Kubernetes actuator
does it with node affinity).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from inferslice.actions import Action, ActionKind
from inferslice.common.registry import DEFAULT_STATE_DIR, Registry, read_registry
from inferslice.control.actuators.base import (
    ApplyResult,
    ApplyStatus,
    PermanentActuatorError,
    ReplicaPlacement,
    RetryableActuatorError,
    TierObservation,
    require_kind,
)
from inferslice.errors import InferSliceError

ADMIN_TIMEOUT_S = 5.0  # local admin calls; a slower answer means the front is stuck
CAP_TIMEOUT_S = 20.0  # the cap command starts an interpreter and talks netlink
Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=CAP_TIMEOUT_S, check=False)


class TestbedActuator:
    name = "testbed"
    kinds = frozenset({ActionKind.SET_REPLICAS, ActionKind.SET_CAP})
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

    def _call(self, method: str, url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            resp = self.client.request(method, url, json=body)
        except httpx.HTTPError as err:
            raise RetryableActuatorError(f"{method} {url}: {err}") from None
        if resp.status_code == 422 or resp.status_code == 400:
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
            reps = tuple(
                ReplicaPlacement(
                    str(r["id"]),
                    str(r["pop"]),
                    int(r["gpu"]),
                    {"pending": "starting", "unhealthy": "starting"}.get(str(r["state"]), str(r["state"])),
                    float(r.get("gpu_share", 1.0)),
                )
                for r in st.get("replicas", [])
            )
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
