"""Reading a replica out of an exposition (current, legacy and Ray names) and merging slices."""

from __future__ import annotations

import math

import pytest

from inferslice.common.exposition import parse_exposition
from inferslice.errors import ParseError
from inferslice.exporters.engine import (
    Histogram,
    SliceAccumulator,
    front_readings_from_exposition,
    good_at_threshold,
    merge_histograms,
    reading_from_exposition,
)

TTFT_EDGES = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560, math.inf)


def test_reading_of_the_after_bench_fixture(kit):
    r = reading_from_exposition(parse_exposition(kit.AFTER))
    ttft = r.histograms["ttft"]
    assert ttft.edges == TTFT_EDGES
    # From the fixture: 0 0 1 16 then 41 from le=0.04 on.
    assert ttft.cumulative[:5] == (0.0, 0.0, 1.0, 16.0, 41.0)
    assert ttft.count == 41.0 and ttft.sum == pytest.approx(0.8787593841552734)
    assert set(r.histograms) == {"ttft", "itl", "tpot", "e2e", "queue"}
    assert r.histograms["itl"].count == 607.0
    assert r.counters == {"prompt_tokens": 1303.0, "generation_tokens": 648.0, "preemptions": 0.0,
                          "prefix_queries": 1303.0, "prefix_hits": 0.0}
    assert r.success == {"stop": 0.0, "length": 41.0, "abort": 0.0, "error": 0.0, "repetition": 0.0}
    assert (r.running, r.waiting, r.kv_cache_usage) == (0.0, 0.0, 0.0)
    assert r.start_time_s == pytest.approx(1.7959949832e9)


LEGACY = """\
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.25
# TYPE vllm:gpu_prefix_cache_queries_total counter
vllm:gpu_prefix_cache_queries_total{model_name="m"} 100
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{model_name="m"} 40
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{le="0.05",model_name="m"} 3
vllm:time_per_output_token_seconds_bucket{le="+Inf",model_name="m"} 5
vllm:time_per_output_token_seconds_count{model_name="m"} 5
vllm:time_per_output_token_seconds_sum{model_name="m"} 0.4
vllm:num_requests_running{model_name="m"} 2
"""


def test_legacy_names():
    r = reading_from_exposition(parse_exposition(LEGACY))
    assert r.kv_cache_usage == 0.25
    assert r.counters["prefix_queries"] == 100 and r.counters["prefix_hits"] == 40
    assert r.histograms["itl"] == Histogram(edges=(0.05, math.inf), cumulative=(3.0, 5.0), sum=0.4)
    assert r.running == 2


def ray_text(kit) -> str:
    """The fixture as Ray's metrics agent would show two replicas of it: ray_vllm_* names, ReplicaId."""
    out = []
    for line in kit.AFTER.splitlines():
        if line.startswith("vllm:"):
            name, _, rest = line.partition("{")
            ray_name = "ray_" + name.replace(":", "_")
            for rid, scale in (("abc", 1.0), ("def", 2.0)):
                labels, _, value = rest.rpartition("} ")
                out.append(f'{ray_name}{{ReplicaId="{rid}",{labels}}} {float(value) * scale!r}')
    return "\n".join(out) + "\n"


def test_ray_wrapped_names_split_by_replica(kit):
    expo = parse_exposition(ray_text(kit))
    a = reading_from_exposition(expo, "abc")
    b = reading_from_exposition(expo, "llm-premium#LLMServer#def")  # a qualified id matches its tail
    assert a.histograms["ttft"].count == 41.0 and b.histograms["ttft"].count == 82.0
    assert a.counters["prompt_tokens"] == 1303.0 and b.counters["prompt_tokens"] == 2606.0
    assert a.start_time_s is None  # process metrics belong to the Ray agent, not the replica
    with pytest.raises(ParseError):
        reading_from_exposition(expo, "zzz")


def test_no_vllm_metrics_is_a_parse_error():
    with pytest.raises(ParseError):
        reading_from_exposition(parse_exposition("process_open_fds 3\n"))


def test_merge_is_bucket_wise_sum(kit):
    a = reading_from_exposition(parse_exposition(kit.AFTER)).histograms["ttft"]
    b = reading_from_exposition(parse_exposition(kit.IDLE)).histograms["ttft"]
    m = merge_histograms([a, b, a])
    assert m is not None and m.edges == a.edges
    assert m.cumulative == tuple(2 * x + y for x, y in zip(a.cumulative, b.cumulative, strict=True))
    assert m.sum == pytest.approx(2 * a.sum + b.sum)


def test_merge_with_different_edges_keeps_common_edges_only():
    a = Histogram(edges=(0.1, 0.5, 1.0, math.inf), cumulative=(1, 4, 6, 7), sum=3.0)
    b = Histogram(edges=(0.25, 0.5, 2.0, math.inf), cumulative=(2, 3, 5, 5), sum=2.0)
    m = merge_histograms([a, b])
    assert m == Histogram(edges=(0.5, math.inf), cumulative=(7.0, 12.0), sum=5.0)


def test_good_at_threshold_exact_and_below():
    h = Histogram(edges=(0.25, 0.5, 0.75, math.inf), cumulative=(2, 5, 9, 10), sum=1)
    assert good_at_threshold(h, 0.5) == (5, 0.5)
    assert good_at_threshold(h, 0.6) == (5, 0.5)  # no edge at 0.6: the largest edge below
    assert good_at_threshold(h, 0.1) == (0.0, None)


def _series(v: float, hist_count: float = 0.0):
    return {("prompt_tokens", "", 0.0): v, ("ttft", "bucket", 0.5): hist_count, ("ttft", "bucket", math.inf): hist_count,
            ("ttft", "count", 0.0): hist_count, ("ttft", "sum", 0.0): hist_count / 10}


def test_accumulator_never_decreases_through_churn_and_restarts():
    acc = SliceAccumulator(forget_after_s=100.0)
    edges = {"ttft": (0.5, math.inf)}
    key = ("prompt_tokens", "", 0.0)
    acc.observe("a", _series(10, 1), edges, 1.0, now_s=0)
    acc.observe("b", _series(20, 2), edges, 1.0, now_s=0)
    totals = [acc.total(key)]
    # b scaled down: it is no longer observed, but its 20 still count.
    acc.observe("a", _series(15, 3), edges, 1.0, now_s=1)
    totals.append(acc.total(key))
    # a restarts (counter reset): 15 carried, plus its new 2.
    acc.observe("a", _series(2, 1), edges, 1.0, now_s=2)
    totals.append(acc.total(key))
    # a restarts again with a *higher* value, detected by the process start time.
    acc.observe("a", _series(50, 5), edges, 2.0, now_s=3)
    totals.append(acc.total(key))
    # b forgotten after 100 s: folded into carried, total unchanged; memory released.
    assert sorted(acc.expire(now_s=150)) == ["a", "b"]
    totals.append(acc.total(key))
    assert totals == [30.0, 35.0, 37.0, 87.0, 87.0]
    assert acc.replicas == [] and acc.resets == 2
    h = acc.histogram("ttft")
    assert h is not None and h.edges == (0.5, math.inf) and h.count == 2 + 3 + 1 + 5  # b 2; a 3 before its first restart, 1, then 5


def test_front_readings_by_application():
    text = (
        'ray_serve_num_ongoing_requests_at_replicas{application="premium",deployment="LLMServer"} 7\n'
        'ray_serve_num_ongoing_requests_at_replicas{application="free",deployment="LLMServer"} 1\n'
        'ray_serve_deployment_queued_queries{application="premium",deployment="LLMServer"} 3\n'
        'ray_serve_autoscaling_target_replicas{application="llm-premium",deployment="LLMServer"} 4\n'
    )
    got = front_readings_from_exposition(parse_exposition(text), None, {"llm-premium": "premium"})
    assert got["premium"].ongoing == 7 and got["premium"].queued == 3 and got["premium"].target_replicas == 4
    assert got["free"].queued is None
