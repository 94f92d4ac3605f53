"""``inferslice bench control``: every policy on every scenario, same arrivals, same seeds.

    run_control_bench(out_dir, topology, settings) -> summary (also written to out/summary.json)

Scenarios and their ground truth: ``bench/control_scenarios.py`` (loads inside every tier's ceiling
where the ceiling is not the point, client-edge squeezes, a GPU co-tenant, WAN cross-traffic and a
WAN delay step on the link a tier's replicas use, a backpressure trap, a flash crowd during a
squeeze, all at once, a diurnal cycle). Policies: ``bench/control_peers.py`` (``POLICIES``: the
single-knob peers, the composite peers that also turn the cap and move replicas, inferslice and its
ablations).

Per policy x scenario the summary has, per tier, ``goodput_rps`` (requests/s whose TTFT met the
SLO) and ``slo_attainment`` (share of arrived requests that met it; unserved ones count as missed),
and ``replica_seconds`` (also per tier), ``scale_outs``, ``scale_ins``, ``cap_changes``,
``relocations``, ``futile_actions`` (remedies that could address none of what bound the tier, by
the scenario's ground truth: ``control_scenarios.futile``, the same rule for every policy),
``time_to_recover_s`` (first SLO miss after the disturbance to three windows in a row within the
SLO; the worst affected tier), ``guarantee_violations`` (replicas beyond a ceiling/quota or on
another tier's reserved GPU).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferslice.bench.control_backend import ActionLog, ModelBackend
from inferslice.bench.control_counterfactual import Start, counterfactual_cell, counterfactual_futility
from inferslice.bench.control_peers import ABLATIONS, PEERS, POLICIES, REFERENCE
from inferslice.bench.control_policies import PAPER_COLD_START_S, InferSlice
from inferslice.bench.control_scenarios import (
    HIDDEN_CAUSE_SCENARIOS,
    Scenario,
    Serving,
    causes,
    futile,
    model_of,
    scenarios,
    step_model,
    undisturbed,
)
from inferslice.bench.control_sim import ServingSim
from inferslice.bottleneck import classify
from inferslice.control.guardrails import edge_held_bps, reservations
from inferslice.control.settings import EDGE_RATE_BPS, tier_policies
from inferslice.diagnosis import Diagnosis, Regime
from inferslice.service.diagnosis import ShareHistory
from inferslice.snapshot import Reference, SliceSnapshot
from inferslice.topology import Topology


@dataclass(frozen=True)
class BenchSettings:
    duration_s: float = 240.0  # warm-up, a disturbance of ~120 s, and time to recover and reclaim
    warmup_s: float = 20.0  # healthy windows before any disturbance (the classifier's reference)
    dt_s: float = 0.25  # model step: a tenth of a TPOT-scale event is not needed, a quarter second is enough for queues
    window_s: float = 2.0  # the testbed's scrape interval: every policy sees windows at the same instants
    seeds: tuple[int, ...] = (1, 2, 3)  # three arrival sequences per cell: a single Poisson draw misleads
    scenarios: tuple[str, ...] = tuple(scenarios())
    policies: tuple[str, ...] = tuple(POLICIES)
    # each remedy of these judged again by replaying the run without it (control_counterfactual.py):
    # inferslice and the peers it is compared with (~1 replay per remedy: the ablations would double it)
    counterfactual_policies: tuple[str, ...] = ("inferslice", *PEERS)


def _reference(top: Topology, settings: BenchSettings) -> dict[str, Reference]:
    """Each tier's unconstrained behaviour from a low-load run (what the platform learns at start)."""
    sim = ServingSim(top, lambda tier, t: 0.3, lambda slot, t: 1.0, seed=99, cold_start_s=top.timing.cold_start_s)
    for t in top.tiers:
        sim.set_replicas(t.name, 1, instant=True)
    refs: dict[str, list[SliceSnapshot]] = {t.name: [] for t in top.tiers}
    steps = round(settings.window_s / settings.dt_s)
    for _ in range(int(60 / settings.window_s)):
        for _ in range(steps):
            sim.step(settings.dt_s)
        for t in top.tiers:
            refs[t.name].append(sim.window(t.name, settings.window_s))
    out = {}
    for tier, snaps in refs.items():
        ttft = sorted(s.ttft_p50_s for s in snaps if s.ttft_p50_s is not None)
        tpot = sorted(s.tpot_p50_s for s in snaps if s.tpot_p50_s is not None)
        out[tier] = Reference(
            ttft_p50_s=ttft[len(ttft) // 2] if ttft else None, tpot_p50_s=tpot[len(tpot) // 2] if tpot else None, source="learned"
        )
    return out


def run_one(
    top: Topology, scenario: Scenario, policy_name: str, seed: int, settings: BenchSettings, refs: Mapping[str, Reference]
) -> dict[str, Any]:
    f = top.timing.cold_start_s / PAPER_COLD_START_S
    sim = model_of(top, scenario, seed)
    log = ActionLog()
    policy = POLICIES[policy_name](f)
    policy.setup(ModelBackend(sim), top, log)
    start = Start({n: ts.target for n, ts in sim.tiers.items()}, {n: ts.cap_bps for n, ts in sim.tiers.items()}, log.replica_of)
    caps = sorted(scenario.caps)
    steps_per_window = round(settings.window_s / settings.dt_s)
    series: dict[str, list[tuple[float, float | None, int, str]]] = {t.name: [] for t in top.tiers}  # (t, ttft_p99, replicas, regime)
    truth: list[tuple[float, dict[str, frozenset[str]]]] = []  # per window: what binds each tier (the scenario's ground truth)
    replica_seconds = {t.name: 0.0 for t in top.tiers}
    violations = 0
    res = reservations(tier_policies(top))
    # Each window gets the share of the one before, as the diagnosis service fills it for a co-located
    # controller: the classifier reads a co-tenant's tail from it (v14), under the bar the controller acts on.
    shares = ShareHistory()
    step = 0
    while sim.t < settings.duration_s - 1e-9:
        step_model(sim, caps, settings.dt_s)
        step += 1
        for name, ts in sim.tiers.items():
            replica_seconds[name] += settings.dt_s * len(ts.replicas)
        violations += count_violations(top, res, _model_live(sim), {n: ts.cap_bps for n, ts in sim.tiers.items()}, _model_holding(sim))
        windows: dict[str, SliceSnapshot] | None = None
        diagnoses: dict[str, Diagnosis] | None = None
        if step % steps_per_window == 0:
            windows = {t.name: sim.window(t.name, settings.window_s) for t in top.tiers}
            windows = {t: (w.with_reference(refs[t]) if t in refs else w) for t, w in windows.items()}
            windows = {t: shares.fill(w) for t, w in windows.items()}
            diagnoses = {t: classify(s, refs.get(t)) for t, s in windows.items()}
            for t, s in windows.items():
                series[t].append((sim.t, s.ttft_p99_s, sim.tiers[t].target, diagnoses[t].regime.value))
            truth.append((sim.t, causes(top, scenario, sim.t, _model_serving(sim))))
        policy.tick(sim.t, windows, diagnoses)
    per_tier = _model_tiers(top, sim, settings)
    for name, rs in replica_seconds.items():
        per_tier[name]["replica_seconds"] = rs
    cell = score(top, scenario, policy_name, policy, log, series, sum(replica_seconds.values()), violations, settings, per_tier, truth)
    if policy_name in settings.counterfactual_policies:
        verdicts = counterfactual_futility(top, scenario, seed, settings, start, log.entries, reference=sim)
        cell.update(counterfactual_cell(verdicts, seed))
    return cell


def _model_serving(sim: ServingSim) -> Serving:
    return Serving(
        {n: [r.slot for r in ts.replicas if r.state == "ready"] for n, ts in sim.tiers.items()},
        {n: ts.cap_bps for n, ts in sim.tiers.items()},
    )


def _model_live(sim: ServingSim) -> dict[str, list[str]]:
    # Draining replicas finish their streams and take no new work; make-before-break holds the
    # old replica until the new one serves: neither counts against the ceiling.
    return {
        name: [r.slot for r in ts.replicas if r.state != "draining" and not (r.replaces and r.state == "starting")]
        for name, ts in sim.tiers.items()
    }


def _model_holding(sim: ServingSim) -> dict[str, list[str]]:
    # ... but a move's successor holds its GPU from the moment it starts (as the guard counts it).
    return {name: [r.slot for r in ts.replicas if r.state != "draining"] for name, ts in sim.tiers.items()}


def count_violations(
    top: Topology,
    res: Mapping[str, Mapping[str, float]],
    live: Mapping[str, Sequence[str]],
    caps: Mapping[str, float | None] | None = None,
    holding: Mapping[str, Sequence[str]] | None = None,
) -> int:
    """Breaches at one instant (the guardrails' batch invariants, ``control.guardrails.violations``):
    a tier beyond its ceiling or GPU quota; a tier's replicas on a slot using more than its own
    reservation plus what no other tier reserved there; a slot holding more than one GPU in all;
    with ``caps`` (tier -> client-edge cap, None uncapped), the caps and the other tiers' guarantees
    beyond the edge. ``live``: per tier, the slots of its serving (or cold-starting, not draining) replicas,
    a move's successor left out (the ceiling); ``holding``: the slots holding GPU, successors in (the
    slots; default ``live``), as ``control.view.cluster_view`` counts them for the guard."""
    bad = 0
    use: dict[str, dict[str, float]] = {}
    for name, slots in live.items():
        t = top.tier(name)
        if len(slots) > t.replicas_max or len(slots) * t.gpu_per_replica > t.gpu_quota + 1e-9:
            bad += 1
    for name, slots in (holding if holding is not None else live).items():
        t = top.tier(name)
        for slot in slots:
            use.setdefault(slot, {})
            use[slot][name] = use[slot].get(name, 0.0) + t.gpu_per_replica
    for slot, per in use.items():
        if sum(per.values()) > 1.0 + 1e-9:  # two tiers each within "its" share can still overfill one GPU
            bad += 1
        for tier, amount in per.items():
            others_reserved = sum(v for o, v in res.get(slot, {}).items() if o != tier)
            own_reserved = res.get(slot, {}).get(tier, 0.0)
            if amount > own_reserved + max(0.0, 1.0 - own_reserved - others_reserved) + 1e-9:
                bad += 1
    if caps is not None and edge_held_bps(caps, tier_policies(top)) > EDGE_RATE_BPS + 1e-6:
        bad += 1
    return bad


def _model_tiers(top: Topology, sim: ServingSim, settings: BenchSettings) -> dict[str, dict[str, float]]:
    span = settings.duration_s - settings.warmup_s
    per_tier: dict[str, dict[str, float]] = {}
    for t in top.tiers:
        done = [r for r in sim.done if r.tier == t.name and r.arrival_s >= settings.warmup_s]
        good = [r for r in done if r.first_token_s is not None and r.first_token_s - r.arrival_s <= t.slo_ttft_p99_s]
        arrived_after = sum(1 for r in sim.done if r.tier == t.name and r.arrival_s >= settings.warmup_s)
        arrived_after += sum(1 for r in sim.tiers[t.name].queue if r.arrival_s >= settings.warmup_s)
        arrived_after += sum(1 for rep in sim.tiers[t.name].replicas for r in rep.streams if r.arrival_s >= settings.warmup_s)
        per_tier[t.name] = {
            "goodput_rps": len(good) / span,
            "slo_attainment": len(good) / arrived_after if arrived_after else 1.0,
        }
    return per_tier


Series = Mapping[str, list[tuple[float, float | None, int, str]]]  # per tier: (t, P99 TTFT, replica target, regime) per window


def score(
    top: Topology,
    sc: Scenario,
    policy_name: str,
    policy: Any,
    log: ActionLog,
    series: Series,
    replica_seconds: float,
    violations: int,
    settings: BenchSettings,
    per_tier: Mapping[str, Mapping[str, float]],
    truth: Sequence[tuple[float, Mapping[str, frozenset[str]]]],
) -> dict[str, Any]:
    """One cell of the summary: the backend's per-tier goodput/attainment, and the counts every
    backend derives the same way from the action log, the window series and the scenario's truth."""
    counts = {"scale_out": 0, "scale_in": 0, "cap_change": 0, "relocation": 0}
    futile_by_kind = {"scale_out": 0, "cap_change": 0, "relocation": 0}
    net_only_scale_outs = 0
    cold = top.timing.cold_start_s
    for entry in log.entries:
        t_act, tier, kind, _value, _prev = entry
        counts[kind] = counts.get(kind, 0) + 1
        before = [s for s in series[tier] if s[0] <= t_act]
        regime = before[-1][3] if before else "healthy"
        if regime == Regime.NETWORK_LIMITED.value and kind == "scale_out":
            net_only_scale_outs += 1
        horizon = 2 * settings.window_s + (cold if kind in ("scale_out", "relocation") else 0.0)
        if futile(top, sc, entry, truth, horizon):
            futile_by_kind[kind] += 1
    return {
        "policy": policy_name,
        "scenario": sc.name,
        "tiers": {t: dict(v) for t, v in per_tier.items()},
        "replica_seconds": replica_seconds,
        "scale_outs": counts["scale_out"],
        "scale_ins": counts["scale_in"],
        "cap_changes": counts["cap_change"],
        "relocations": counts["relocation"],
        "futile_actions": sum(futile_by_kind.values()),
        "futile_by_kind": futile_by_kind,
        "truth_windows": {t: sum(1 for _, per in truth if per.get(t)) for t in per_tier},
        "scale_outs_while_network_limited": net_only_scale_outs,
        "time_to_recover_s": _recovery(top, sc, series, settings),
        "guarantee_violations": violations,
        "controller_futile_events": policy.futile_count() if isinstance(policy, InferSlice) else None,
        "series": {t: [[round(x[0], 2), x[1], x[2], x[3]] for x in s] for t, s in series.items()},
    }


def _recovery(
    top: Topology, sc: Scenario, series: Mapping[str, list[tuple[float, float | None, int, str]]], settings: BenchSettings
) -> float | None:
    """Worst affected tier: first SLO miss after the onset -> start of 3 windows in a row within it.
    0 when the SLO was never missed; None when it never recovered before the run ended."""
    worst: float | None = 0.0
    for tier in sc.affected:
        slo = top.tier(tier).slo_ttft_p99_s
        pts = [s for s in series[tier] if s[0] >= sc.onset_s]
        miss = next((i for i, s in enumerate(pts) if s[1] is not None and s[1] > slo), None)
        if miss is None:
            continue
        rec = None
        for i in range(miss + 1, len(pts) - 2):
            if all(p[1] is None or p[1] <= slo for p in pts[i : i + 3]):
                rec = pts[i][0] - pts[miss][0]
                break
        if rec is None:
            return None
        worst = max(worst or 0.0, rec)
    return worst


def _mean_cells(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Average over seeds (counts and seconds as means; None if any seed never recovered)."""
    first = runs[0]
    out: dict[str, Any] = {"policy": first["policy"], "scenario": first["scenario"], "seeds": len(runs)}
    out["tiers"] = {t: {k: sum(r["tiers"][t][k] for r in runs) / len(runs) for k in first["tiers"][t]} for t in first["tiers"]}
    out["futile_by_kind"] = {k: sum(r["futile_by_kind"][k] for r in runs) / len(runs) for k in first["futile_by_kind"]}
    out["truth_windows"] = {k: sum(r["truth_windows"][k] for r in runs) / len(runs) for k in first["truth_windows"]}
    for k in (
        "replica_seconds",
        "scale_outs",
        "scale_ins",
        "cap_changes",
        "relocations",
        "futile_actions",
        "scale_outs_while_network_limited",
        "guarantee_violations",
    ):
        out[k] = sum(r[k] for r in runs) / len(runs)
    if all("counterfactual_futile_actions" in r for r in runs):
        out["counterfactual_futile_actions"] = sum(r["counterfactual_futile_actions"] for r in runs) / len(runs)
        out["counterfactual_remedies_judged"] = sum(r["counterfactual_remedies_judged"] for r in runs) / len(runs)
        out["counterfactual_futile_by_kind"] = {
            k: sum(r["counterfactual_futile_by_kind"][k] for r in runs) / len(runs) for k in first["counterfactual_futile_by_kind"]
        }
        out["counterfactual_futile"] = [v for r in runs for v in r["counterfactual_futile"]]
    ttr = [r["time_to_recover_s"] for r in runs]
    out["time_to_recover_s"] = None if any(x is None for x in ttr) else sum(ttr) / len(ttr)
    out["unrecovered_seeds"] = sum(1 for x in ttr if x is None)
    return out


def run_control_bench(out: Path, topology: Topology, settings: BenchSettings, progress: Callable[[str], None] = print) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    refs = _reference(topology, settings)
    scs = scenarios()
    cells: dict[str, dict[str, Any]] = {}
    series: dict[str, dict[str, Any]] = {}
    for sc_name in settings.scenarios:
        sc = scs[sc_name]
        cells[sc_name] = {}
        series[sc_name] = {}
        for pol in settings.policies:
            runs = [run_one(topology, sc, pol, seed, settings, refs) for seed in settings.seeds]
            series[sc_name][pol] = runs[0].pop("series")
            for r in runs[1:]:
                r.pop("series")
            cells[sc_name][pol] = _mean_cells(runs)
            c = cells[sc_name][pol]
            progress(
                f"{sc_name:<18} {pol:<18} goodput {sum(v['goodput_rps'] for v in c['tiers'].values()):5.2f} req/s"
                f"  replica-s {c['replica_seconds']:7.0f}  futile {c['futile_actions']:.1f}"
                + (f" (by replay {c['counterfactual_futile_actions']:.1f})" if "counterfactual_futile_actions" in c else "")
            )
    ceilings: dict[str, Any] = {}
    for sc_name in settings.scenarios:
        runs = [run_one(topology, undisturbed(scs[sc_name]), "static", seed, settings, refs) for seed in settings.seeds]
        for r in runs:
            r.pop("series")
        ceilings[sc_name] = _mean_cells(runs)["tiers"]
    summary = {
        "settings": {
            "duration_s": settings.duration_s,
            "warmup_s": settings.warmup_s,
            "window_s": settings.window_s,
            "seeds": list(settings.seeds),
            "cold_start_s": topology.timing.cold_start_s,
            "time_scale": topology.timing.cold_start_s / PAPER_COLD_START_S,
            "backend": "model (bench/control_sim.py), calibrated to the testbed engine",
        },
        "scenarios": {k: scs[k].description for k in settings.scenarios},
        "results": cells,
        "ratios": ratios(cells, ceilings),
        "undisturbed": {sc: {"tiers": t, "goodput_rps": sum(v["goodput_rps"] for v in t.values())} for sc, t in ceilings.items()},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    (out / "series.json").write_text(json.dumps(series))
    return summary


GOAL_GOODPUT, GOAL_REPLICA_S = 1.0, 0.9  # every scenario: >= 1.0x the best non-static peer's goodput at <= 0.9x its replica-seconds
GOAL_HIDDEN_GOODPUT, GOAL_HIDDEN_REPLICA_S = 1.3, 1.0  # the hidden-cause WAN scenarios: >= 1.3x at <= 1.0x


def _total(c: Mapping[str, Any]) -> float:
    return float(sum(v["goodput_rps"] for v in c["tiers"].values()))


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def ratios(cells: Mapping[str, Mapping[str, Any]], ceilings: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Per scenario: inferslice against the best non-static peer (by goodput summed over tiers), the goal
    verdict, per tier against that peer and against each tier's best peer, static beside, and each
    ablation against inferslice and against that peer."""
    out: dict[str, Any] = {}
    for sc, pols in cells.items():
        if "inferslice" not in pols:
            continue
        me = pols["inferslice"]
        peers = {p: c for p, c in pols.items() if p in PEERS}
        if not peers:
            continue
        best_name = max(peers, key=lambda p: _total(peers[p]))
        best = peers[best_name]
        hidden = sc in HIDDEN_CAUSE_SCENARIOS
        g_goal, r_goal = (GOAL_HIDDEN_GOODPUT, GOAL_HIDDEN_REPLICA_S) if hidden else (GOAL_GOODPUT, GOAL_REPLICA_S)
        g = _ratio(_total(me), _total(best))
        r = _ratio(me["replica_seconds"], best["replica_seconds"])
        per_tier = {t: _ratio(me["tiers"][t]["goodput_rps"], best["tiers"][t]["goodput_rps"]) for t in me["tiers"]}
        per_tier_best = {
            t: _ratio(me["tiers"][t]["goodput_rps"], max(c["tiers"][t]["goodput_rps"] for c in peers.values())) for t in me["tiers"]
        }
        row: dict[str, Any] = {
            "best_peer": best_name,
            "goodput_ratio_vs_best_peer": g,
            "replica_seconds_ratio_vs_best_peer": r,
            "goodput_ratio_per_tier_vs_best_peer": per_tier,
            "goodput_ratio_per_tier_vs_best_peer_of_that_tier": per_tier_best,
            "replica_seconds_ratio_per_tier_vs_best_peer": {
                t: _ratio(me["tiers"][t].get("replica_seconds", 0.0), best["tiers"][t].get("replica_seconds", 0.0)) for t in me["tiers"]
            },
            "goal": {"goodput_at_least": g_goal, "replica_seconds_at_most": r_goal, "futile_actions": 0},
            "goal_met": g is not None and r is not None and g >= g_goal - 1e-9 and r <= r_goal + 1e-9 and me["futile_actions"] == 0,
            "inferslice_futile_actions": me["futile_actions"],
            "best_peer_futile_actions": best["futile_actions"],
            # the same count by removing each remedy from the run (control_counterfactual.py), beside the truth rule's
            "inferslice_counterfactual_futile_actions": me.get("counterfactual_futile_actions"),
            "best_peer_counterfactual_futile_actions": best.get("counterfactual_futile_actions"),
        }
        if ceilings and sc in ceilings:  # what a perfect remedy could reach: static at the ceiling with nothing injected
            row["undisturbed_goodput_ratio_vs_best_peer"] = _ratio(sum(v["goodput_rps"] for v in ceilings[sc].values()), _total(best))
        for ref in REFERENCE:
            if ref in pols:
                row[f"goodput_ratio_vs_{ref}"] = _ratio(_total(me), _total(pols[ref]))
                row[f"replica_seconds_ratio_vs_{ref}"] = _ratio(me["replica_seconds"], pols[ref]["replica_seconds"])
        row["ablations"] = {
            a: {
                "goodput_ratio_vs_inferslice": _ratio(_total(pols[a]), _total(me)),
                "replica_seconds_ratio_vs_inferslice": _ratio(pols[a]["replica_seconds"], me["replica_seconds"]),
                "goodput_ratio_vs_best_peer": _ratio(_total(pols[a]), _total(best)),
                "replica_seconds_ratio_vs_best_peer": _ratio(pols[a]["replica_seconds"], best["replica_seconds"]),
                "futile_actions": pols[a]["futile_actions"],
            }
            for a in ABLATIONS
            if a in pols
        }
        out[sc] = row
    return out


def add_arguments(p: Any) -> None:
    """``inferslice bench control`` options (argparse parser)."""
    p.add_argument("--out", type=Path, default=Path("bench/results/control"), help="directory for summary.json, plots and report.md")
    p.add_argument("--topology", default=None, help="tiers file (default: the packaged one)")
    p.add_argument("--seeds", default="1,2,3", help="comma-separated arrival seeds (default 1,2,3)")
    p.add_argument("--scenarios", default=",".join(BenchSettings().scenarios), help="comma-separated subset of the scenarios")
    p.add_argument("--policies", default=",".join(BenchSettings().policies), help="comma-separated subset of the policies")
    p.add_argument("--duration-s", type=float, default=BenchSettings().duration_s, help="model: seconds per run")
    p.add_argument(
        "--backend",
        choices=("model", "testbed"),
        default="model",
        help=(
            "model: bench/control_sim.py, ~6 min of CPU for the full matrix with the replays (default); "
            "testbed: netns testbed, root, ~80 s a run (one seed: the first of --seeds)"
        ),
    )
    p.add_argument("--state-dir", type=Path, default=None, help="testbed: state directory (default /run/inferslice)")
    p.add_argument("--time-scale", type=float, default=0.28, help="testbed: the scenarios' clock compression (default 0.28: 240 s -> 67 s)")


def run(args: Any) -> int:
    from inferslice.bench.control_report import plot, report
    from inferslice.errors import InputError
    from inferslice.topology import load_topology

    scs = tuple(x for x in args.scenarios.split(",") if x)
    pols = tuple(x for x in args.policies.split(",") if x)
    unknown = [x for x in scs if x not in scenarios()] + [x for x in pols if x not in POLICIES]
    if unknown:
        raise InputError(f"unknown scenario/policy {unknown}", "--scenarios/--policies")
    if "ray_serve_default" in pols and importlib.util.find_spec("ray") is None:  # fail before the matrix, not in its middle
        raise InputError(
            "policy ray_serve_default runs Ray Serve's own policy code and needs Ray: "
            "pip install 'inferslice[ray]' (make bench does), or leave it out of --policies",
            "--policies",
        )
    try:
        seeds = tuple(int(x) for x in args.seeds.split(",") if x)
    except ValueError:
        raise InputError(f"not a list of integers: {args.seeds!r}", "--seeds") from None
    if args.backend == "testbed":
        from inferslice.bench import control_testbed_bench as tb
        from inferslice.common.registry import DEFAULT_STATE_DIR

        tb.main(
            args.out,
            args.topology,
            args.state_dir or DEFAULT_STATE_DIR,
            scs,
            pols,
            tb.TestbedBenchSettings(time_scale=args.time_scale, seed=seeds[0]),
        )
    else:
        settings = BenchSettings(duration_s=args.duration_s, seeds=seeds, scenarios=scs, policies=pols)
        run_control_bench(args.out, load_topology(args.topology), settings)
    plot(args.out, json.loads((args.out / "series.json").read_text()))
    print(f"report: {report(args.out)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="inferslice bench control", description=__doc__.split("\n")[0])
    add_arguments(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
