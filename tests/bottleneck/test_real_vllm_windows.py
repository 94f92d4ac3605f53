"""The client-edge cap cut diagnosed on real vLLM engines, replayed from captured windows.

tests/fixtures/real-vllm/ holds the Standard tier's raw windows from three benchmark runs (see its
README). Replayed in order through a fresh ``DiagnosisService`` per run (the same reference learning
as live), they show what decides the verdict under the 0.5 Mbit/s cap:
- with the link at its cap (receive >= 80 % of it) the verdict is network_limited, as on the emulator;
- with the capped link not full (the real engines on 2 shared cores delivered less than the cap:
  in the run with all three injections Free's 24-client load step on a real vLLM began at the same
  instant), the network does not bind and the verdict is another regime;
- no reference is ever learned on these runs: the real engine's own TTFT tail breaches the 0.5 s SLO
  at baseline, so every window is judged against the fallback references.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from inferslice.bottleneck import DEFAULT
from inferslice.diagnosis import Diagnosis, Regime
from inferslice.service.diagnosis import DiagnosisService
from inferslice.service.store import Store
from inferslice.snapshot import snapshot_from_dict
from inferslice.topology import load_topology

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "real-vllm" / "standard-cap-cut-windows.jsonl"
RUNS = ("three-injections", "cap-cut-10-clients", "cap-cut-5-clients")


def _replay(run: str) -> list[tuple[dict[str, Any], Diagnosis]]:
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["run"] == run]
    store = Store(":memory:")
    try:
        service = DiagnosisService(store, load_topology(), clock=lambda: 0.0)
        return [(r, service.ingest(snapshot_from_dict(r["snapshot"])).diagnosis) for r in rows]
    finally:
        store.close()


def _capped(row: dict[str, Any]) -> bool:
    snap = row["snapshot"]
    return snap.get("link_cap_bps") is not None and row["cap_at_s"] < snap["window_end_s"] <= row["cap_until_s"]


def _link_full(row: dict[str, Any]) -> bool:
    snap = row["snapshot"]
    return float(snap.get("link_rx_bps", 0.0)) >= DEFAULT.link_binding_ratio * float(snap["link_cap_bps"])


@pytest.mark.parametrize("run", RUNS)
def test_a_capped_link_at_its_cap_is_network_limited_and_one_not_full_is_not(run: str) -> None:
    replayed = [(r, d) for r, d in _replay(run) if _capped(r)]
    assert len(replayed) >= 8, run
    full = [d.regime for r, d in replayed if _link_full(r)]
    not_full = [d.regime for r, d in replayed if not _link_full(r)]
    assert full and all(g is Regime.NETWORK_LIMITED for g in full), (run, Counter(full))
    assert Regime.NETWORK_LIMITED not in not_full, (run, Counter(not_full))


def test_with_one_injection_on_an_unloaded_machine_the_link_stays_at_its_cap() -> None:
    # The 10-client run: the cap binds in every window once the uncapped traffic has left the window.
    replayed = [(r, d) for r, d in _replay("cap-cut-10-clients") if _capped(r)]
    settled = replayed[3:]
    assert settled and all(_link_full(r) for r, _ in settled)
    assert all(d.regime is Regime.NETWORK_LIMITED for _, d in replayed)


@pytest.mark.parametrize("run", RUNS)
def test_no_reference_is_learned_while_the_engine_s_own_tail_breaches_the_slo(run: str) -> None:
    for _row, d in _replay(run):
        note = next(e.note for e in d.evidence if e.signal == "reference_samples")
        assert note == "reference source: none", (run, note)
        assert d.confidence <= 0.55
