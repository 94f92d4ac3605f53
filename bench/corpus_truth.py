"""Truth by paired counterfactual (pure): what each injected cause did to each window.

Every run of a seed is repeated with one cause removed (``corpus_draws.twins``), and once with all
removed (the clean twin). The runs share the seed: the same arrival schedules, the same request
lengths (the load generator's schedule is a function of its seed), the same draws. A window is one
(run, tier, time): ``[t0 + k W, t0 + (k + 1) W)`` from the start of the load, the same in every twin.

Per window and statistic (P99 TTFT, over the requests whose first token fell in the window; P99
TPOT, over those that finished in it), computed from the load generator's own request records:

- the **excess** is the window's statistic over the tier's reference (the clean twin's P99 of that
  statistic over all its windows: the tier's unconstrained tail under this very workload), when it
  is *material*: at least ``MATERIAL_FLOOR_S`` above the reference and either ``MATERIAL_RATIO`` x it
  or (P99 TTFT) over the tier's SLO while the reference is under it. An immaterial excess is none:
  the window is healthy;
- a cause **removes** the statistic's drop from this run to the twin without it (same window), when
  that drop is itself at least ``MATERIAL_FLOOR_S`` (a smaller one is the twins' noise); a twin with no
  request in the window (and none failed) has no excess there, so the cause removes all of it;
- its **share** is what it removes over the excess (clipped to 0-1), and it is **in the truth set**
  when its share of a material excess is at least ``TRUTH_SHARE`` (25 %) on either statistic.

A window whose excess no injected cause explains is not made healthy: ``unexplained`` says how much
of it the clean twin shows too, and ``clean_breach`` that the clean twin itself breached (the
machine was loaded, or the workload queued on its own): the truth says so rather than hiding it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from inferslice.diagnosis import Regime

STATS = ("ttft", "tpot")
TRUTH_SHARE = 0.25  # issue 17: a cause is in the truth set when removing it removes >= 25 % of the excess
MATERIAL_RATIO = 1.5  # a tail 1.5x its reference is visibly worse (the SLO is judged on P99 TTFT alone)
MATERIAL_FLOOR_S = {"ttft": 0.05, "tpot": 0.005}  # and by more than noise: 50 ms of TTFT, 5 ms per token
QUANTILE = 99.0
# Bump when a rule below changes what a window's truth is (lines carry it as ``truth_version``; v1 is a
# line without it). v2: a twin that measured no request in the window removes the whole excess.
TRUTH_VERSION = 2
PRIORITY = ("network", "compute", "queue")  # a compound truth's primary: the remedy that comes first
REGIME = {"network": Regime.NETWORK_LIMITED.value, "compute": Regime.COMPUTE_LIMITED.value, "queue": Regime.QUEUE_LIMITED.value}


@dataclass(frozen=True)
class Request:
    """What truth needs of one request record (the load generator's ``RequestRecord``)."""

    start_s: float
    ttft_s: float | None
    e2e_s: float | None
    output_tokens: int
    success: bool

    @property
    def tpot_s(self) -> float | None:
        if self.ttft_s is None or self.e2e_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    @classmethod
    def from_record(cls, r: Mapping[str, Any]) -> Request:
        return cls(float(r["start_s"]), r.get("ttft_s"), r.get("e2e_s"), int(r.get("output_tokens") or 0), bool(r.get("success")))


@dataclass(frozen=True)
class WindowStat:
    p99_ttft_s: float | None
    p99_tpot_s: float | None
    ttft_requests: int  # requests whose first token arrived in the window
    tpot_requests: int  # requests that finished in it
    failed: int  # requests that failed in it (timeouts, errors)

    def get(self, stat: str) -> float | None:
        return self.p99_ttft_s if stat == "ttft" else self.p99_tpot_s

    def requests(self, stat: str) -> int:
        return self.ttft_requests if stat == "ttft" else self.tpot_requests


def _p99(values: Sequence[float]) -> float | None:
    return float(np.percentile(values, QUANTILE)) if values else None


def window_stats(requests: Iterable[Request], t0: float, window_s: float, n_windows: int) -> list[WindowStat]:
    """Per-window P99s from request records (windows from the load start ``t0``)."""
    ttft: list[list[float]] = [[] for _ in range(n_windows)]
    tpot: list[list[float]] = [[] for _ in range(n_windows)]
    failed = [0] * n_windows
    for r in requests:
        if not r.success:
            k = int((r.start_s + (r.e2e_s or 0.0) - t0) // window_s)
            if 0 <= k < n_windows:
                failed[k] += 1
            continue
        if r.ttft_s is not None:
            k = int((r.start_s + r.ttft_s - t0) // window_s)
            if 0 <= k < n_windows:
                ttft[k].append(r.ttft_s)
        tp = r.tpot_s
        if tp is not None and r.e2e_s is not None:
            k = int((r.start_s + r.e2e_s - t0) // window_s)
            if 0 <= k < n_windows:
                tpot[k].append(tp)
    return [WindowStat(_p99(ttft[k]), _p99(tpot[k]), len(ttft[k]), len(tpot[k]), failed[k]) for k in range(n_windows)]


def reference(stats: Sequence[WindowStat], requests: Iterable[Request], t0: float, skip_s: float) -> dict[str, float | None]:
    """The tier's reference tails: P99 TTFT and TPOT over every request of the clean twin after ``skip_s`` (the ramp)."""
    rs = [r for r in requests if r.success and r.start_s - t0 >= skip_s]
    ttft = [r.ttft_s for r in rs if r.ttft_s is not None]
    tpot = [tp for r in rs if (tp := r.tpot_s) is not None]
    return {"ttft": _p99(ttft), "tpot": _p99(tpot)}


def material(stat: str, value: float | None, ref: float | None, slo_ttft_s: float | None) -> bool:
    """Whether a window's statistic is materially over the reference (see the module docstring)."""
    if value is None:
        return False
    if ref is None:  # no clean reference: only an SLO breach is visible
        return stat == "ttft" and slo_ttft_s is not None and value > slo_ttft_s
    if value - ref < MATERIAL_FLOOR_S[stat]:
        return False
    breach = stat == "ttft" and slo_ttft_s is not None and value > slo_ttft_s and ref <= slo_ttft_s
    return breach or value >= MATERIAL_RATIO * ref


def breached(stat: str, value: float | None, ref: float | None, slo_ttft_s: float | None) -> bool:
    """The clean twin's window is itself bad: over the SLO, or materially over the reference."""
    if stat == "ttft" and value is not None and slo_ttft_s is not None and value > slo_ttft_s:
        return True
    return material(stat, value, ref, slo_ttft_s)


@dataclass(frozen=True)
class CauseEffect:
    name: str
    kind: str
    cls: str
    tier: str  # the tier the cause was applied to (a WAN cause may act on others too)
    removed_s: dict[str, float | None]  # per statistic: this run's value minus the twin's without it
    share: dict[str, float | None]  # per material statistic: removed / excess, clipped to 0-1
    in_truth: bool


@dataclass(frozen=True)
class Truth:
    causes: tuple[str, ...]  # classes in the truth set, sorted ("network", "queue")
    kinds: tuple[str, ...]  # their cause kinds ("cap", "load")
    shares: dict[str, float]  # class -> its share of the excess (the largest over material statistics)
    excess_s: dict[str, float | None]  # per statistic: window - reference when material, else None
    material: dict[str, bool]
    effects: tuple[CauseEffect, ...] = field(default=())  # every cause of the run, in truth or not
    unexplained: dict[str, float | None] = field(default_factory=dict)  # clean twin's own excess / the window's
    clean_breach: bool = False  # the clean twin's same window breached the SLO or had a material excess
    reference_s: dict[str, float | None] = field(default_factory=dict)

    @property
    def healthy(self) -> bool:
        return not self.causes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge(
    window: WindowStat,
    without: Mapping[str, WindowStat | None],
    clean: WindowStat,
    ref: Mapping[str, float | None],
    causes: Sequence[tuple[str, str, str, str]],
    slo_ttft_s: float | None,
) -> Truth:
    """The truth of one window: ``without[name]`` is the same window of the twin without cause
    ``name``; ``causes`` are the run's ``(name, kind, class, tier)``."""
    is_material = {s: material(s, window.get(s), ref.get(s), slo_ttft_s) for s in STATS}
    excess: dict[str, float | None] = {}
    for s in STATS:
        v, r = window.get(s), ref.get(s)
        excess[s] = max(0.0, v - (r or 0.0)) if is_material[s] and v is not None else None
    effects: list[CauseEffect] = []
    for name, kind, cls, tier in causes:
        twin = without.get(name)
        removed: dict[str, float | None] = {}
        share: dict[str, float | None] = {}
        for s in STATS:
            v, tv = window.get(s), (twin.get(s) if twin is not None else None)
            if v is not None and tv is None and twin is not None and twin.requests(s) == 0 and twin.failed == 0:
                # The twin measured no request in this window and lost none: the statistic is a P99 over
                # the requests whose first token (TTFT) or end (TPOT) fell in the window, and the twin's
                # has none, so the twin's window shows no excess; removing the cause removes all of this
                # one's (truth v2; v1 left the cause out, and a window 27 s over its reference read
                # healthy). Its requests came from the cause (a load step's arrivals) or were moved into
                # the window by it (first tokens a cap held back). A twin whose own remaining cause holds
                # requests past the window still shows them in the window they land in, which is that
                # window's excess, not this one's: the truth is per window, as the SLO is judged.
                tv = ref.get(s) or 0.0
            removed[s] = None if v is None or tv is None else v - tv
            e = excess[s]
            rm = removed[s]
            if e is None or rm is None or e <= 0:
                share[s] = None
            else:
                share[s] = min(1.0, max(0.0, rm / e)) if rm >= MATERIAL_FLOOR_S[s] else 0.0
        in_truth = any(x is not None and x >= TRUTH_SHARE for x in share.values())
        effects.append(CauseEffect(name, kind, cls, tier, removed, share, in_truth))
    classes: dict[str, float] = {}
    kinds: set[str] = set()
    for eff in effects:
        if eff.in_truth:
            best = max(x for x in eff.share.values() if x is not None)
            classes[eff.cls] = max(classes.get(eff.cls, 0.0), best)
            kinds.add(eff.kind)
    unexplained: dict[str, float | None] = {}
    for s in STATS:
        cv, r, e = clean.get(s), ref.get(s), excess[s]
        unexplained[s] = None if e is None or e <= 0 or cv is None else min(1.0, max(0.0, (cv - (r or 0.0)) / e))
    clean_breach = any(breached(s, clean.get(s), ref.get(s), slo_ttft_s) for s in STATS)
    return Truth(
        causes=tuple(sorted(classes)),
        kinds=tuple(sorted(kinds)),
        shares={k: round(v, 4) for k, v in sorted(classes.items())},
        excess_s=excess,
        material=is_material,
        effects=tuple(effects),
        unexplained=unexplained,
        clean_breach=clean_breach,
        reference_s=dict(ref),
    )


def primary_regime(classes: Sequence[str]) -> str:
    """The regime a truth set names first: the class whose remedy comes first (network, compute, queue)."""
    return next((REGIME[c] for c in PRIORITY if c in classes), Regime.HEALTHY.value)


def finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x
