"""The engine source against stand-in replicas serving the captured vLLM expositions."""

from __future__ import annotations

import gc
import itertools
import math
import os
import time
from dataclasses import dataclass, field

import pytest
from prometheus_client import CollectorRegistry

from inferslice import metric_names as mn
from inferslice.common.exposition import parse_exposition
from inferslice.exporters.base import GuardedCollector
from inferslice.exporters.engine import (
    Discovered,
    EngineSettings,
    EngineSource,
    FrontTarget,
    RayServeDiscovery,
    StaticDiscovery,
    Target,
    reading_from_exposition,
)
from inferslice.topology import load_topology

TOPOLOGY = load_topology()

FAMILIES = {
    mn.ENGINE_TTFT: ("histogram", {"slice"}),
    mn.ENGINE_ITL: ("histogram", {"slice"}),
    mn.ENGINE_TPOT: ("histogram", {"slice"}),
    mn.ENGINE_E2E: ("histogram", {"slice"}),
    mn.ENGINE_QUEUE_TIME: ("histogram", {"slice"}),
    mn.ENGINE_RUNNING: ("gauge", {"slice"}),
    mn.ENGINE_WAITING: ("gauge", {"slice"}),
    mn.ENGINE_KV_CACHE_USAGE: ("gauge", {"slice", "stat"}),
    mn.ENGINE_PREFIX_CACHE_HIT: ("gauge", {"slice"}),
    mn.ENGINE_PREEMPTIONS: ("counter", {"slice"}),
    mn.ENGINE_PROMPT_TOKENS: ("counter", {"slice"}),
    mn.ENGINE_GENERATION_TOKENS: ("counter", {"slice"}),
    mn.ENGINE_REQUEST_SUCCESS: ("counter", {"slice", "finished_reason"}),
    mn.SLICE_REPLICAS: ("gauge", {"slice"}),
    mn.SLICE_REPLICAS_MAX: ("gauge", {"slice"}),
    mn.SERVE_ONGOING: ("gauge", {"slice"}),
    mn.SERVE_QUEUED: ("gauge", {"slice"}),
    mn.SERVE_TARGET_REPLICAS: ("gauge", {"slice"}),
    mn.SLO_TTFT_THRESHOLD: ("gauge", {"slice"}),
    mn.SLO_TTFT_GOOD: ("counter", {"slice"}),
    mn.SLO_TTFT_REQUESTS: ("counter", {"slice"}),
    mn.SLO_TTFT_ATTAINMENT: ("gauge", {"slice"}),
    mn.TARGET_UP: ("gauge", {"slice", "pop", "replica", "target"}),
    mn.SOURCE_UP: ("gauge", {"source"}),
}

ROUTER = (
    'ray_serve_num_ongoing_requests_at_replicas{application="premium",deployment="LLMServer"} 9\n'
    'ray_serve_deployment_queued_queries{application="premium",deployment="LLMServer"} 2\n'
    'ray_serve_autoscaling_target_replicas{application="premium",deployment="LLMServer"} 4\n'
)


def registry_for(source: EngineSource) -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(GuardedCollector([source]))
    return reg


def metrics_by_name(reg: CollectorRegistry) -> dict[str, tuple[str, list]]:
    out = {}
    for fam in reg.collect():
        out[fam.name] = (fam.type, fam.samples)
    return out


def test_three_replicas_merged_per_slice(kit):
    slow = kit.set_sample(kit.slow_variant(), 'vllm:kv_cache_usage_perc{engine="0",model_name="tiny"}', 0.6)
    slow = kit.set_sample(slow, 'vllm:num_requests_running{engine="0",model_name="tiny"}', 4.0)
    after = kit.set_sample(kit.AFTER, 'vllm:kv_cache_usage_perc{engine="0",model_name="tiny"}', 0.3)
    after = kit.set_sample(after, 'vllm:num_requests_waiting{engine="0",model_name="tiny"}', 2.0)
    a, b, c = kit.standin(slow), kit.standin(kit.IDLE), kit.standin(after)
    router = kit.standin(ROUTER)
    targets = tuple(Target(url=s.url + "/metrics", slice="premium", pop="bristol", replica=f"premium-{i}") for i, s in enumerate((a, b, c)))
    source = EngineSource([StaticDiscovery(targets, (FrontTarget(router.url + "/metrics"),))], TOPOLOGY, EngineSettings(timeout_s=2.0))
    reg = registry_for(source)
    got = metrics_by_name(reg)
    for name, (type_, labels) in FAMILIES.items():
        base = name.removesuffix("_total") if type_ == "counter" else name
        assert base in got, name
        assert got[base][0] == type_, name
        samples = got[base][1]
        assert samples, name
        assert all(set(s.labels) - {"le"} == labels for s in samples), name

    v = reg.get_sample_value
    # Bucket-wise sum of the three replicas at every edge.
    readings = [reading_from_exposition(parse_exposition(t)).histograms["ttft"] for t in (slow, kit.IDLE, after)]
    for i, edge in enumerate(readings[0].edges):
        le = "+Inf" if edge == math.inf else repr(float(edge))
        assert v(mn.ENGINE_TTFT + "_bucket", {"slice": "premium", "le": le}) == sum(r.cumulative[i] for r in readings)
    # By hand from the fixtures: le=0.5 holds 30 (slow variant) + 1 (idle) + 41 (after-bench);
    # _count is 41 + 1 + 41. The SLO of every tier is 0.5 s, exactly on a TTFT bucket edge.
    assert v(mn.SLO_TTFT_THRESHOLD, {"slice": "premium"}) == 0.5
    assert v(mn.SLO_TTFT_GOOD, {"slice": "premium"}) == 72.0
    assert v(mn.SLO_TTFT_REQUESTS, {"slice": "premium"}) == 83.0
    assert v(mn.SLO_TTFT_ATTAINMENT, {"slice": "premium"}) == pytest.approx(72 / 83)
    assert v(mn.ENGINE_TTFT + "_sum", {"slice": "premium"}) == pytest.approx(2 * 0.8787593841552734 + 0.022993803024291992)
    assert v(mn.ENGINE_RUNNING, {"slice": "premium"}) == 4.0
    assert v(mn.ENGINE_WAITING, {"slice": "premium"}) == 2.0
    assert v(mn.ENGINE_KV_CACHE_USAGE, {"slice": "premium", "stat": "max"}) == 0.6
    assert v(mn.ENGINE_KV_CACHE_USAGE, {"slice": "premium", "stat": "mean"}) == pytest.approx(0.3)
    assert v(mn.ENGINE_PROMPT_TOKENS, {"slice": "premium"}) == 1303 + 2 + 1303
    assert v(mn.ENGINE_GENERATION_TOKENS, {"slice": "premium"}) == 648 + 8 + 648
    assert v(mn.ENGINE_REQUEST_SUCCESS, {"slice": "premium", "finished_reason": "length"}) == 83
    assert v(mn.ENGINE_PREFIX_CACHE_HIT, {"slice": "premium"}) == 0.0
    assert v(mn.SLICE_REPLICAS, {"slice": "premium"}) == 3
    assert v(mn.SLICE_REPLICAS_MAX, {"slice": "premium"}) == 6
    assert v(mn.SLICE_REPLICAS, {"slice": "free"}) == 0 and v(mn.SLICE_REPLICAS_MAX, {"slice": "free"}) == 1
    assert v(mn.SERVE_ONGOING, {"slice": "premium"}) == 9
    assert v(mn.SERVE_QUEUED, {"slice": "premium"}) == 2
    assert v(mn.SERVE_TARGET_REPLICAS, {"slice": "premium"}) == 4
    assert v(mn.SOURCE_UP, {"source": "engine"}) == 1
    assert v(mn.TARGET_UP, {"slice": "premium", "pop": "bristol", "replica": "premium-1", "target": b.url + "/metrics"}) == 1
    source.close()


def test_slo_between_edges_uses_largest_edge_below_and_says_so(kit):
    a = kit.standin(kit.slow_variant())
    t = Target(url=a.url + "/metrics", slice="premium", replica="p0")
    source = EngineSource([StaticDiscovery((t,))], TOPOLOGY, EngineSettings(slo_ttft_s={"premium": 0.6}))
    reg = registry_for(source)
    assert reg.get_sample_value(mn.SLO_TTFT_GOOD, {"slice": "premium"}) == 30.0  # the 0.5 edge
    fam = next(f for f in reg.collect() if f.name == mn.SLO_TTFT_GOOD.removesuffix("_total"))
    assert "premium: SLO 0.6 s counted at edge 0.5" in fam.documentation
    source.close()


def test_fault_matrix(kit):
    good = kit.standin(kit.AFTER)
    slow = kit.standin(kit.AFTER)
    slow.behaviour.delay_s = 3.0
    err = kit.standin("internal error")
    err.behaviour.status = 500
    garbage = kit.standin("<html>\n<body>hello</body>\n</html>\n")
    urls = {"good": good.url, "refused": kit.refused_url(), "slow": slow.url, "err": err.url, "garbage": garbage.url}
    targets = tuple(Target(url=u + "/metrics", slice="standard", pop="london", replica=k) for k, u in urls.items())
    source = EngineSource([StaticDiscovery(targets)], TOPOLOGY, EngineSettings(timeout_s=0.5, grace_s=0.2))
    reg = registry_for(source)
    start = time.monotonic()
    got = {s.labels["replica"]: s.value for s in next(f for f in reg.collect() if f.name == mn.TARGET_UP).samples}
    elapsed = time.monotonic() - start
    assert got == {"good": 1.0, "refused": 0.0, "slow": 0.0, "err": 0.0, "garbage": 0.0}
    assert elapsed < 2.5, "collect() waited for the slow replica"  # the slow one answers after 3 s
    assert reg.get_sample_value(mn.SLO_TTFT_REQUESTS, {"slice": "standard"}) == 41.0
    assert reg.get_sample_value(mn.SLICE_REPLICAS, {"slice": "standard"}) == 1
    assert reg.get_sample_value(mn.SOURCE_UP, {"source": "engine"}) == 1
    assert "HTTP 500" in source.last_target_errors[targets[3].key]
    source.close()


@dataclass
class MutableDiscovery:
    replicas: list[Target] = field(default_factory=list)

    def discover(self) -> Discovered:
        return Discovered(tuple(self.replicas), ())


def test_counters_never_decrease_when_a_replica_goes_or_restarts(kit):
    a, b = kit.standin(kit.AFTER), kit.standin(kit.AFTER)
    ta = Target(url=a.url + "/metrics", slice="standard", replica="a")
    tb = Target(url=b.url + "/metrics", slice="standard", replica="b")
    disc = MutableDiscovery([ta, tb])
    source = EngineSource([disc], TOPOLOGY)
    reg = registry_for(source)
    names = [(mn.ENGINE_PROMPT_TOKENS, {"slice": "standard"}), (mn.SLO_TTFT_REQUESTS, {"slice": "standard"}),
             (mn.ENGINE_TTFT + "_bucket", {"slice": "standard", "le": "0.02"}), (mn.SLO_TTFT_GOOD, {"slice": "standard"})]

    def read():
        return [reg.get_sample_value(n, lbl) for n, lbl in names]

    history = [read()]  # 2 x after-bench
    disc.replicas = [ta]  # b scaled down
    history.append(read())
    a.behaviour.body = kit.IDLE  # a restarted: its counters went back to the idle values
    history.append(read())
    b.close()
    disc.replicas = [ta, tb]  # b is listed again but refuses: held, not dropped
    history.append(read())
    assert history[0] == [2606.0, 82.0, 32.0, 82.0]
    for before, after in itertools.pairwise(history):
        assert all(x <= y for x, y in zip(before, after, strict=True)), history
    # After a's restart: b's 1303 + a's 1303 carried + a's idle 2.
    assert history[2][0] == 1303 + 1303 + 2
    source.close()


def test_ray_serve_discovery_and_ray_names(kit):
    # One Ray node agent serving two replicas' ray_vllm_* series plus the Serve router metrics.
    lines = []
    for line in kit.AFTER.splitlines():
        if line.startswith("vllm:"):
            name, _, rest = line.partition("{")
            for rid in ("r1", "r2"):
                lines.append(f'ray_{name.replace(":", "_")}{{ReplicaId="{rid}",{rest}')
    agent = kit.standin("\n".join(lines) + "\n" + ROUTER)
    port = int(agent.url.rsplit(":", 1)[1])
    apps = {"applications": {"premium": {"deployments": {"LLMServer": {"replicas": [
        {"replica_id": "r1", "node_ip": "127.0.0.1", "state": "RUNNING", "actor_name": "SERVE_REPLICA::premium#LLMServer#r1"},
        {"replica_id": "r2", "node_ip": "127.0.0.1", "state": "RUNNING", "actor_name": "SERVE_REPLICA::premium#LLMServer#r2"},
        {"replica_id": "r3", "node_ip": "127.0.0.1", "state": "STARTING"},
    ]}}}}}
    disc = RayServeDiscovery(fetch=lambda: apps, metrics_port=port, node_pops={"127.0.0.1": "bristol"})
    source = EngineSource([disc], TOPOLOGY)
    reg = registry_for(source)
    hits_before = agent.behaviour.hits
    assert reg.get_sample_value(mn.SLO_TTFT_REQUESTS, {"slice": "premium"}) == 82.0
    assert agent.behaviour.hits - hits_before == 1  # one fetch per node agent, shared by its replicas
    assert reg.get_sample_value(mn.SLICE_REPLICAS, {"slice": "premium"}) == 2
    assert reg.get_sample_value(mn.SERVE_ONGOING, {"slice": "premium"}) == 9
    url = agent.url + "/metrics"
    assert reg.get_sample_value(mn.TARGET_UP, {"slice": "premium", "pop": "bristol", "replica": "r2", "target": url}) == 1
    source.close()


def test_memory_is_steady_over_10000_scrapes(kit):
    bodies = {"http://r0/metrics": kit.AFTER, "http://r1/metrics": kit.IDLE, "http://r2/metrics": kit.slow_variant()}

    def fetch(url: str, timeout_s: float) -> str:
        return bodies[url]

    targets = tuple(Target(url=u, slice="premium", replica=u) for u in bodies)
    collector = GuardedCollector([EngineSource([StaticDiscovery(targets)], TOPOLOGY, fetcher=fetch)])
    for _ in range(500):  # warm up: caches, the thread pool, interned strings
        list(collector.collect())
    gc.collect()
    # RSS, not tracemalloc: tracing every allocation makes 10,000 scrapes take minutes on 2 cores.
    base = rss_bytes()
    for _ in range(10_000):
        for _fam in collector.collect():
            pass
    gc.collect()
    grown = rss_bytes() - base
    assert grown < 4 * 1024 * 1024, f"RSS grew {grown} bytes over 10,000 scrapes"


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
