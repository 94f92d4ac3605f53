"""The controller's audit trail in SliceAction objects: a restarted controller (a new process, no
local state) resumes from them, an approval made by patching an object as ``kubectl patch`` does
is applied, and a failover between two controllers under the Lease applies nothing twice."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from typing import Any

import pytest

from inferslice.actions import Action
from inferslice.control.actuators.base import ApplyResult, TierObservation
from inferslice.control.actuators.kubernetes import KubernetesActuator
from inferslice.control.settings import tier_policies
from inferslice.deploy import apiserver
from inferslice.deploy import custom_resources as cr
from inferslice.diagnosis import Diagnosis, Regime
from inferslice.service.controller import Controller, Mode
from inferslice.service.controller.audit import TransitionError
from inferslice.service.controller.audit_cr import SliceActionAuditLog
from inferslice.service.controller.audit_store import PhaseConflict, SliceActionStore
from inferslice.service.lease import KubernetesLeaseClient, LeaseElector, LeaseSettings
from inferslice.snapshot import SliceSnapshot
from inferslice.topology import Topology

from .conftest import TOKEN, api_client

NS = "inferslice-system"
SETTINGS = LeaseSettings(lease_duration_s=15, renew_deadline_s=10, retry_period_s=2, request_timeout_s=3)


class Crash(BaseException):
    """The process dies (kill -9): nothing after this point runs."""


def _queueing(tier: str) -> tuple[Diagnosis, SliceSnapshot]:
    # queueing far above its reference: the policy scales the tier out.
    return (
        Diagnosis(tier, Regime.QUEUE_LIMITED, confidence=0.9),
        SliceSnapshot(tier, request_rate=2.0, requests_waiting=30.0, queue_time_p99_s=4.0),
    )


class _Actuator:
    """The Kubernetes actuator, able to die right after a change reached the apiserver."""

    def __init__(self, inner: KubernetesActuator) -> None:
        self.inner = inner
        self.kinds = inner.kinds
        self.crash_after_apply = False

    def observe(self) -> Mapping[str, TierObservation]:
        return self.inner.observe()

    def apply(self, action: Action) -> ApplyResult:
        result = self.inner.apply(action)
        if self.crash_after_apply:
            raise Crash
        return result


def _controller(
    server: apiserver.StandIn,
    topology: Topology,
    identity: str,
    clock: dict[str, float],
    mode: Mode,
    verdicts: dict[str, tuple[Diagnosis, SliceSnapshot]] | None = None,
) -> Controller:
    """A new process: its own client, actuator and audit trail, nothing carried over but the objects."""
    client = api_client(server.url)
    act = _Actuator(KubernetesActuator(topology, client))
    audit = SliceActionAuditLog(SliceActionStore(client, NS), identity)
    seen = verdicts if verdicts is not None else {"premium": _queueing("premium")}
    return Controller(topology, tier_policies(topology), act, audit, lambda: seen, clock=lambda: clock["t"], mode=mode)


def _objects(server: apiserver.StandIn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = server.store.list(apiserver._resource(cr.GROUP, cr.VERSION, cr.ACTION_PLURAL), NS)["items"]
    return items


def _rayservice_patches(server: apiserver.StandIn) -> int:
    return sum(1 for c in server.store.calls if c.verb == "patch" and c.resource == "rayservices")


def _replicas_set(server: apiserver.StandIn) -> int:
    """Distinct set_replicas actions that are Applied (each must have patched its RayService once)."""
    return sum(1 for o in _objects(server) if o["spec"]["kind"] == "set_replicas" and o["status"]["phase"] in ("Applied", "Ineffective"))


def test_a_restarted_controller_resumes_from_the_objects_without_duplicates(server: apiserver.StandIn, topology: Topology) -> None:
    clock = {"t": 1000.0}
    first = _controller(server, topology, "controller-a", clock, Mode.AUTO)
    first.actuator.crash_after_apply = True  # type: ignore[attr-defined]
    try:
        first.tick()
    except Crash:
        pass
    [obj] = _objects(server)
    assert obj["status"]["phase"] == "Applying" and obj["status"]["attempts"] == 1
    assert _rayservice_patches(server) == 1

    clock["t"] = 1001.0
    second = _controller(server, topology, "controller-b", clock, Mode.AUTO)
    assert second.states["premium"].seq >= 1, "the decision counter resumes past the ids in the objects"
    assert second.resume() == [obj["spec"]["actionId"]]
    assert _rayservice_patches(server) == 1, "the change made before the crash is not made again"
    [done] = _objects(server)
    assert done["status"]["phase"] == "Applied" and done["status"]["appliedBy"] == "controller-b"
    assert "already" in done["status"]["message"]  # the actuator found the change made

    # The guard's cooldown history and seen ids are rebuilt from the objects, not started empty.
    assert ("premium", "scale_out", 1000.0) in second.guard_state.history
    assert obj["spec"]["actionId"] in second.guard_state.seen_ids
    second.tick()
    ids = [o["spec"]["actionId"] for o in _objects(server)]
    assert len(ids) == len(set(ids)) and obj["spec"]["actionId"] in ids
    assert _rayservice_patches(server) == _replicas_set(server)


def _kubectl_patch_status(server: apiserver.StandIn, name: str, status: dict[str, Any]) -> dict[str, Any]:
    """What ``kubectl patch sliceaction NAME --subresource=status --type=merge -p ...`` sends."""
    url = f"{server.url}/apis/{cr.GROUP}/{cr.VERSION}/namespaces/{NS}/{cr.ACTION_PLURAL}/{name}/status"
    req = urllib.request.Request(
        url,
        data=json.dumps({"status": status}).encode(),
        method="PATCH",
        headers={"Content-Type": "application/merge-patch+json", "Authorization": f"Bearer {TOKEN}"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        body: dict[str, Any] = json.loads(resp.read())
    return body


def test_an_approval_patched_into_the_object_is_applied(server: apiserver.StandIn, topology: Topology) -> None:
    clock = {"t": 1000.0}
    ctl = _controller(server, topology, "controller-a", clock, Mode.APPROVE)
    ctl.tick()
    [obj] = _objects(server)
    assert obj["status"]["phase"] == "Pending" and obj["status"]["mode"] == "approve"
    assert [r["id"] for r in ctl.audit.actions(state="pending")] == [obj["spec"]["actionId"]]
    ctl.drive()
    assert _rayservice_patches(server) == 0, "nothing is applied before an operator approves"

    _kubectl_patch_status(server, obj["metadata"]["name"], {"phase": "Approved", "approvedBy": "alice"})
    clock["t"] = 1002.0
    assert ctl.drive() == [obj["spec"]["actionId"]]
    assert _rayservice_patches(server) == 1
    [done] = _objects(server)
    assert done["status"]["phase"] == "Applied" and done["status"]["approvedBy"] == "alice"
    assert done["status"]["appliedBy"] == "controller-a"
    # A new process reads the approval and the application back and applies nothing again.
    again = _controller(server, topology, "controller-b", clock, Mode.APPROVE)
    assert again.resume() == []
    row = again.audit.action(obj["spec"]["actionId"])
    assert row is not None and row["state"] == "applied" and row["approved_by"] == "alice"
    assert _rayservice_patches(server) == 1


def test_a_rejection_patched_into_the_object_is_never_applied(server: apiserver.StandIn, topology: Topology) -> None:
    clock = {"t": 1000.0}
    ctl = _controller(server, topology, "controller-a", clock, Mode.APPROVE)
    ctl.tick()
    [obj] = _objects(server)
    _kubectl_patch_status(server, obj["metadata"]["name"], {"phase": "Rejected", "approvedBy": "bob"})
    assert ctl.drive() == []
    assert _rayservice_patches(server) == 0


def test_failover_between_two_controllers_applies_nothing_twice(server: apiserver.StandIn, topology: Topology) -> None:
    clock = {"t": 0.0}
    verdicts = {"premium": _queueing("premium")}
    replicas = {}
    for identity in ("controller-a", "controller-b"):
        ctl = _controller(server, topology, identity, clock, Mode.AUTO, verdicts)
        lease = KubernetesLeaseClient(api_client(server.url), NS, "inferslice-controller")
        replicas[identity] = (LeaseElector(lease, identity, SETTINGS, clock=lambda: clock["t"]), ctl)
    leading: dict[str, bool] = dict.fromkeys(replicas, False)
    dead: set[str] = set()
    both: list[float] = []
    leaders: list[str] = []
    for step in range(0, 40):
        now = float(2 * step)
        clock["t"] = now
        if step == 6:  # standard starts queueing; the leader dies right after its change reached the apiserver
            verdicts["standard"] = _queueing("standard")
            replicas["controller-a"][1].actuator.crash_after_apply = True  # type: ignore[attr-defined]
        for identity, (elector, ctl) in replicas.items():
            if identity in dead:
                continue
            if not elector.try_acquire_or_renew():
                leading[identity] = False
                continue
            try:
                if not leading[identity]:  # as `inferslice control` does on each takeover
                    ctl.resume()
                    leading[identity] = True
                ctl.tick()
            except Crash:
                dead.add(identity)
            if identity not in dead:
                leaders.append(identity)
        if sum(1 for i, (e, _) in replicas.items() if i not in dead and e.is_leader()) > 1:
            both.append(now)
    assert both == []
    assert "controller-a" in dead and "controller-b" in leaders, leaders
    objs = _objects(server)
    ids = [o["spec"]["actionId"] for o in objs]
    assert len(ids) == len(set(ids))
    applied_by = {o["status"].get("appliedBy") for o in objs if o["status"]["phase"] in ("Applied", "Ineffective")}
    assert applied_by == {"controller-a", "controller-b"}, "both replicas applied some of the actions"
    assert not [o for o in objs if o["status"]["phase"] in ("Approved", "Applying", "InProgress")], "nothing left unfinished"
    assert _rayservice_patches(server) == _replicas_set(server), "each applied scale changed its RayService exactly once"


def test_a_write_from_a_stale_read_is_a_conflict_not_an_overwrite(server: apiserver.StandIn, topology: Topology) -> None:
    clock = {"t": 1000.0}
    ctl = _controller(server, topology, "controller-a", clock, Mode.APPROVE)
    ctl.tick()
    [obj] = _objects(server)
    store = SliceActionStore(api_client(server.url), NS)
    stale = store.get(obj["spec"]["actionId"])
    _kubectl_patch_status(server, obj["metadata"]["name"], {"phase": "Rejected", "approvedBy": "bob"})
    with pytest.raises(PhaseConflict):
        store.patch_status(stale, {"phase": "Approved", "approvedBy": "alice"})
    with pytest.raises(TransitionError):
        ctl.approve(obj["spec"]["actionId"], "alice")
    assert store.get(obj["spec"]["actionId"]).status["approvedBy"] == "bob"
