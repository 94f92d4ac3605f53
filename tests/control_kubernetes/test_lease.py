"""Leader election that cannot split: the elector against the apiserver stand-in with slow answers,
a partition and clock jumps. Time is a fake monotonic clock per replica (the stand-in holds a
request while the test moves time on); only the request timeouts are real seconds."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from inferslice.control.actuators.fencing import FencingToken, NotLeader
from inferslice.deploy import apiserver
from inferslice.service.lease import KubernetesLeaseClient, LeaseElector, LeaseSettings

from .conftest import api_client

NS = "inferslice-system"
NAME = "inferslice-controller"
SETTINGS = LeaseSettings(lease_duration_s=15, renew_deadline_s=10, retry_period_s=2, request_timeout_s=3)
USERS = {"token-a": "controller-a", "token-b": "controller-b"}  # one token per replica: the stand-in knows who asked


class Clocks:
    """One true time; each replica reads it plus its own offset (a jump moves the offset)."""

    def __init__(self) -> None:
        self.t = 0.0
        self.offset: dict[str, float] = {}

    def of(self, who: str) -> Callable[[], float]:
        return lambda: self.t + self.offset.get(who, 0.0)


@pytest.fixture
def lease_server() -> Iterator[apiserver.StandIn]:
    with apiserver.serve("admin", users=USERS) as srv:
        yield srv


def _elector(
    server: apiserver.StandIn, who: str, clocks: Clocks, settings: LeaseSettings = SETTINGS, wall: Callable[[], float] | None = None
) -> LeaseElector:
    token = next(t for t, u in USERS.items() if u == who)
    client = KubernetesLeaseClient(api_client(server.url, token), NS, NAME)
    return LeaseElector(client, who, settings, clock=clocks.of(who), wall_clock=wall or (lambda: 1_700_000_000.0 + clocks.t))


def _lease(server: apiserver.StandIn) -> dict[str, Any]:
    return server.store.get(apiserver._resource("coordination.k8s.io", "v1", "leases"), NS, NAME)


def _from(who: str, verb: str | None = None) -> Callable[[apiserver.Call], bool]:
    return lambda c: c.user == who and c.resource == "leases" and (verb is None or c.verb == verb)


def _acquire(elector: LeaseElector) -> bool:
    """The first round, retried: a short request timeout can expire on a loaded machine."""
    return any(elector.try_acquire_or_renew() for _ in range(10))


def _leaders(*electors: LeaseElector) -> list[str]:
    return [e.identity for e in electors if e.is_leader()]


def test_one_leader_then_a_takeover_after_the_lease_duration(lease_server: apiserver.StandIn) -> None:
    clocks = Clocks()
    a, b = _elector(lease_server, "controller-a", clocks), _elector(lease_server, "controller-b", clocks)
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    for t in range(2, 30, 2):
        clocks.t = float(t)
        a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew(), "b must not lead while a renews"
    # a dies after its renew at t=28; b takes over once the record has been still for a lease duration of b's clock.
    took = None
    for t in range(30, 60, 2):
        clocks.t = float(t)
        if b.try_acquire_or_renew():
            took = t
            break
    assert took is not None and 28 + SETTINGS.lease_duration_s <= took <= 28 + SETTINGS.lease_duration_s + 2 * SETTINGS.retry_period_s
    assert not a.is_leader()  # its last renew was sent at 28: it stopped leading at 38
    clocks.t += 1
    assert not a.try_acquire_or_renew(), "a comes back, sees b's fresh record and follows"
    spec = _lease(lease_server)["spec"]
    assert spec["holderIdentity"] == "controller-b" and spec["leaseTransitions"] == 1
    assert b.check() == FencingToken(1, "controller-b")


def test_a_renew_answered_after_the_renew_deadline_gives_no_leadership(lease_server: apiserver.StandIn) -> None:
    """The reproduced split: a's renew is processed at t=2 and its answer delivered at t=20, while b
    took over at t=17. Leadership counts from when the renew was sent, so a never leads again."""
    clocks = Clocks()
    a, b = _elector(lease_server, "controller-a", clocks), _elector(lease_server, "controller-b", clocks)
    assert a.try_acquire_or_renew()
    clocks.t = 2.0
    release = threading.Event()
    fault = lease_server.faults.add(apiserver.Fault(_from("controller-a"), hold_after=release, times=1))
    renew = threading.Thread(target=a.try_acquire_or_renew)
    renew.start()
    assert fault.entered.wait(10)
    both: list[float] = []
    while clocks.t < 20.0:
        b.try_acquire_or_renew()
        if len(_leaders(a, b)) > 1:
            both.append(clocks.t)
        clocks.t += 1.0
    assert b.is_leader(), "b took over: a's record had not changed for a lease duration"
    release.set()
    renew.join(10)
    assert not a.is_leader() and not both
    with pytest.raises(NotLeader):
        a.check()
    assert [w.user for w in lease_server.store.writes][-1] == "controller-b"


def test_a_lease_read_delivered_late_does_not_make_the_old_holder_lead(lease_server: apiserver.StandIn) -> None:
    """A restarted a (no memory) reads at t=2, the answer (a's own record) arrives at t=20 after b took
    over: its takeover write carries the stale resourceVersion and is refused (409)."""
    clocks = Clocks()
    a, b = _elector(lease_server, "controller-a", clocks), _elector(lease_server, "controller-b", clocks)
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    clocks.t = 2.0
    a = _elector(lease_server, "controller-a", clocks)  # the same identity, a new process
    release = threading.Event()
    fault = lease_server.faults.add(apiserver.Fault(_from("controller-a", "get"), hold_after=release, times=1))
    round_a = threading.Thread(target=a.try_acquire_or_renew)
    round_a.start()
    assert fault.entered.wait(10)
    while clocks.t < 20.0:
        clocks.t += 1.0
        b.try_acquire_or_renew()
    assert b.is_leader()
    release.set()
    round_a.join(10)
    assert not a.is_leader()
    assert any(c.user == "controller-a" and c.verb == "update" and c.code == 409 for c in lease_server.store.calls)


def test_a_partitioned_leader_stops_before_anyone_takes_over(lease_server: apiserver.StandIn) -> None:
    clocks = Clocks()
    fast = LeaseSettings(lease_duration_s=15, renew_deadline_s=10, retry_period_s=2, request_timeout_s=0.3)
    a, b = _elector(lease_server, "controller-a", clocks, fast), _elector(lease_server, "controller-b", clocks)
    assert _acquire(a)
    heal = threading.Event()
    partition = lease_server.faults.add(apiserver.Fault(lambda c: c.user == "controller-a", hold_before=heal, drop=True))
    a_led_until = b_led_from = None
    try:
        for step in range(1, 20):
            clocks.t = 2.0 * step
            if a.try_acquire_or_renew():
                a_led_until = clocks.t
            if b.try_acquire_or_renew() and b_led_from is None:
                b_led_from = clocks.t
            assert len(_leaders(a, b)) <= 1, f"two leaders at t={clocks.t}"
    finally:
        heal.set()
    assert partition.seen >= 5 and a.last_error is not None
    assert a_led_until is not None and a_led_until < SETTINGS.renew_deadline_s  # the renew sent at t=0 was its last
    assert b_led_from is not None and b_led_from >= SETTINGS.lease_duration_s
    lease_server.faults.remove(partition)
    clocks.t += 2
    assert not a.try_acquire_or_renew() and b.try_acquire_or_renew(), "healed, a follows b"


def test_every_lease_call_has_a_timeout_and_no_client_retry(lease_server: apiserver.StandIn) -> None:
    clocks = Clocks()
    quick = LeaseSettings(lease_duration_s=15, renew_deadline_s=10, retry_period_s=2, request_timeout_s=0.3)
    a = _elector(lease_server, "controller-a", clocks, quick)
    assert _acquire(a)
    release = threading.Event()
    fault = lease_server.faults.add(apiserver.Fault(_from("controller-a", "update"), hold_before=release))
    try:
        clocks.t = 2.0
        assert a.try_acquire_or_renew(), "a renew that timed out leaves the earlier leadership to lapse at its deadline"
        assert fault.seen == 1, "urllib3 retried the timed-out PUT"
        assert a.last_error is not None and "timed out" in a.last_error.lower()
        clocks.t = 10.0
        assert not a.is_leader()
    finally:
        release.set()


def test_clock_jumps(lease_server: apiserver.StandIn) -> None:
    clocks = Clocks()
    wall = {"t": 1_700_000_000.0}
    a = _elector(lease_server, "controller-a", clocks, wall=lambda: wall["t"])
    b = _elector(lease_server, "controller-b", clocks)
    assert a.try_acquire_or_renew()
    stamps = []
    for step, jump in enumerate((0.0, -3600.0, +7200.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0), start=1):
        clocks.t = 2.0 * step
        wall["t"] += 2.0 + jump  # a's wall clock goes back an hour, then forward two: only the timestamps move
        assert a.try_acquire_or_renew()
        stamps.append(_lease(lease_server)["spec"]["renewTime"])
        if step == 4:
            clocks.offset["controller-b"] = 60.0  # b's monotonic clock leaps a minute (a runaway clock)
        assert not b.try_acquire_or_renew(), "b's silence counts from the last change it received, so a renewing keeps it"
    assert stamps[1] < stamps[0] < stamps[2]
    # a's process freezes for 30 s (its clock moves, nothing runs): it must not act on the renew from before.
    clocks.offset["controller-a"] = 30.0
    with pytest.raises(NotLeader):
        a.check()


def test_release_hands_over_at_the_next_round(lease_server: apiserver.StandIn) -> None:
    clocks = Clocks()
    a, b = _elector(lease_server, "controller-a", clocks), _elector(lease_server, "controller-b", clocks)
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    clocks.t = 2.0
    assert a.release() and not a.is_leader()
    assert b.try_acquire_or_renew(), "an empty holder is free at once"
    assert b.check() == FencingToken(1, "controller-b")


def test_fencing_token_grows_with_every_change_of_holder(lease_server: apiserver.StandIn) -> None:
    clocks = Clocks()
    a, b = _elector(lease_server, "controller-a", clocks), _elector(lease_server, "controller-b", clocks)
    tokens = []
    for holder, other in ((a, b), (b, a), (a, b)):
        clocks.t += 100.0  # the previous holder is long silent
        other.step_down("test: hand over")
        holder.try_acquire_or_renew()  # observes the silent record
        clocks.t += SETTINGS.lease_duration_s + 1
        assert holder.try_acquire_or_renew()
        clocks.t += 2
        assert holder.try_acquire_or_renew()  # a renew keeps the term
        tokens.append(holder.check())
    assert [t.transitions for t in tokens] == [0, 1, 2]
    assert tokens == sorted(tokens) and [t.holder for t in tokens] == ["controller-a", "controller-b", "controller-a"]
    assert str(tokens[1]) == "1/controller-b" and FencingToken.parse("1/controller-b") == tokens[1]
    with pytest.raises(ValueError):
        FencingToken.parse("controller-b")


def test_run_while_leading_and_the_background_loop(lease_server: apiserver.StandIn) -> None:
    clocks = Clocks()
    a = _elector(lease_server, "controller-a", clocks)
    assert a.run_while_leading(lambda token: token) is None
    started: list[FencingToken] = []
    stop = threading.Event()
    loop = threading.Thread(target=a.run, args=(stop,), kwargs={"on_started_leading": started.append})
    loop.start()
    try:
        for _ in range(200):
            if started:
                break
            stop.wait(0.05)
        assert started == [FencingToken(0, "controller-a")]
        assert a.run_while_leading(lambda token: str(token)) == "0/controller-a"
    finally:
        stop.set()
        loop.join(10)
    assert _lease(lease_server)["spec"].get("holderIdentity") is None, "stopping released the Lease"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lease_duration_s": 10, "renew_deadline_s": 10},
        {"renew_deadline_s": 2, "retry_period_s": 2},
        {"request_timeout_s": 10},
    ],
)
def test_settings_that_could_split_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        LeaseSettings(**kwargs)  # type: ignore[arg-type]


def test_default_request_timeout_is_client_gos() -> None:
    assert LeaseSettings().timeout_s == 5.0  # max(1 s, renew deadline / 2)
