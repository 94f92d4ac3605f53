"""The generator's bookkeeping without a testbed: magnitudes from the clean twin's measurements, and
every (run, tier, window) of a seed labelled from fabricated twins' request records."""

from __future__ import annotations

from typing import Any

import pytest

from inferslice.bench import corpus_gen as gen
from inferslice.bench.corpus_draws import Cause, RunPlan, TierPlan
from inferslice.topology import load_topology

TOP = load_topology(None)
TIERS = tuple(
    TierPlan(t, "short-chat", "closed", 1, False, 0.5, tuple(TOP.tier(t).placement), 100 + i) for i, t in enumerate(TOP.tier_names)
)
CAP = Cause("c0", "cap", "standard", 12.0, 24.0, 0.5)
LOAD = Cause("c1", "load", "standard", 12.0, 24.0, 2.0)
PLAN = RunPlan(7, TIERS, (CAP, LOAD), run_s=48.0, window_s=6.0)
T0 = 1_000_000.0


def _records(tier: str, slow_ttft: float, slow_tpot: float) -> list[dict[str, Any]]:
    """A request every second; those starting in [12, 36) s are slowed by the causes in force."""
    out = []
    for i in range(47):
        start = T0 + i
        in_cause = 12 <= i < 36 and tier == "standard"
        ttft = 0.1 + (slow_ttft if in_cause else 0.0)
        tpot = 0.025 + (slow_tpot if in_cause else 0.0)
        out.append({"slice": tier, "start_s": start, "success": True, "ttft_s": ttft, "e2e_s": ttft + 10 * tpot, "output_tokens": 11})
    return out


def _run(label: str, causes: list[str], ttft: float, tpot: float) -> dict[str, Any]:
    n = int(PLAN.run_s // PLAN.window_s)
    snaps = [{"window": k, "prometheus": {t: {"slice": t, "ttft_p99_s": 0.1, "link_rx_bps": 9e5} for t in TOP.tier_names},
              "embedded": {t: {"slice": t, "ttft_p99_s": 0.1, "tpot_p50_s": 0.025, "ttft_p50_s": 0.1, "link_rx_bps": 9e5}
                           for t in TOP.tier_names}} for k in range(n)]  # fmt: skip
    links = [{"wan-bristol-london": 1e6 * k / 8 * PLAN.window_s} for k in range(n)]
    return {"label": label, "causes": causes, "applied": {}, "t0": T0, "snapshots": snaps, "link_bytes": links,
            "records": {t: _records(t, ttft, tpot) for t in TOP.tier_names}, "loadavg_start": [1.0], "loadavg_end": [1.0]}  # fmt: skip


def test_magnitudes_come_from_the_clean_twin() -> None:
    clean = _run("clean", [], 0.0, 0.0)
    meas = gen.measure(PLAN, clean)
    assert meas["links"]["wan-bristol-london"][1] == pytest.approx(1e6)  # bytes between two window ends -> bit/s
    cap = gen.applied_magnitude(TOP, PLAN, CAP, {"measured": meas}, gen.GenSettings())
    assert cap == {"cap_bps": 450_000, "demand_bps": 9e5}  # half the demand it measured during the cause
    load = gen.applied_magnitude(TOP, PLAN, LOAD, {"measured": meas}, gen.GenSettings())
    assert load["breach_point"] == 6 and load["extra_clients"] == 12 - 3  # 2x the breach point, over a base of 3


def test_every_window_gets_its_counterfactual_truth() -> None:
    runs = {
        "clean": _run("clean", [], 0.0, 0.0),
        "-c0": _run("-c0", ["c1"], 1.0, 0.0),  # the load alone: TTFT +1 s
        "-c1": _run("-c1", ["c0"], 0.3, 0.05),  # the cap alone: TTFT +0.3 s, TPOT +50 ms
        "all": _run("all", ["c0", "c1"], 1.3, 0.05),
    }
    windows = gen.seed_windows(TOP, PLAN, runs, "test")
    assert len(windows) == 4 * 3 * 7  # 4 runs x 3 tiers x 8 windows, less the ramp of each
    by = {(w["run"], w["tier"], w["window"]): w for w in windows}
    both = by[("all", "standard", 3)]  # 18-24 s: both causes in force
    assert list(both["truth"]["causes"]) == ["network", "queue"]
    assert both["truth"]["primary"] == "network_limited"  # the remedy that comes first
    assert both["truth"]["shares"]["queue"] == pytest.approx(1.0 / 1.3, abs=0.01)
    assert list(by[("-c1", "standard", 3)]["truth"]["causes"]) == ["network"]
    assert by[("all", "standard", 1)]["truth"]["healthy"]  # before the onset
    assert by[("all", "free", 3)]["truth"]["healthy"]  # another tier
    snap = both["snapshots"]["embedded"]
    assert snap["ref_ttft_p99_s"] == pytest.approx(0.1) and snap["ref_tpot_p50_s"] == pytest.approx(0.025)  # learned from the clean twin
    assert both["causes"][0]["class"] == "network" and both["tier_plan"]["tier"] == "standard"


def test_the_summary_counts_cells_pairs_and_healthy_windows() -> None:
    from inferslice.bench.corpus_summary import markdown, summarize

    runs = {"clean": _run("clean", [], 0.0, 0.0), "-c0": _run("-c0", ["c1"], 1.0, 0.0), "-c1": _run("-c1", ["c0"], 0.3, 0.05),
            "all": _run("all", ["c0", "c1"], 1.3, 0.05)}  # fmt: skip
    windows = gen.seed_windows(TOP, PLAN, runs, "test")
    s = summarize(windows, {"seeds": {"7": {"wall_s": 360.0}}})
    # windows 2-6 of standard (requests started in 12-36 s; the last ones' first tokens and ends fall in
    # 36-42 s): the cap in -c1 and all, the load in -c0 and all, both in all
    assert s["cells"] == {"network/standard": 10, "queue/standard": 10}
    assert s["compound_pairs"] == {"network+queue": 5}
    assert s["healthy"]["free"] == 28 and s["windows_per_seed"] == 84 and s["testbed_hours"] == 0.1
    assert "| network | 0 | 10 | 0 |" in markdown(s)


def test_rejudge_reproduces_the_generators_truth_from_the_lines_alone() -> None:
    """``corpus_repeat.rejudge`` finds each window's twins, clean twin and reference in the lines the
    generator writes, and judges them as it did: every truth of a two-cause seed, including windows
    whose twin measured no request (the load alone's twin loses window 3's requests here)."""
    from inferslice.bench.corpus_repeat import Counterfactuals, rejudge

    runs = {
        "clean": _run("clean", [], 0.0, 0.0),
        "-c0": _run("-c0", ["c1"], 1.0, 0.0),
        "-c1": _run("-c1", ["c0"], 0.3, 0.05),
        "all": _run("all", ["c0", "c1"], 1.3, 0.05),
    }
    in_window_3 = [r for r in runs["-c1"]["records"]["standard"] if 18 <= r["start_s"] - T0 + r["ttft_s"] < 24]
    runs["-c1"]["records"]["standard"] = [r for r in runs["-c1"]["records"]["standard"] if r not in in_window_3]
    for run in runs.values():  # the SLO as the collectors report it on every snapshot
        for row in run["snapshots"]:
            for src in ("prometheus", "embedded"):
                for snap in row[src].values():
                    snap["slo_ttft_p99_s"] = TOP.tier(snap["slice"]).slo_ttft_p99_s
    windows = gen.seed_windows(TOP, PLAN, runs, "test")
    cf = Counterfactuals(windows)
    for w in windows:
        assert rejudge(w, cf) == w["truth"], w["id"]
    # window 3 of the full run: its twin without the load step (-c1) measured no first token there,
    # so the step removes all of the TTFT excess (1.3 s), not the 1.0 s of the test above (truth v2)
    both = next(w for w in windows if (w["run"], w["tier"], w["window"]) == ("all", "standard", 3))
    load = next(e for e in both["truth"]["effects"] if e["name"] == "c1")
    assert load["share"]["ttft"] == 1.0 and load["removed_s"]["ttft"] == pytest.approx(1.3)
    assert both["truth"]["shares"]["queue"] == 1.0 and both["truth_version"] == 2


def test_each_window_carries_the_host_steal_of_its_run_and_the_most_over_its_truths_twins() -> None:
    runs = {
        "clean": _run("clean", [], 0.0, 0.0),
        "-c0": _run("-c0", ["c1"], 1.0, 0.0),
        "-c1": _run("-c1", ["c0"], 0.3, 0.05),
        "all": _run("all", ["c0", "c1"], 1.3, 0.05),
    }
    steal = {"clean": 0.01, "-c0": 0.30, "-c1": 0.02, "all": 0.05}  # the run without the cap stalled
    for label, run in runs.items():
        for row in run["snapshots"]:
            row["steal"] = steal[label]
    runs["-c1"]["snapshots"][4]["steal"] = None  # unmeasured there
    by = {(w["run"], w["tier"], w["window"]): w for w in gen.seed_windows(TOP, PLAN, runs, "test")}
    both = by[("all", "standard", 3)]  # judged against clean, -c0 and -c1
    assert (both["window_steal"], both["truth_steal_max"]) == (0.05, 0.30)
    alone = by[("-c1", "standard", 3)]  # the cap alone: its only twin is the clean run
    assert (alone["window_steal"], alone["truth_steal_max"]) == (0.02, 0.02)
    assert by[("-c1", "standard", 4)]["truth_steal_max"] == 0.01  # its own unmeasured: the clean twin's
    assert by[("clean", "free", 2)]["truth_steal_max"] == 0.01
    old = gen.seed_windows(TOP, PLAN, {k: _run(k, v["causes"], 0.0, 0.0) for k, v in runs.items()}, "test")
    assert all(w["window_steal"] is None and w["truth_steal_max"] is None for w in old)  # runs before 2026-12-07
