"""The diagnosis loop sharded by PoP group: Prometheus's hashmod, and one Lease per group against the
apiserver stand-in (three replicas, three groups; one dies, its group moves; never two holders)."""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from inferslice.bench.scale_targets import synthetic_topology
from inferslice.common.prometheus import Prometheus
from inferslice.deploy import apiserver
from inferslice.service.lease import KubernetesLeaseClient, LeaseElector, LeaseSettings
from inferslice.service.shards import Group, ShardedDiagnosis, ShardSettings, groups_of, hashmod, lease_name, ordinal
from inferslice.snapshot import SliceSnapshot

NS = "inferslice-system"
SETTINGS = LeaseSettings(lease_duration_s=15, renew_deadline_s=10, retry_period_s=2, request_timeout_s=3)
REPLICAS = ("inferslice-api-0", "inferslice-api-1", "inferslice-api-2")
USERS = {f"token-{r}": r for r in REPLICAS}


def test_hashmod_is_prometheus_relabel_hashmod_on_known_values() -> None:
    # md5("p000") = ...; the last 8 bytes big-endian mod N (relabel.go's HashMod)
    for value in ("p000", "bristol", "london", ""):
        want = int.from_bytes(hashlib.md5(value.encode()).digest()[8:], "big")
        assert all(hashmod(value, n) == want % n for n in (1, 2, 3, 4, 7))
    with pytest.raises(ValueError):
        hashmod("x", 0)


def test_real_prometheus_keeps_the_targets_our_hashmod_assigns_to_its_shard(tmp_path: Path) -> None:
    """The relabelling Prometheus Operator generates for spec.shards (its sharding key set from the
    PoP label through __tmp_hash) keeps on shard k exactly the PoPs ``hashmod(pop, N) == k``."""
    if shutil.which("prometheus") is None:
        pytest.skip("no prometheus binary (Debian package 'prometheus')")
    pops = [f"p{i:03d}" for i in range(40)]
    shards = 3
    static = [{"targets": [f"127.0.0.1:{10000 + i}"], "labels": {"pop": p}} for i, p in enumerate(pops)]
    kept: dict[int, set[str]] = {}
    for k in range(shards):
        relabel = [
            {"source_labels": ["pop"], "target_label": "__tmp_hash"},  # the PodMonitor's: shard by PoP
            # what the operator appends (prometheus-operator promcfg.go, with $(SHARD) substituted)
            {"source_labels": ["__address__", "__tmp_hash"], "target_label": "__tmp_hash", "regex": "(.+);", "replacement": "$1",
             "action": "replace"},
            {"source_labels": ["__tmp_hash"], "target_label": "__tmp_hash", "modulus": shards, "action": "hashmod"},
            {"source_labels": ["__tmp_hash", "__tmp_disable_sharding"], "regex": f"{k};|.+;.+", "action": "keep"},
        ]  # fmt: skip
        job = {"job_name": "n", "static_configs": static, "relabel_configs": relabel}
        config = {"global": {"scrape_interval": "1h"}, "scrape_configs": [job]}
        prom = Prometheus(tmp_path / f"s{k}", yaml.safe_dump(config))
        prom.start(timeout_s=20)
        try:
            deadline = time.monotonic() + 20
            while True:
                active = httpx.get(f"{prom.url}/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
                if active or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            kept[k] = {t["labels"]["pop"] for t in active}
        finally:
            prom.stop()
    for k in range(shards):
        assert kept[k] == {p for p in pops if hashmod(p, shards) == k}, k
    assert set().union(*kept.values()) == set(pops)


def test_groups_cover_every_slice_once_with_the_pops_their_series_carry() -> None:
    topo = synthetic_topology(40, 3, 2)
    groups = groups_of(topo, 4)
    assert sorted(s for g in groups for s in g.slices) == sorted(topo.tier_names)
    for g in groups:
        for name in g.slices:
            pop = topo.tier(name).placement[0].split("/")[0]
            assert hashmod(pop, 4) == g.index and pop in g.pops
        assert not g.slices or topo.client.gateway in g.pops
    assert ordinal("inferslice-api-12") == 12 and ordinal("api") is None


class Clocks:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class FakeSource:
    def __init__(self, group: Group) -> None:
        self.group = group

    def poll(self, now_s: float) -> None:
        return None

    def snapshot(self, slice: str, window_s: float, now_s: float) -> SliceSnapshot:
        return SliceSnapshot(slice=slice, window_end_s=now_s)

    def snapshots(self, now_s: float, window_s: float | None = None) -> list[SliceSnapshot]:
        return [SliceSnapshot(slice=s, window_end_s=now_s) for s in self.group.slices]

    def health(self) -> dict[str, Any]:
        return {"source": "fake", "ok": True}


def _api(url: str, token: str) -> Any:
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = url
    cfg.api_key = {"BearerToken": token}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    cfg.retries = False
    return client.ApiClient(cfg)


@pytest.fixture
def lease_server() -> Iterator[apiserver.StandIn]:
    with apiserver.serve("admin", users=USERS) as srv:
        yield srv


def test_three_replicas_own_a_group_each_and_a_dead_ones_group_moves_to_one_other(lease_server: apiserver.StandIn) -> None:
    topo = synthetic_topology(30, 2, 2)
    groups = groups_of(topo, 3)
    clock = Clocks()
    ingested: dict[str, list[tuple[float, str]]] = {r: [] for r in REPLICAS}

    def replica(identity: str) -> ShardedDiagnosis:
        token = next(t for t, u in USERS.items() if u == identity)
        api = _api(lease_server.url, token)

        def lease(k: int) -> LeaseElector:
            return LeaseElector(KubernetesLeaseClient(api, NS, lease_name(k)), identity, SETTINGS, clock=clock)

        def ingest(snap: SliceSnapshot) -> None:
            ingested[identity].append((clock.t, snap.slice))

        settings = ShardSettings(groups=3, preferred=(ordinal(identity) or 0) % 3, takeover_after_s=SETTINGS.lease_duration_s)
        return ShardedDiagnosis(groups, FakeSource, ingest, lease, settings, clock=clock, monotonic=clock)

    shards = {r: replica(r) for r in REPLICAS}
    alive = set(REPLICAS)
    slice_group = {s: g.index for g in groups for s in g.slices}

    def tick(dt: float = 2.0) -> None:
        for r in sorted(alive):
            shards[r].tick(clock.t)
        # never two holders of a group, and nobody ingests a group it does not hold
        holders = {k: [r for r in alive if k in shards[r].held()] for k in range(3)}
        assert all(len(v) <= 1 for v in holders.values()), (clock.t, holders)
        for r in alive:
            seen = {slice_group[s] for t, s in ingested[r] if t == clock.t}
            assert seen <= set(shards[r].held()), (clock.t, r, seen)
        clock.t += dt

    for _ in range(12):  # 24 s: past the takeover delay, nobody took anybody's group
        tick()
    assert [shards[r].held() for r in REPLICAS] == [[0], [1], [2]]
    assert all(ingested[r] for r in REPLICAS)

    alive.discard("inferslice-api-1")  # killed: it neither renews nor releases
    died_at = clock.t
    moved_at = None
    for _ in range(30):
        tick()
        if moved_at is None and any(1 in shards[r].held() for r in alive):
            moved_at = clock.t
    assert moved_at is not None, "nobody took over the dead replica's group"
    # its last renew counts for a Lease duration, then a follower waits one more of silence
    assert moved_at - died_at <= 2 * SETTINGS.lease_duration_s + 2 * SETTINGS.retry_period_s, moved_at - died_at
    taker = next(r for r in alive if 1 in shards[r].held())
    late = [s for t, s in ingested[taker] if t >= moved_at]
    assert set(groups[1].slices) <= set(late)  # the taker diagnoses the dead one's slices
    assert sorted(k for r in alive for k in shards[r].held()) == [0, 1, 2]

    alive.add("inferslice-api-1")  # back: it does not take its group from a live holder
    for _ in range(10):
        tick()
    assert shards["inferslice-api-1"].held() == []
    assert 1 in shards[taker].held()
