"""``bench control --backend testbed`` end to end, as small as it gets: one scenario, one policy,
~30 s of scenario clock on a testbed of its own (root; skipped otherwise)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from inferslice.bench.control_testbed_bench import TestbedBenchSettings, run_matrix

PREFIX = f"isl-c{os.getpid() % 10000:04d}-"  # our own namespaces: the interface names must fit in 15 characters


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: builds the netns testbed")
def test_one_scenario_one_policy_runs_on_the_testbed(tmp_path: Path) -> None:
    ts = TestbedBenchSettings(time_scale=0.125, reference_s=10.0)  # 240 s -> 30 s; squeeze from 6 to 24 s
    summary = run_matrix(tmp_path / "out", None, tmp_path / "state", ["bandwidth-squeeze"], ["inferslice"], ts, lambda _: None, PREFIX)
    cell = summary["results"]["bandwidth-squeeze"]["inferslice"]
    assert set(cell) >= {"tiers", "replica_seconds", "scale_outs", "scale_ins", "cap_changes", "relocations", "futile_actions",
                         "time_to_recover_s", "guarantee_violations"}  # fmt: skip
    assert all(n > 0 for n in cell["requests"].values())  # every tier's load generator sent and recorded
    assert cell["tiers"]["premium"]["goodput_rps"] > 0
    assert cell["replica_seconds"] > 0
    assert cell["guarantee_violations"] == 0, cell["violation_instants"]
    series = json.loads((tmp_path / "out" / "series.json").read_text())["bandwidth-squeeze"]["inferslice"]
    assert len(series["standard"]) >= 10  # one point per 2 s window
