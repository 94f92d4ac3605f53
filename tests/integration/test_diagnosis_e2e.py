"""End to end on the testbed: a client-edge cap cut below demand is diagnosed ``network_limited``.

Testbed (namespaces, HTB edge, engines, fronts) + the exporter + a load generator serving
client-perceived metrics + a real Prometheus + ``PrometheusSource`` + the classifier behind a
``DiagnosisService`` (one pass of the diagnosis benchmark: baseline, then the cap cut, ~60 s).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from inferslice.bench import diagnosis

from .conftest import Testbed, needs_root

pytestmark = [
    pytest.mark.root,
    needs_root,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="needs the Debian prometheus binary"),
]


def test_cap_cut_is_diagnosed_network_limited_from_prometheus(testbed: Testbed, tmp_path: Path) -> None:
    cap_cut = next(i for i in diagnosis.DEFAULT_INJECTIONS if i.cap_bps is not None)
    result = diagnosis.run(tmp_path, diagnosis.quick_settings(), [cap_cut], state_dir=testbed.state_dir, progress=lambda _: None)
    (row,) = [r for r in result["summary"] if r["kind"] == "inject"]
    assert (row["source"], row["expected"]) == ("prometheus", "network_limited")
    score = next(s for s in result["scores"] if s["kind"] == "inject")
    assert row["detected"] == 1, f"never diagnosed network_limited; windows after the cut: {score['before_first']}"
    # "dominates": most settled windows carry it (the benchmark measures the exact share against its 95 % target)
    assert row["settled_windows"] >= 5
    assert row["settled_share"] >= 0.8, row
