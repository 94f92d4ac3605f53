"""Two scrapers at once share one round of target fetches (``SingleFlight``).

Why it matters: with one replica behind a congested WAN link every round takes its full deadline;
when the second scraper (the embedded source beside Prometheus, or an HA pair of Prometheus servers)
queued its own round behind the first, it waited two deadlines, passed its own timeout and lost
every family of the exporter, link and WAN counters included (issue 17's WAN-rate corpus windows).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from inferslice import metric_names as mn
from inferslice.exporters.base import GuardedCollector
from inferslice.exporters.engine import EngineSettings, EngineSource, StaticDiscovery, Target
from inferslice.exporters.engine.scrape import SingleFlight
from inferslice.topology import load_topology

TOPOLOGY = load_topology()


def until(done: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_a_caller_during_a_round_shares_it_and_a_later_one_runs_its_own():
    flight: SingleFlight[int] = SingleFlight()
    started, release = threading.Event(), threading.Event()
    runs: list[int] = []

    def slow() -> int:
        runs.append(1)
        started.set()
        release.wait(5)
        return len(runs)

    got: dict[str, int] = {}
    leader = threading.Thread(target=lambda: got.__setitem__("leader", flight.run(slow)))
    leader.start()
    assert started.wait(5)
    follower = threading.Thread(target=lambda: got.__setitem__("follower", flight.run(slow)))
    follower.start()
    joined = until(lambda: flight.shared > 0)  # the follower has joined the round in flight
    release.set()
    assert joined
    leader.join(5)
    follower.join(5)
    assert got == {"leader": 1, "follower": 1} and len(runs) == 1
    assert flight.run(slow) == 2  # nothing in flight: a new round
    assert (flight.calls, flight.shared) == (2, 1)


def test_an_error_reaches_every_caller_of_its_round_and_the_next_round_runs_afresh():
    flight: SingleFlight[str] = SingleFlight()
    started, release = threading.Event(), threading.Event()

    def failing() -> str:
        started.set()
        release.wait(5)
        raise RuntimeError("discovery failed")

    errors: list[str] = []

    def call() -> None:
        try:
            flight.run(failing)
        except RuntimeError as err:
            errors.append(str(err))

    threads = [threading.Thread(target=call)]
    threads[0].start()
    assert started.wait(5)
    threads.append(threading.Thread(target=call))
    threads[1].start()
    joined = until(lambda: flight.shared > 0)
    release.set()
    assert joined
    for t in threads:
        t.join(5)
    assert errors == ["discovery failed", "discovery failed"]
    assert flight.run(lambda: "ok") == "ok"


def test_concurrent_scrapes_fetch_each_replica_once_and_both_get_the_families(kit):
    good = kit.standin(kit.AFTER)
    slow = kit.standin(kit.AFTER)
    slow.behaviour.gate = threading.Event()  # behind a congested link: answers when the test opens it
    targets = (
        Target(url=good.url + "/metrics", slice="premium", pop="bristol", replica="premium-0"),
        Target(url=slow.url + "/metrics", slice="premium", pop="london", replica="premium-1"),
    )
    source = EngineSource([StaticDiscovery(targets)], TOPOLOGY, EngineSettings(timeout_s=8.0, grace_s=0.5))
    registries = [CollectorRegistry(), CollectorRegistry()]
    for reg in registries:  # two scrapers of one exporter's source
        reg.register(GuardedCollector([source]))
    requests: dict[int, float | None] = {}

    def scrape(i: int) -> None:
        requests[i] = registries[i].get_sample_value(mn.SLO_TTFT_REQUESTS, {"slice": "premium"})

    first = threading.Thread(target=scrape, args=(0,))
    first.start()
    assert until(lambda: slow.behaviour.hits > 0)  # the first scrape's round is in flight
    second = threading.Thread(target=scrape, args=(1,))
    second.start()
    joined = until(lambda: source._flight.shared > 0)  # the second scrape joined it (before: it queued its own)
    slow.behaviour.gate.set()
    assert joined
    first.join(10)
    second.join(10)
    # One round served both: each replica was asked once, and both scrapers read both replicas' 41.
    assert (good.behaviour.hits, slow.behaviour.hits) == (1, 1)
    assert requests == {0: 82.0, 1: 82.0}
    scrape(0)  # a later scrape runs its own round
    assert (good.behaviour.hits, slow.behaviour.hits) == (2, 2)
    assert requests[0] == 82.0  # the same bodies again: nothing counted twice
    source.close()


def test_an_older_shared_round_built_after_a_newer_one_never_reaches_the_accumulators(kit):
    replica = kit.standin(kit.IDLE)
    target = Target(url=replica.url + "/metrics", slice="standard", pop="bristol", replica="standard-0")
    source = EngineSource([StaticDiscovery((target,))], TOPOLOGY)
    older = source._fetch_round()  # idle: 2 prompt tokens
    replica.behaviour.body = kit.AFTER  # 1,303 prompt tokens since start
    newer = source._fetch_round()

    def prompt_tokens(families) -> float:
        fam = next(f for f in families if f.name == mn.ENGINE_PROMPT_TOKENS.removesuffix("_total"))
        return next(s.value for s in fam.samples if s.name.endswith("_total"))

    with source._lock:
        assert prompt_tokens(source._build(newer)) == 1303
        # Read as a counter going back (a restart), the older round would carry 1,303 and add its 2.
        assert prompt_tokens(source._build(older)) == 1303
        assert prompt_tokens(source._build(newer)) == 1303
    source.close()
