"""Leader election on a Lease, the SliceAction audit trail, and a failover that applies nothing twice."""

from __future__ import annotations

from typing import Any

import pytest

from inferslice.actions import Action, ActionKind
from inferslice.control.actuators.kubernetes import KubernetesActuator
from inferslice.deploy import apiserver
from inferslice.deploy.custom_resources import Phase
from inferslice.service.controller.audit_store import PhaseConflict, SliceActionStore, apply_recorded
from inferslice.service.lease import KubernetesLeaseClient, LeaseElector, LeaseSettings
from inferslice.topology import Topology

from .conftest import api_client

NS = "inferslice-system"
SETTINGS = LeaseSettings(lease_duration_s=15, renew_deadline_s=10, retry_period_s=2, request_timeout_s=3)


def _elector(client: Any, identity: str, clock: dict[str, float]) -> LeaseElector:
    return LeaseElector(KubernetesLeaseClient(client, NS, "inferslice-controller"), identity, SETTINGS, clock=lambda: clock["t"])


def _action(n: int, tier: str, replicas: int) -> Action:
    return Action(ActionKind.SET_REPLICAS, tier, replicas, reason="queue above reference", regime="queue_limited", id=f"act-{n}")


def test_slice_actions_record_once_and_follow_the_phase_rules(server: apiserver.StandIn) -> None:
    store = SliceActionStore(api_client(server.url), NS)
    first = store.record(_action(1, "premium", 3), diagnosis_id="d-9")
    assert first.phase == Phase.PENDING
    again = store.record(_action(1, "premium", 3))
    assert again.action == first.action and again.phase == Phase.PENDING
    assert len(store.list()) == 1
    approved = store.set_phase("act-1", Phase.APPROVED, by="alice")
    assert approved.status["approvedBy"] == "alice"
    with pytest.raises(PhaseConflict):
        store.set_phase("act-1", Phase.ROLLED_BACK)
    assert store.list(Phase.APPROVED)[0].action.id == "act-1"


def test_no_action_is_applied_twice_across_a_failover(server: apiserver.StandIn, topology: Topology) -> None:
    clock = {"t": 0.0}

    def replica(identity: str) -> tuple[LeaseElector, SliceActionStore, KubernetesActuator]:
        client = api_client(server.url)
        return (_elector(client, identity, clock), SliceActionStore(client, NS), KubernetesActuator(topology, client))

    a, b = replica("controller-a"), replica("controller-b")
    decisions = [_action(1, "premium", 3), _action(2, "standard", 2), _action(3, "premium", 4)]
    both: list[float] = []

    def step(ctl: tuple[LeaseElector, SliceActionStore, KubernetesActuator], identity: str, now: float, todo: list[Action]) -> None:
        elector, store, act = ctl
        clock["t"] = now
        if elector.try_acquire_or_renew():
            for action in todo:
                apply_recorded(store, act, action, identity, auto=True)

    step(a, "controller-a", 0.0, decisions[:1])
    step(b, "controller-b", 0.0, decisions)  # follower: does nothing
    # a applies action 2 and dies before recording it as applied.
    elector_a, store_a, act_a = a
    clock["t"] = 2.0
    assert elector_a.try_acquire_or_renew()
    store_a.record(decisions[1])
    act_a.apply(decisions[1])
    for t in range(2, 40, 2):
        now = float(t)
        clock["t"] = now
        if elector_a.is_leader() and b[0].is_leader():
            both.append(now)
        step(b, "controller-b", now, decisions)  # b decides the same actions; acts once it leads
    assert both == []
    patches = [c for c in server.store.calls if c.verb == "patch" and c.resource == "rayservices"]
    assert len(patches) == len(decisions), "each action changed its RayService exactly once"
    recs = {r.action.id: r for r in b[1].list()}
    assert {k: r.phase for k, r in recs.items()} == dict.fromkeys(("act-1", "act-2", "act-3"), Phase.APPLIED)
    assert recs["act-1"].status["appliedBy"] == "controller-a"
    assert recs["act-2"].status["appliedBy"] == "controller-b"
    assert recs["act-2"].status["message"].startswith("already_applied")
