"""The composite peers (bench/control_peers.py) and KEDA as its users configure it, on the model.

Expected behaviour from the rules as their users write them (CONTRACTS.md, "Peers as their users
configure them"): the NOC rule doubles a cap pinned at >= 90 % for two windows, within the budget;
the mover moves a replica whose share reads < 0.5 to a free slot; the HPA behind KEDA scales down
only to the highest recommendation of its stabilisation window."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferslice.bench.control_backend import ActionLog, ModelBackend, ReplicaLoad, TierReading
from inferslice.bench.control_peers import Mover, NocRule, Shell
from inferslice.bench.control_policies import PAPER_COLD_START_S, KedaHpa, Wva, bench_settings
from inferslice.bench.control_sim import ServingSim
from inferslice.control.settings import tier_policies
from inferslice.snapshot import SliceSnapshot
from inferslice.topology import load_topology

TOP = load_topology()
F = TOP.timing.cold_start_s / PAPER_COLD_START_S


def _model(share: float = 1.0, rate: float = 0.5) -> tuple[ServingSim, ModelBackend, ActionLog, Shell]:
    sim = ServingSim(TOP, lambda tier, t: rate, lambda slot, t: share if slot.startswith("london") else 1.0, seed=1, cold_start_s=8.0)
    for t in TOP.tiers:
        sim.set_replicas(t.name, t.replicas_max, instant=True)
    backend, log = ModelBackend(sim), ActionLog()
    return sim, backend, log, Shell("peer", TOP, tier_policies(TOP, bench_settings(F)), backend.actuator(log))


def test_noc_doubles_a_cap_pinned_two_windows_running_and_only_then() -> None:
    sim, _, log, shell = _model()
    sim.set_cap("standard", 0.5e6)
    noc = NocRule()
    win = {"standard": SliceSnapshot("standard", link_rx_bps=0.47e6, link_cap_bps=0.5e6)}
    noc.step(10.0, win, shell, shell.observe())
    shell.flush(10.0)
    assert log.entries == []  # one window is not two
    noc.step(12.0, win, shell, shell.observe())
    shell.flush(12.0)
    assert [(e[1], e[2], e[3], e[4]) for e in log.entries] == [("standard", "cap_change", 1.0e6, 0.5e6)]
    assert sim.tiers["standard"].cap_bps == 1.0e6
    # At 80 % of the new cap nothing more; an uncapped tier is never touched.
    noc.step(14.0, {"standard": SliceSnapshot("standard", link_rx_bps=0.8e6), "free": SliceSnapshot("free", link_rx_bps=9e9)},
             shell, shell.observe())  # fmt: skip
    shell.flush(14.0)
    assert len(log.entries) == 1


def test_the_noc_raise_goes_through_the_guardrails() -> None:
    sim, _, log, shell = _model()
    sim.set_cap("standard", 0.5e6)
    noc, pinned = NocRule(), {"standard": SliceSnapshot("standard", link_rx_bps=0.49e6, link_cap_bps=0.5e6)}
    for t in (10.0, 12.0):
        noc.step(t, pinned, shell, shell.observe())
        shell.flush(t)
    sim.set_cap("standard", 0.5e6)  # squeezed again at once: the next raise is due two windows later ...
    for t in (13.0, 13.5):
        noc.step(t, pinned, shell, shell.observe())
        shell.flush(t)
    assert len(log.entries) == 1 and shell.refused == 1  # ... but inside the cap cooldown (4 s): refused


def test_the_mover_moves_a_replica_under_half_its_share_to_the_free_slot() -> None:
    _, _, log, shell = _model(share=0.35)
    Mover().step(10.0, shell, shell.observe())
    shell.flush(10.0)
    moves = [e for e in log.entries if e[2] == "relocation"]
    assert moves and all(e[3] == "dublin/gpu1" and str(e[4]).startswith("london/") for e in moves)
    _, _, log2, shell2 = _model(share=0.6)
    Mover().step(10.0, shell2, shell2.observe())
    shell2.flush(10.0)
    assert log2.entries == []  # 0.6 is not below 0.5


class _Queue:
    """A backend whose Premium router queue the test sets; KEDA's HPA reads only the queue and the target."""

    def __init__(self) -> None:
        self.waiting = 0
        self.targets = {t.name: 1 for t in TOP.tiers}

    def reading(self, tier: str) -> TierReading:
        return TierReading(self.targets[tier], self.waiting if tier == "premium" else 0, 0)

    def set_replicas(self, tier: str, n: int, *, instant: bool = False) -> None:
        self.targets[tier] = n


def test_keda_scales_down_only_to_the_highest_desired_count_of_its_window() -> None:
    backend = _Queue()
    keda = KedaHpa(F)
    keda.setup(backend, TOP, ActionLog())  # type: ignore[arg-type]
    backend.waiting = 20
    keda.decide(0.0, "premium")
    assert backend.targets["premium"] == 4  # ceil(20 / 5), within max(2 x 1, 1 + 4)
    backend.waiting = 0
    for t in (1.0, 4.0, 8.0):
        keda.decide(t, "premium")
        assert backend.targets["premium"] == 4  # the window (300 s x 0.028 = 8.4 s) still holds the 4
    keda.decide(9.0, "premium")
    assert backend.targets["premium"] == 1  # the 4 left the window: down to minReplicas at once
    backend.waiting = 21  # 21 / (5 x 4)... from 1 replica: ceil(21 / 5) = 5, capped at max(2 x 1, 1 + 4) = 5
    keda.decide(10.0, "premium")
    assert backend.targets["premium"] == 5
    backend.waiting = 26  # 26 / (5 x 5) = 1.04: within the 10 % tolerance, no change
    keda.decide(11.0, "premium")
    assert backend.targets["premium"] == 5


def test_keda_holds_the_tiers_guaranteed_count_as_its_min_replicas() -> None:
    """minReplicas is the tier's guaranteed count (``replicas_min``), not a hard-coded 1: a Premium
    that guarantees 3 replicas never drops under 3, with or without a queue."""
    tiers = [t.model_copy(update={"replicas_min": 3}) if t.name == "premium" else t for t in TOP.tiers]
    top = TOP.model_copy(update={"tiers": tiers})
    backend = _Queue()
    backend.targets["premium"] = 3
    keda = KedaHpa(F)
    keda.setup(backend, top, ActionLog())  # type: ignore[arg-type]
    for t in (0.0, 20.0, 40.0):  # no queue: desired ceil(0 / 5) = 0, held at the guarantee
        keda.decide(t, "premium")
        assert backend.targets["premium"] == 3
    backend.waiting = 30  # ceil(30 / 5) = 6 at the ceiling ...
    keda.decide(60.0, "premium")
    assert backend.targets["premium"] == 6
    backend.waiting = 0  # ... and back down to the guarantee once the window forgets the 6, never to 1
    keda.decide(80.0, "premium")
    assert backend.targets["premium"] == 3


class _Replicas:
    """A backend whose Premium replicas (state, KV usage) the test sets; WVA reads them and the target."""

    def __init__(self) -> None:
        self.targets = {t.name: 1 for t in TOP.tiers}
        self.premium: list[ReplicaLoad] = []

    def reading(self, tier: str) -> TierReading:
        reps = tuple(self.premium) if tier == "premium" else (ReplicaLoad(f"{tier}-0", "london/gpu0", "ready", 0, 0.1),)
        return TierReading(self.targets[tier], 0, 0, reps)

    def set_replicas(self, tier: str, n: int, *, instant: bool = False) -> None:
        self.targets[tier] = n


def test_wva_scales_up_from_its_ready_replicas_and_not_while_one_is_pending() -> None:
    # llm-d WVA's saturation analyzer: a saturated variant's target is readyReplicas + 1, and a
    # variant with pending replicas is skipped for scale-up (its "cascade scaling prevention").
    backend = _Replicas()
    wva = Wva(F)
    wva.setup(backend, TOP, ActionLog())  # type: ignore[arg-type]
    backend.targets["premium"] = 2
    backend.premium = [ReplicaLoad("p0", "london/gpu0", "ready", 8, 0.95), ReplicaLoad("p1", "bristol/gpu0", "starting", 0, None)]
    wva.sample(0.0)
    wva.decide(0.0, "premium")
    assert backend.targets["premium"] == 2  # saturated (KV 0.95 >= 0.8), but p1 is still starting
    backend.premium[1] = ReplicaLoad("p1", "bristol/gpu0", "ready", 8, 0.9)
    wva.peaks["premium"].clear()  # a new reconcile's window: both replicas ready and saturated
    wva.sample(1.0)
    wva.decide(1.0, "premium")
    assert backend.targets["premium"] == 3  # ready (2) + 1
    wva.sample(2.0)
    wva.decide(2.0, "premium")
    assert backend.targets["premium"] == 3  # the third is pending now: no fourth on the same saturation


@pytest.mark.parametrize("name", ["ray_noc_mover", "keda_noc_mover"])
def test_a_composite_peer_raises_the_squeezed_cap_and_moves_off_the_contended_gpu(name: str, tmp_path: Path) -> None:
    pytest.importorskip("ray.serve", reason="the Ray composite runs Ray Serve's own policy code: pip install 'inferslice[ray]'")
    from inferslice.bench.control import BenchSettings, run_control_bench

    summary = run_control_bench(
        tmp_path, TOP, BenchSettings(duration_s=120.0, seeds=(1,), scenarios=("bandwidth-squeeze", "gpu-share-drop"), policies=(name,)),
        progress=lambda _: None,
    )  # fmt: skip
    cells = summary["results"]
    assert cells["bandwidth-squeeze"][name]["cap_changes"] >= 1
    assert cells["gpu-share-drop"][name]["relocations"] >= 1
    assert all(c[name]["guarantee_violations"] == 0 for c in cells.values())
