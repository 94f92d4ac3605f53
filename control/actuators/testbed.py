"""The testbed actuator: replica counts and make-before-break moves through each tier front's admin
API, caps through the testbed's own library call.

- Replicas and moves: the front's one client (``testbed.serving.front_client``: the "autoscale off,
  then PUT replicas" rule, the answers' meanings), found through the registry file.
- Caps: ``testbed.net.lifecycle.set_cap`` in this process (it changes the HTB class live and keeps
  the testbed's state and registry truthful), as ``inferslice testbed cap`` does; it needs root, like
  every testbed change. (It used to run that command in a subprocess: an interpreter start per cap.)

A relocation (value ``"pop"`` or the policy's ``"pop/gpuN"`` slot, ``replica`` the id that moves) is
the front's move named by the action id: the first ``apply`` starts it and returns IN_PROGRESS (the
successor cold-starts), later ones read it by id and return APPLIED once the old replica drained.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

from inferslice.actions import Action, ActionKind
from inferslice.common.registry import DEFAULT_STATE_DIR, Registry, read_registry
from inferslice.control.actuators.base import (
    ApplyResult,
    ApplyStatus,
    PermanentActuatorError,
    RetryableActuatorError,
    TierObservation,
    require_kind,
)
from inferslice.errors import InferSliceError, PermanentError, RetryableError
from inferslice.testbed.serving.front_client import ADMIN_TIMEOUT_S, FrontClient

CapSetter = Callable[[str, float, Path], None]  # (tier, cap bit/s, state dir): change the tier's client-edge receive cap


def _set_cap(tier: str, cap_bps: float, state_dir: Path) -> None:
    from pyroute2.netlink.exceptions import NetlinkError  # netlink and the testbed's plan: only when a cap changes

    from inferslice.testbed.net import lifecycle

    try:
        lifecycle.set_cap(tier, cap_bps, "receive", state_dir)
    except NetlinkError as err:  # the kernel refused this time (a busy qdisc, a namespace mid-change): try again next step
        raise RetryableActuatorError(f"cap {tier} {cap_bps:g}: netlink: {err}") from None


class TestbedActuator:
    name = "testbed"
    kinds = frozenset({ActionKind.SET_REPLICAS, ActionKind.SET_CAP, ActionKind.RELOCATE})
    __test__ = False  # not a pytest class

    def __init__(
        self, state_dir: str | Path = DEFAULT_STATE_DIR, set_cap: CapSetter = _set_cap, client: httpx.Client | None = None
    ) -> None:
        self.state_dir = Path(state_dir)
        self.set_cap = set_cap
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

    def _front(self, reg: Registry, tier: str) -> FrontClient:
        front = reg.front(tier)
        if front is None:
            raise PermanentActuatorError(f"no serving front for tier {tier!r} in the testbed registry")
        return FrontClient(front.admin_url, self.client)

    def _cap_of(self, reg: Registry, tier: str) -> float | None:
        for link in reg.links:
            if link.kind == "access" and link.tier == tier and link.direction == "receive":
                return link.cap_bps
        return None

    def observe(self) -> Mapping[str, TierObservation]:
        reg = self._registry()
        out: dict[str, TierObservation] = {}
        with _typed(f"observe {self.state_dir}"):
            for front in reg.fronts:
                st = FrontClient(front.admin_url, self.client).state()
                out[front.tier] = TierObservation(front.tier, st.target, st.replicas, self._cap_of(reg, front.tier), st.fixed)
        return out

    # -- writes ------------------------------------------------------------------------------------
    def apply(self, action: Action) -> ApplyResult:
        require_kind(self, action)
        reg = self._registry()
        front = self._front(reg, action.slice)
        with _typed(f"{action.kind.value} {action.slice}"):
            if action.kind is ActionKind.RELOCATE:
                return self._relocate(action, front)
            if action.kind is ActionKind.SET_REPLICAS:
                return self._replicas(action, front)
            return self._cap(action, reg)

    def _replicas(self, action: Action, front: FrontClient) -> ApplyResult:
        if isinstance(action.value, bool) or not isinstance(action.value, (int, float)):
            raise PermanentActuatorError(f"replicas must be a number, got {action.value!r}")
        n = int(action.value)
        if not front.set_replicas(n):
            return ApplyResult(action.id, ApplyStatus.ALREADY_APPLIED)
        return ApplyResult(action.id, ApplyStatus.APPLIED, f"{action.slice}: {n} replicas (cold start follows)")

    def _cap(self, action: Action, reg: Registry) -> ApplyResult:
        if isinstance(action.value, bool) or not isinstance(action.value, (int, float)) or action.value <= 0:
            raise PermanentActuatorError(f"a cap is a positive bit rate, got {action.value!r}")
        cap = float(action.value)
        current = self._cap_of(reg, action.slice)
        if current is not None and abs(current - cap) <= 1.0:
            return ApplyResult(action.id, ApplyStatus.ALREADY_APPLIED)
        try:
            self.set_cap(action.slice, round(cap), self.state_dir)
        except (KeyError, ValueError) as err:  # an unknown tier, a bad rate: the action is wrong
            raise PermanentActuatorError(f"cap {action.slice} {cap:g}: {err}") from None
        except OSError as err:  # netlink busy, the state file mid-write: the same cap may succeed next step
            raise RetryableActuatorError(f"cap {action.slice} {cap:g}: {err}") from None
        return ApplyResult(action.id, ApplyStatus.APPLIED, f"{action.slice}: receive cap {cap / 1e6:g} Mbit/s")

    def _relocate(self, action: Action, front: FrontClient) -> ApplyResult:
        dest = action.value
        if not isinstance(dest, str) or not dest or not action.replica:
            raise PermanentActuatorError(
                f"relocate needs a destination PoP (or pop/gpuN) and the replica, got {dest!r}, {action.replica!r}"
            )
        pop, _, gpu_text = dest.partition("/")
        if gpu_text and not (gpu_text.startswith("gpu") and gpu_text[3:].isdigit()):
            raise PermanentActuatorError(f"relocate destination {dest!r} is not pop or pop/gpuN")
        gpu = int(gpu_text[3:]) if gpu_text else 0
        move = front.move(action.id)
        if move is None:  # not started yet (the front answers 404 for an unknown replica: permanent)
            move = front.start_move(action.id, action.replica, pop, gpu)
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


@contextmanager
def _typed(what: str) -> Iterator[None]:
    """Turn the testbed's own errors (the vocabulary's two kinds) into the actuator's two kinds."""
    try:
        yield
    except (RetryableActuatorError, PermanentActuatorError):
        raise
    except RetryableError as err:
        raise RetryableActuatorError(f"{what}: {err}") from None
    except PermanentError as err:  # NotPrivilegedError (not root) included: no retry makes us root
        raise PermanentActuatorError(f"{what}: {err}") from None
