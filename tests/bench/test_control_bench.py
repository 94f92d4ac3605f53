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


def test_a_moves_successor_holds_its_gpu_in_the_benchmarks_violation_count() -> None:
    """The benchmark counts breaches as the guard does: a make-before-break successor is no extra
    replica against the ceiling, but it holds half a GPU on its slot from the moment it starts, so a
    move onto a full GPU is a breach (before, successors were left out of the slots and it read 0)."""
    from inferslice.bench.control import count_violations
    from inferslice.control.guardrails import reservations
    from inferslice.control.settings import tier_policies
    from inferslice.topology import load_topology

    top = load_topology()
    res = reservations(tier_policies(top))
    live = {t.name: list(t.placement[: t.replicas_max]) for t in top.tiers}  # every tier at its ceiling, at home
    assert count_violations(top, res, live) == 0
    # Premium moves a replica onto london/gpu1, which Standard's two replicas fill: the successor starts there
    holding = {**live, "premium": [*live["premium"], "london/gpu1"]}
    assert count_violations(top, res, live, holding=holding) >= 1
    # onto dublin/gpu1, which no tier reserves and nothing uses, the same move is within every bound
    holding = {**live, "premium": [*live["premium"], "dublin/gpu1"]}
    assert count_violations(top, res, live, holding=holding) == 0
