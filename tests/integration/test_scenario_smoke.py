"""A short scenario on the session's testbed: summary rows with the issue's keys, kernel-measured links."""

from __future__ import annotations

import json
from pathlib import Path

from inferslice.testbed.scenarios.definitions import ScenarioSettings
from inferslice.testbed.scenarios.runner import SUMMARY_KEYS, run_scenario

from .conftest import Testbed, needs_root


@needs_root
def test_smoke_scenario_writes_the_summary(testbed: Testbed, tmp_path: Path) -> None:
    settings = ScenarioSettings(step_duration_s=8.0, warmup_s=2.0, tiers=("free",), concurrency=(6,), drain_timeout_s=4.0, settle_s=0.5)
    rows = run_scenario("smoke", tmp_path, state_dir=testbed.state_dir, settings=settings, progress=lambda _: None)
    assert [(r["tier"], r["concurrency"], r["cap"]) for r in rows] == [("free", 6, "none"), ("free", 6, "fixed")]
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written == json.loads(json.dumps(rows))
    for row in rows:
        assert set(SUMMARY_KEYS) <= set(row), set(SUMMARY_KEYS) - set(row)
        assert row["completed"] > 0 and row["failed"] == 0
        assert row["p50_ttft_s"] is not None and row["p99_ttft_s"] >= row["p50_ttft_s"]
    uncapped, capped = rows
    # ~6 streams x ~40 tok/s x ~300 B on the wire: about 0.55 Mbit/s uncapped; the 0.5 Mbit/s cap binds below that
    assert uncapped["cap_bps"] is None and 0.3e6 < uncapped["link_rx_bps"] < 1.0e6, uncapped
    assert capped["cap_bps"] == 0.5e6 and capped["link_rx_bps"] <= 0.5e6 * 1.1, capped
    assert uncapped["link_tx_bps"] > 0 and (tmp_path / "report.md").exists()
