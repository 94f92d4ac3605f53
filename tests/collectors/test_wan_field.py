"""``wan_rtt_excess_s`` from the PoP prober's histogram, the same in both sources (fields.WanJoin).

Per 10 s the london prober's probes to the gateway (bristol) all land in the (0.25, 0.5] bucket (a
+0.45 s delay step on a 9 ms link), dublin's in (0.015, 0.02] (its configured 18 ms). Premium serves
from london and dublin, Free from bristol (the gateway), Standard from dublin only. Expected, from
Prometheus's bucket interpolation: london's median 0.25 + 0.25 x 0.5 = 0.375 s, so Premium
0.375 - 0.009; dublin's median 0.0175 s is under its configured 0.018 (clamped: 0); Free 0."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from inferslice.collectors import EmbeddedSource, FieldSettings, PrometheusSettings, PrometheusSource, SliceConfig
from inferslice.collectors.fields import field_specs

from .conftest import PROMTOOL, Samples, histogram, key, render_openmetrics, render_text, require_prometheus, running_prometheus

RTT = "inferslice_pop_rtt_seconds"
FIELDS = FieldSettings(gateway="bristol", wan_rtt_s=(("london", 0.009), ("dublin", 0.018)))
SLICES = (SliceConfig("free"), SliceConfig("premium"), SliceConfig("standard"))
T0 = 1_700_000_000.0
EXPECT = {"free": 0.0, "premium": 0.375 - 0.009, "standard": 0.0}


def probes(k: float) -> Samples:
    inf = float("inf")
    buckets_l = {0.015: 0.0, 0.02: 0.0, 0.25: 0.0, 0.5: 10 * k, 1.0: 10 * k, inf: 10 * k}
    buckets_d = {0.015: 0.0, 0.02: 10 * k, 0.25: 10 * k, 0.5: 10 * k, 1.0: 10 * k, inf: 10 * k}
    out: Samples = {}
    out.update(histogram(RTT, buckets_l, 4.59 * k, pop="london", peer_pop="bristol"))
    out.update(histogram(RTT, buckets_d, 0.18 * k, pop="dublin", peer_pop="bristol"))
    out.update(histogram(RTT, buckets_l, 4.59 * k, pop="bristol", peer_pop="london"))  # the other direction: not the path's reading
    for sl, pop, rep in (("free", "bristol", "free-0"), ("premium", "london", "premium-0"), ("premium", "dublin", "premium-1"),
                         ("standard", "dublin", "standard-0")):  # fmt: skip
        out[key("inferslice_replica_gpu_share_ratio", slice=sl, pop=pop, replica=rep)] = 1.0
    return out


def test_no_gateway_configured_no_field() -> None:
    assert "wan_rtt_excess_s" not in field_specs(FieldSettings())
    assert "wan_rtt_excess_s" in field_specs(FIELDS)


def test_embedded_source_reads_the_slowest_path_of_each_slice() -> None:
    src = EmbeddedSource([], SLICES, fields=FIELDS)
    for i in range(4):
        src.ingest("network", render_text(probes(i)), T0 + 10 * i)
    got = {s.slice: s.wan_rtt_excess_s for s in src.snapshots(T0 + 30, 30.0)}
    assert got == pytest.approx(EXPECT)


def test_prometheus_gives_the_same_value(tmp_path: Path) -> None:
    require_prometheus()
    scrapes = [("network", T0 + 10 * i, probes(i)) for i in range(4)]
    om = tmp_path / "data.om"
    om.write_text(render_openmetrics(scrapes))
    data = tmp_path / "data"
    try:
        cmd = [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(om), str(data)]
        subprocess.run(cmd, check=True, capture_output=True, timeout=60)
    except FileNotFoundError:
        pytest.skip(f"no promtool at {PROMTOOL}")
    with running_prometheus(tmp_path, "global: {scrape_interval: 15s}\nscrape_configs: []\n", data) as url:
        prom = PrometheusSource(SLICES, PrometheusSettings(base_url=url), FIELDS)
        try:
            got = {s.slice: s.wan_rtt_excess_s for s in prom.snapshots(T0 + 30, 30.0)}
        finally:
            prom.close()
    assert got == pytest.approx(EXPECT)
