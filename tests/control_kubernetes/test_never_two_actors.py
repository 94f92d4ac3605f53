"""Never two actors: two controller replicas (elector + controller + Kubernetes actuator + SliceAction
trail, as `inferslice control --backend kubernetes --lease-namespace` wires them) against the
apiserver stand-in, with answers delayed past the renew deadline, a partition whose requests are
delivered late, and a follower clock that leaps ahead. The verdict is the stand-in's own record of
the writes that took effect: who made each one (the replica's token) and the term it carries."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from inferslice.control.actuators.kubernetes import KubernetesActuator, KubernetesSettings, fence_of
from inferslice.control.settings import tier_policies
from inferslice.deploy import apiserver
from inferslice.deploy import custom_resources as cr
from inferslice.diagnosis import Diagnosis, Regime
from inferslice.errors import InferSliceError
from inferslice.service.controller import Controller, Mode
from inferslice.service.controller.audit_cr import SliceActionAuditLog
from inferslice.service.controller.audit_store import SliceActionStore
from inferslice.service.lease import KubernetesLeaseClient, LeaseElector, LeaseSettings
from inferslice.snapshot import SliceSnapshot
from inferslice.topology import Topology

from .conftest import TOKEN, api_client, seed

NS = "inferslice-system"
USERS = {"token-a": "controller-a", "token-b": "controller-b"}
TARGETS = ("rayservices", "rayclusters", "pods")


def _queueing(tier: str) -> tuple[Diagnosis, SliceSnapshot]:
    return (
        Diagnosis(tier, Regime.QUEUE_LIMITED, confidence=0.9),
        SliceSnapshot(tier, request_rate=2.0, requests_waiting=30.0, queue_time_p99_s=4.0),
    )


class Clocks:
    def __init__(self) -> None:
        self.t = 0.0
        self.offset: dict[str, float] = {}

    def of(self, who: str) -> Callable[[], float]:
        return lambda: self.t + self.offset.get(who, 0.0)


class Replica:
    """One controller replica; ``renew`` is its elector's round, ``control`` one step of its loop
    (the body of ``cli.control._run_as_leader``)."""

    def __init__(
        self, server: apiserver.StandIn, topology: Topology, who: str, clocks: Clocks, verdicts: dict[str, Any], timeout_s: float
    ) -> None:
        token = next(t for t, u in USERS.items() if u == who)
        client = api_client(server.url, token)
        settings = LeaseSettings(lease_duration_s=15, renew_deadline_s=10, retry_period_s=2, request_timeout_s=timeout_s)
        self.who = who
        self.elector = LeaseElector(KubernetesLeaseClient(client, NS, "inferslice-controller"), who, settings, clock=clocks.of(who))
        act = KubernetesActuator(topology, client, KubernetesSettings(request_timeout_s=timeout_s), leadership=self.elector)
        audit = SliceActionAuditLog(SliceActionStore(client, NS, request_timeout_s=timeout_s), who, leadership=self.elector)
        self.ctl = Controller(
            topology,
            tier_policies(topology),
            act,
            audit,
            lambda: dict(verdicts),
            clock=lambda: 1000.0 + clocks.t,
            mode=Mode.AUTO,
            leadership=self.elector,
        )
        self.term: Any = None
        self.errors: list[str] = []

    def renew(self) -> bool:
        return self.elector.try_acquire_or_renew()

    def control(self) -> None:
        token = self.elector.token()
        if token is None:
            self.term = None
            return
        try:
            if token != self.term:
                self.ctl.resume()
                self.term = token
            self.ctl.tick()
        except InferSliceError as err:
            self.errors.append(f"{type(err).__name__}: {err}")


@pytest.fixture
def cluster(topology: Topology) -> Iterator[apiserver.StandIn]:
    with apiserver.serve(TOKEN, users=USERS) as srv:
        seed(srv.store, topology)
        srv.store.calls.clear()
        srv.store.writes.clear()
        yield srv


def _one_actor_at_a_time(server: apiserver.StandIn) -> list[str]:
    """Every write to a serving object carries the term of the replica that made it, and the terms
    never go back: once a later term wrote anything, no earlier term's write took effect anywhere.
    Returns the replicas in the order they acted."""
    writes = [w for w in server.store.writes if w.resource.split("/")[0] in TARGETS]
    assert writes, "nobody acted: the scenario tests nothing"
    terms = []
    for w in writes:
        token = fence_of(w.obj)
        assert token is not None, f"write {w.seq} ({w.resource}/{w.name} by {w.user}) carries no term"
        assert token.holder == w.user, f"write {w.seq}: {w.user} wrote term {token}"
        terms.append(token.transitions)
    assert terms == sorted(terms), f"an earlier term acted after a later one: {[(w.user, t) for w, t in zip(writes, terms, strict=True)]}"
    return list(dict.fromkeys(w.user for w in writes))


def _objects(server: apiserver.StandIn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = server.store.list(apiserver._resource(cr.GROUP, cr.VERSION, cr.ACTION_PLURAL), NS)["items"]
    return items


def _applied_once(server: apiserver.StandIn) -> None:
    """Each applied scale action changed its RayService's serve config once."""
    changed = 0
    last: dict[str, str] = {}
    for w in server.store.writes:
        if w.resource == "rayservices":
            cfg = w.obj["spec"]["serveConfigV2"]
            if last.get(w.name) not in (None, cfg):
                changed += 1
            last[w.name] = cfg
    applied = sum(
        1 for o in _objects(server) if o["spec"]["kind"] == "set_replicas" and o["status"].get("phase") in ("Applied", "Ineffective")
    )
    assert changed == applied, f"{changed} serve-config changes for {applied} applied scale actions"


def test_an_answer_delayed_past_the_renew_deadline(cluster: apiserver.StandIn, topology: Topology) -> None:
    clocks, verdicts = Clocks(), {"premium": _queueing("premium")}
    a, b = (Replica(cluster, topology, who, clocks, verdicts, 3.0) for who in ("controller-a", "controller-b"))
    assert a.renew()
    a.control()  # a leads term 0 and scales premium out
    clocks.t = 2.0
    release = threading.Event()
    held = cluster.faults.add(apiserver.Fault(lambda c: c.user == "controller-a" and c.resource == "leases", hold_after=release, times=1))
    renew_a = threading.Thread(target=a.renew)
    renew_a.start()  # processed now, answered at t=20
    assert held.entered.wait(10)
    b.renew()
    while clocks.t < 20.0:
        clocks.t += 1.0
        if clocks.t == 12.0:
            verdicts["standard"] = _queueing("standard")
        a.control()  # a's loop goes on: it leads until t=10 (its renew sent at 2 is unanswered)
        b.renew()
        b.control()
    release.set()
    renew_a.join(10)
    for _ in range(5):
        clocks.t += 2.0
        for r in (a, b):
            r.renew()
            r.control()
    assert not a.elector.is_leader() and b.elector.is_leader()
    assert _one_actor_at_a_time(cluster) == ["controller-a", "controller-b"]
    _applied_once(cluster)


def test_a_partition_whose_requests_arrive_after_the_takeover(cluster: apiserver.StandIn, topology: Topology) -> None:
    """a is cut off in the middle of an action (at its first write to a serving object, t=3): that
    write and every later request of a are held, and processed when the partition heals at t=30, long
    after b took over. The late write must not take effect; b finishes the action a recorded."""
    clocks, verdicts = Clocks(), {"premium": _queueing("premium")}
    a = Replica(cluster, topology, "controller-a", clocks, verdicts, 0.3)
    b = Replica(cluster, topology, "controller-b", clocks, verdicts, 3.0)
    assert any(a.renew() for _ in range(10))
    a.control()
    cut = {"on": False}

    def partitioned(c: apiserver.Call) -> bool:
        if c.user == "controller-a" and clocks.t >= 3 and c.verb == "patch" and c.resource.split("/")[0] in TARGETS:
            cut["on"] = True
        return cut["on"] and c.user == "controller-a"

    heal = threading.Event()
    fault = cluster.faults.add(apiserver.Fault(partitioned, hold_before=heal))
    try:
        for step in range(1, 30):
            clocks.t = float(step)
            if step == 3:
                verdicts["standard"] = _queueing("standard")  # a decides, records, and starts applying: then the cut
            for r in (a, b):
                r.renew()
                r.control()
        assert cut["on"] and b.elector.is_leader() and not a.elector.is_leader()
    finally:
        heal.set()
    held = fault.seen
    for step in range(30, 40):
        clocks.t = float(step)
        for r in (a, b):
            r.renew()
            r.control()
    assert held > 3
    assert _one_actor_at_a_time(cluster) == ["controller-a", "controller-b"]
    late = [c for c in cluster.store.calls if c.user == "controller-a" and c.verb == "patch" and c.resource.split("/")[0] in TARGETS]
    assert late and late[-1].code == 409, "a's held write arrived after the takeover and was refused (stale resourceVersion)"
    standard = [o for o in _objects(cluster) if o["spec"]["slice"] == "standard" and o["spec"]["kind"] == "set_replicas"]
    assert standard and all(o["status"]["phase"] == "Applied" and o["status"]["appliedBy"] == "controller-b" for o in standard)
    _applied_once(cluster)


def test_a_follower_clock_that_leaps_ahead(cluster: apiserver.StandIn, topology: Topology) -> None:
    """b's clock leaps a minute while a leads, so b takes over while a still (rightly, by its own
    clock) believes it leads: two believers. The fences keep it to one actor: b stamps its term on
    every object first; a's next write meets it and a steps down."""
    clocks, verdicts = Clocks(), {"premium": _queueing("premium")}
    a, b = (Replica(cluster, topology, who, clocks, verdicts, 3.0) for who in ("controller-a", "controller-b"))
    for step in range(0, 10):
        clocks.t = float(step)
        if step % 2 == 0:
            a.renew()
            b.renew()
        a.control()
    clocks.offset["controller-b"] = 60.0
    clocks.t = 10.5
    assert b.renew(), "b's clock says the record has been still for a minute"
    assert a.elector.is_leader(), "a renewed at t=8: by its clock it leads until t=18"
    b.control()  # resume: claims every object, adopts the trail
    verdicts["standard"] = _queueing("standard")
    a.control()  # a acts as leader: it meets b's term and steps down
    assert not a.elector.is_leader() and any("Deposed" in e for e in a.errors)
    for step in range(11, 20):
        clocks.t = float(step)
        for r in (a, b):
            r.renew()
            r.control()
    assert _one_actor_at_a_time(cluster) == ["controller-a", "controller-b"]
    refused = [o for o in _objects(cluster) if o["status"]["phase"] == "Refused" and o["status"].get("message", "").startswith("fenced")]
    assert refused and all(o["status"]["fencingToken"] == "1/controller-b" for o in refused), "a's late decision was refused by b"
    _applied_once(cluster)
