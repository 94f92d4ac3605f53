"""The synthetic deployment of `inferslice bench scale` (no timing here: that is the benchmark's job)."""

from __future__ import annotations

from inferslice.bench.scale_targets import RECORDED, advancing, network_and_gpu_lines, relabel_node, synthetic_topology
from inferslice.common.exposition import series_samples


def test_the_synthetic_topology_is_a_valid_tiers_file_of_the_stated_size() -> None:
    topo = synthetic_topology(100, 10, 3)
    assert len(topo.pops) == 100 and len(topo.tiers) == 1000
    assert sum(t.replicas_max for t in topo.tiers) == 3000
    assert all(slot.startswith(t.name.split("-")[1] + "/") for t in topo.tiers for slot in t.placement)


def _values(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, s.labels): s.value for s in series_samples(text)}


def test_advancing_grows_cumulative_samples_only_and_keeps_buckets_cumulative() -> None:
    fn = advancing(RECORDED.read_text(), step_s=1.0)
    early, late = _values(fn(0.0)), _values(fn(50.0))
    assert early.keys() == late.keys()
    grew = [k for k in early if late[k] > early[k]]
    assert grew and all(k[0].endswith(("_total", "_count", "_sum", "_bucket")) for k in grew)
    gauges = [k for k in early if k[0].endswith("_perc") or "usage" in k[0]]
    assert all(late[k] == early[k] for k in gauges)
    buckets = sorted(
        ((dict(k[1]), v) for k, v in late.items() if k[0] == "vllm:time_to_first_token_seconds_bucket"),
        key=lambda kv: float(kv[0]["le"]),
    )
    values = [v for _, v in buckets]
    assert values == sorted(values)


def test_each_pop_gets_its_own_labels() -> None:
    topo = synthetic_topology(3, 2, 2)
    text = relabel_node(network_and_gpu_lines(topo, "p000"), 2)
    slices = {dict(s.labels).get("slice") for s in series_samples(text)} - {None}
    assert slices == {"t0-p002", "t1-p002"}
