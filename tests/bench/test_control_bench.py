"""The control benchmark's model and scoring, on one short scenario (seconds, no testbed)."""

from __future__ import annotations

from pathlib import Path

from inferslice.bench.control import BenchSettings, run_control_bench
from inferslice.topology import load_topology


def test_squeeze_inferslice_raises_the_cap_and_never_scales_for_the_network(tmp_path: Path) -> None:
    settings = BenchSettings(
        duration_s=120.0, seeds=(1,), scenarios=("bandwidth-squeeze",), policies=("static", "ttft_threshold", "inferslice")
    )
    summary = run_control_bench(tmp_path, load_topology(), settings, progress=lambda _: None)
    cells = summary["results"]["bandwidth-squeeze"]
    me, static = cells["inferslice"], cells["static"]
    assert me["cap_changes"] >= 1 and me["scale_outs_while_network_limited"] == 0
    assert me["tiers"]["standard"]["goodput_rps"] > 2 * static["tiers"]["standard"]["goodput_rps"]
    assert all(c["guarantee_violations"] == 0 for c in cells.values())
    assert set(me) >= {
        "tiers",
        "replica_seconds",
        "scale_outs",
        "scale_ins",
        "cap_changes",
        "relocations",
        "futile_actions",
        "time_to_recover_s",
    }
    assert set(me["tiers"]["standard"]) == {"goodput_rps", "slo_attainment", "replica_seconds"}
    assert (tmp_path / "summary.json").exists()
