"""Futility by counterfactual replay: what each remedy did, measured by removing it (the model only).

The scenario truth (``control_scenarios.futile``) judges a remedy against what bound its tier, read
from the scenario's *mean* injections: a cap binds when the mean offered demand reaches 90 % of it.
A burst window whose cap binds for a few seconds is not seen that way. This module asks the model
instead, the same way for every policy:

1. replay the policy's logged actions open loop on the same seed (the model's arrivals and request
   lengths come from a generator no action touches, so the replay with every action reproduces the
   run exactly: ``counterfactual_futility`` checks it, request by request);
2. replay again without one remedy (``without``):
   - a scale-out ``n -> n + d``: the ``d`` replicas it started never exist. Later replica targets
     are lowered by those of its replicas still alive then (a scale-in retires the newest first, so
     a later scale-out's replicas go before its own), until a target at or below ``n`` retires the
     last of them. Its **span** is from it until then (or the end), plus its horizon;
   - a cap raise: the cap stays at its previous value until the next cap action on the tier (an
     absolute value, kept as logged). Span: until that action, plus its horizon;
   - a relocation: the replica stays where it was. Span: until the moved replica moves again, or
     the end, plus its horizon;
   the horizon is the scenario rule's: two windows, and one cold start for a scale-out or a move;
3. count the tier's requests that arrived in the span and missed the SLO (a first token later than
   it, or none by the end), with every action (``misses_with``) and without this one
   (``misses_without``).

A remedy is **futile** when, without it, its tier missed its SLO over the span (more than
``P99_MISS_SHARE`` of the span's arrivals missed: the SLO is a P99) and it recovers less than
``RECOVERS_AT_LEAST`` of those misses. A remedy in a span that was within the SLO without it is not
futile: it remedied nothing that was wrong, and its cost shows in replica-seconds (the scenario
rule's stance). Later actions stay as logged (lowered only by the removed scale-out's own replicas):
the replay credits a remedy with what it did, not with what the policy would have done instead.

    counterfactual_futility(top, sc, seed, settings, start, entries) -> list of per-remedy verdicts
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from inferslice.bench.control_scenarios import Scenario, is_remedy, model_of, step_model
from inferslice.bench.control_sim import Request, ServingSim
from inferslice.topology import Topology

if TYPE_CHECKING:
    from inferslice.bench.control import BenchSettings

RECOVERS_AT_LEAST = 0.1  # a remedy that cures under a tenth of its span's misses addresses none of what caused them
P99_MISS_SHARE = 0.01  # a P99 target: a tier missing at most 1 % of its requests is within its SLO

Entry = tuple[float, str, str, float | str | None, float | str | None]  # (t, tier, kind, value, previous), as ActionLog keeps
KNOB = {"scale_out": "replicas", "scale_in": "replicas", "cap_change": "cap", "relocation": "relocation"}


@dataclass(frozen=True)
class Start:
    """What the policy's ``setup`` left and the log does not hold."""

    replicas: Mapping[str, int]  # per tier, started ready
    caps_bps: Mapping[str, float | None]
    replica_of: Mapping[int, str]  # ActionLog.replica_of: a relocation's entry index -> the replica it moved


@dataclass(frozen=True)
class Verdict:
    """One remedy, judged by removing it."""

    index: int  # its position in the action log
    t: float
    tier: str
    kind: str
    value: float | str | None
    previous: float | str | None
    span_s: tuple[float, float]  # arrivals counted: [from, to)
    misses_with: int
    misses_without: int
    arrived: int  # the tier's arrivals in the span (the same with or without it: arrivals do not depend on actions)
    futile: bool

    @property
    def recovered(self) -> int:
        return self.misses_without - self.misses_with

    def to_dict(self) -> dict[str, object]:
        return {
            "t": round(self.t, 2),
            "tier": self.tier,
            "kind": self.kind,
            "value": self.value,
            "previous": self.previous,
            "span_s": [round(self.span_s[0], 2), round(self.span_s[1], 2)],
            "misses_with": self.misses_with,
            "misses_without": self.misses_without,
            "arrived": self.arrived,
            "futile": self.futile,
        }


def replay(
    top: Topology,
    sc: Scenario,
    seed: int,
    settings: BenchSettings,
    start: Start,
    entries: Sequence[Entry],
    drop: int | None = None,
) -> ServingSim:
    """The run again, open loop: the policy's starting state, the scenario's own cap events, then
    after every step the logged actions due by then (in log order); with ``drop``, the run without
    that remedy (``without``). Returns the finished model."""
    sim = model_of(top, sc, seed)
    for tier, n in start.replicas.items():
        sim.set_replicas(tier, n, instant=True)
    for tier, cap in start.caps_bps.items():
        sim.set_cap(tier, cap)
    caps = sorted(sc.caps)
    pending = list(enumerate(entries)) if drop is None else without(entries, drop)[0]
    k = 0
    while sim.t < settings.duration_s - 1e-9:
        step_model(sim, caps, settings.dt_s)
        while k < len(pending) and pending[k][1][0] <= sim.t + 1e-9:
            _apply(sim, pending[k][1], start.replica_of.get(pending[k][0]))
            k += 1
    return sim


def _apply(sim: ServingSim, entry: Entry, replica: str | None) -> None:
    _t, tier, kind, value, previous = entry
    if kind in ("scale_out", "scale_in") and isinstance(value, (int, float)):
        sim.set_replicas(tier, int(value))
    elif kind == "cap_change" and isinstance(value, (int, float)):
        sim.set_cap(tier, float(value))
    elif kind == "relocation" and isinstance(value, str) and isinstance(previous, str):
        # The replica the run moved, when it is still on that slot; otherwise (a removed scale-out shifts
        # the ids of the replicas started after it) the oldest ready one there; none: the move is skipped.
        live = [r for r in sim.tiers[tier].replicas if r.slot == previous and r.state != "draining"]
        chosen = next((r for r in live if r.id == replica), None) or next((r for r in live if r.state == "ready"), None)
        if chosen is not None:
            sim.relocate(tier, chosen.id, value)


def _requests(sim: ServingSim, tier: str) -> list[Request]:
    ts = sim.tiers[tier]
    out = [r for r in sim.done if r.tier == tier]
    out += list(ts.queue)
    out += [r for rep in ts.replicas for r in rep.streams]
    return out


def misses(sim: ServingSim, tier: str, slo_s: float, t0: float, t1: float) -> tuple[int, int]:
    """Requests of ``tier`` that arrived in [t0, t1): how many did not get a first token within the
    SLO (still queued or unstarted at the end counts as missed, as in the goodput), and how many arrived."""
    arrived = [r for r in _requests(sim, tier) if t0 <= r.arrival_s < t1]
    missed = sum(1 for r in arrived if not (r.first_token_s is not None and r.first_token_s - r.arrival_s <= slo_s))
    return missed, len(arrived)


def horizon_s(top: Topology, settings: BenchSettings, kind: str) -> float:
    """The scenario rule's horizon: two windows, one cold start more for replicas and moves."""
    return 2 * settings.window_s + (top.timing.cold_start_s if kind in ("scale_out", "relocation") else 0.0)


def without(entries: Sequence[Entry], i: int) -> tuple[list[tuple[int, Entry]], float | None]:
    """The log without remedy ``i`` (indexed entries, see the module docstring) and when its effect
    ends: the time of the action that ends it, None when it lasts to the end of the run."""
    _t, tier, kind, value, previous = entries[i]
    rest = [(j, e) for j, e in enumerate(entries) if j != i]
    if kind == "scale_out" and isinstance(value, (int, float)) and isinstance(previous, (int, float)):
        base, alive = int(previous), int(value) - int(previous)
        out: list[tuple[int, Entry]] = []
        ended: float | None = None
        for j, e in rest:
            if j > i and alive > 0 and e[1] == tier and KNOB[e[2]] == "replicas" and isinstance(e[3], (int, float)):
                alive = min(alive, max(0, int(e[3]) - base))
                e = (e[0], e[1], e[2], int(e[3]) - alive, e[4])
                if alive == 0:
                    ended = e[0]
            out.append((j, e))
        return out, ended
    if kind == "relocation":
        nxt = next((e[0] for j, e in rest if j > i and e[1] == tier and e[2] == "relocation" and e[4] == value), None)
        return rest, nxt
    nxt = next((e[0] for j, e in rest if j > i and e[1] == tier and KNOB[e[2]] == KNOB[kind]), None)
    return rest, nxt


def span_of(top: Topology, settings: BenchSettings, entries: Sequence[Entry], i: int) -> tuple[float, float]:
    """Arrivals counted for remedy ``i``: from it until its effect ends (or the run does), plus its horizon."""
    t, _tier, kind, _v, _p = entries[i]
    ends = without(entries, i)[1]
    return (t, min(settings.duration_s, (settings.duration_s if ends is None else ends) + horizon_s(top, settings, kind)))


def _fingerprint(sim: ServingSim) -> list[tuple[str, float, float | None]]:
    return sorted((r.tier, r.arrival_s, r.first_token_s) for tier in sim.tiers for r in _requests(sim, tier))


def counterfactual_futility(
    top: Topology,
    sc: Scenario,
    seed: int,
    settings: BenchSettings,
    start: Start,
    entries: Sequence[Entry],
    reference: ServingSim | None = None,
) -> list[Verdict]:
    """Every remedy of the log judged by removing it (see the module docstring). ``reference``: the
    closed-loop run's finished model, which the full replay must match request by request."""
    full = replay(top, sc, seed, settings, start, entries)
    if reference is not None and _fingerprint(full) != _fingerprint(reference):
        raise RuntimeError(
            f"{sc.name} seed {seed}: the open-loop replay of the logged actions does not reproduce the run "
            "(an action reached the model without being logged)"
        )
    out: list[Verdict] = []
    for i, (t, tier, kind, value, previous) in enumerate(entries):
        if not is_remedy(kind, value, previous):
            continue
        t0, t1 = span_of(top, settings, entries, i)
        slo = top.tier(tier).slo_ttft_p99_s
        cf = replay(top, sc, seed, settings, start, entries, drop=i)
        (m_with, _), (m_without, arrived) = misses(full, tier, slo, t0, t1), misses(cf, tier, slo, t0, t1)
        breached = m_without > P99_MISS_SHARE * arrived
        futile = breached and (m_without - m_with) < RECOVERS_AT_LEAST * m_without
        out.append(Verdict(i, t, tier, kind, value, previous, (t0, t1), m_with, m_without, arrived, futile))
    return out


def counterfactual_cell(verdicts: Sequence[Verdict], seed: int) -> dict[str, object]:
    """The summary's fields for one run: futile remedies by this rule, by kind, and the futile ones listed."""
    by_kind = {"scale_out": 0, "cap_change": 0, "relocation": 0}
    for v in verdicts:
        if v.futile:
            by_kind[v.kind] += 1
    return {
        "counterfactual_futile_actions": sum(by_kind.values()),
        "counterfactual_futile_by_kind": by_kind,
        "counterfactual_remedies_judged": len(verdicts),
        "counterfactual_futile": [{"seed": seed, **v.to_dict()} for v in verdicts if v.futile],
    }
