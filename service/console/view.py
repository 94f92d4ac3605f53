"""The console's view model: one JSON document an operator's page renders, built from plain data.

Pure: the caller (``service.console.feed``) reads the store, the clock and the WAN telemetry and
hands the values in, so every rule here (what is stale, what counts as goodput, how a burn rate is
estimated, which actions wait for an operator) is tested without a server.

Window-level estimates, said where they are shown: the store keeps one P99 per window, not each
request, so *goodput* is the request rate of windows whose diagnosis met the SLO, and the *burn
rate* is the share of recent windows in breach divided by the tier's error budget. Alertmanager's
request-based burn-rate alerts appear beside them in the alert list.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inferslice.actions import JUDGED_OUTCOMES, OUTCOME_INEFFECTIVE
from inferslice.diagnosis import CONFIDENT
from inferslice.snapshot import edge_cap
from inferslice.topology import Tier, Topology, parse_slot

COMPONENTS: tuple[str, ...] = ("queue", "network", "compute", "base")
# Action states in which an operator can still decide; everything else is history.
PENDING_STATES: frozenset[str] = frozenset({"pending", "proposed", "awaiting_approval"})


@dataclass(frozen=True)
class ConsoleSettings:
    stale_after_scrapes: float = 5.0  # five scrape intervals without a window: one slow scrape is not an outage, five are
    history_s: float = 900.0  # 15 min of windows on the charts: a whole demo story, ~450 points per tier at 2 s
    max_points: int = 600  # bound on points per tier sent at first load, whatever the scrape interval
    timeline_actions: int = 60  # the action timeline's length: a shift's worth of decisions at the controller's rate
    poll_interval_s: float = 2.0  # the page polls at the scrape interval: a faster poll would see no new window


@dataclass(frozen=True)
class LinkSample:
    """What the WAN telemetry measured on one PoP pair (either field may be unknown)."""

    rate_bps: float | None = None
    rtt_s: float | None = None


def _edge_cap(snap: Mapping[str, Any]) -> float | None:
    """The snapshot's client-edge cap where it holds below the link's physical rate (an uncapped
    edge reads as none, shown as the tier's configured one)."""
    return edge_cap(_num(snap.get("link_cap_bps")), _num(snap.get("link_capacity_bps")))


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def normalise_attribution(raw: Any) -> dict[str, dict[str, float | None]] | None:
    """``{stat: {queue, network, compute, base, observed, reference}}`` (seconds) from a diagnosis.

    The diagnosis writes ``attribution`` as ``{"ttft_p99": {"observed_s", "reference_s", "queue_s",
    "network_s", "compute_s", "base_s"}, ..., "excess_share": {...}}`` (docs/diagnosis.md); the
    shares are copied, the excess fractions left out (the page shows seconds).
    """
    if not isinstance(raw, Mapping):
        return None
    out: dict[str, dict[str, float | None]] = {}
    for stat, parts in raw.items():
        if stat == "excess_share" or not isinstance(parts, Mapping):
            continue
        values: dict[str, float | None] = {c: max(0.0, _num(parts.get(f"{c}_s")) or 0.0) for c in COMPONENTS}
        values["observed"] = _num(parts.get("observed_s"))
        values["reference"] = _num(parts.get("reference_s"))
        out[str(stat)] = values
    return out or None


def _components(share: Mapping[str, float | None] | None) -> dict[str, float | None] | None:
    """The four seconds a chart stacks (observed and reference stay with the last window's bars)."""
    return {c: share.get(c) for c in COMPONENTS} if share else None


def history_point(snapshot: Mapping[str, Any] | None, diagnosis: Mapping[str, Any], ts: float) -> dict[str, Any]:
    """One window on the charts: latencies, window goodput and the P99 TTFT's attribution."""
    snap = snapshot or {}
    attribution = normalise_attribution(diagnosis.get("attribution"))
    rate = _num(snap.get("request_rate"))
    met = diagnosis.get("slo") in ("met", "at_risk")
    return {
        "ts": ts,
        "ttft_p99_s": _num(snap.get("ttft_p99_s")),
        "tpot_p99_s": _num(snap.get("tpot_p99_s")),
        "request_rate": rate,
        "goodput_rps": (rate if met else 0.0) if rate is not None else None,
        "regime": diagnosis.get("regime"),
        "slo": diagnosis.get("slo"),
        "ttft_attribution": _components(attribution.get("ttft_p99")) if attribution else None,
        "tpot_attribution": _components(attribution.get("tpot_p99")) if attribution else None,
    }


JUDGED: frozenset[str] = frozenset({"met", "at_risk", "breached"})  # windows whose SLO state is known


@dataclass(frozen=True)
class TierHistory:
    """A tier's recent windows, oldest first, with how many were judged and how many breached
    (kept by the caller as windows come and go, so a poll never rescans the history)."""

    points: Sequence[Mapping[str, Any]] = ()
    judged: int = 0
    breached: int = 0

    @classmethod
    def of(cls, points: Sequence[Mapping[str, Any]]) -> TierHistory:
        return cls(points, sum(1 for p in points if p.get("slo") in JUDGED), sum(1 for p in points if p.get("slo") == "breached"))

    def after(self, since_s: float | None) -> list[Mapping[str, Any]]:
        """The windows newer than ``since_s``, found from the newest end (a live update has one or two)."""
        if since_s is None:
            return list(self.points)
        out: list[Mapping[str, Any]] = []
        for p in reversed(self.points):
            if p["ts"] <= since_s:
                break
            out.append(p)
        return out[::-1]


def burn_rate(judged: int, breached: int, attainment_objective: float) -> float | None:
    """Share of judged windows in breach over the error budget: 1.0 spends the budget exactly on time."""
    if judged <= 0:
        return None
    return (breached / judged) / max(1e-9, 1.0 - attainment_objective)


def _evidence(e: Mapping[str, Any]) -> dict[str, Any]:
    """One evidence row with numbers JSON can carry (a threshold may be infinite)."""
    return {**e, **{k: _num(e.get(k)) for k in ("value", "reference", "threshold")}}


def _placement(tier: Tier, replicas: float | None) -> list[dict[str, Any]]:
    """The tier's GPU slots in scale-out order; the first ``replicas`` of them serve."""
    active = tier.replicas_min if replicas is None else round(replicas)
    out = []
    for i, slot in enumerate(tier.placement[: tier.replicas_max]):
        pop, gpu = parse_slot(slot)
        out.append({"slot": slot, "pop": pop, "gpu": gpu, "active": i < active})
    return out


def tier_block(
    tier: Tier,
    snapshot: Mapping[str, Any] | None,
    diagnosis: Mapping[str, Any] | None,
    history: TierHistory,
    now_s: float,
    stale_after_s: float,
) -> dict[str, Any]:
    snap = snapshot or {}
    diag = diagnosis or {}
    last_ts = _num(diag.get("ts"))
    age = None if last_ts is None else max(0.0, now_s - last_ts)
    replicas = _num(snap.get("replicas"))
    cap = _edge_cap(snap)
    last = history.points[-1] if history.points else None
    return {
        "name": tier.name,
        "title": tier.label,
        "priority": tier.priority,
        "slo_ttft_p99_s": _num(snap.get("slo_ttft_p99_s")) or tier.slo_ttft_p99_s,
        "slo_tpot_p99_s": _num(snap.get("slo_tpot_p99_s")) or tier.slo_tpot_p99_s,
        "attainment_objective": tier.attainment_objective,
        "replicas": replicas,
        "replicas_max": tier.replicas_max,
        "gpu_quota": tier.gpu_quota,
        "placement": _placement(tier, replicas),
        "client_edge": {
            "cap_bps": cap if cap is not None else tier.client_cap_bps,
            "rate_bps": _num(snap.get("link_rx_bps")),
            "tx_bps": _num(snap.get("link_tx_bps")),
            "capacity_bps": _num(snap.get("link_capacity_bps")),
        },
        "ttft_p99_s": _num(snap.get("ttft_p99_s")),
        "tpot_p99_s": _num(snap.get("tpot_p99_s")),
        "requests_waiting": _num(snap.get("requests_waiting")),
        "goodput_rps": last.get("goodput_rps") if last else None,
        "burn_rate": burn_rate(history.judged, history.breached, tier.attainment_objective),
        "diagnosis": None
        if not diag
        else {
            "regime": diag.get("regime"),
            "secondary": list(diag.get("secondary") or []),
            "confidence": _num(diag.get("confidence")),
            "confident": (_num(diag.get("confidence")) or 0.0) >= CONFIDENT,
            "request_count": _num(diag.get("request_count")) if diag.get("request_count") is not None else _num(snap.get("request_count")),
            "network_cause": diag.get("network_cause"),
            "slo": diag.get("slo"),
            "evidence": [_evidence(e) for e in diag.get("evidence") or [] if isinstance(e, Mapping)],
            "missing": list(diag.get("missing") or []),
            "attribution": normalise_attribution(diag.get("attribution")),
        },
        "last_window_s": last_ts,
        "age_s": age,
        "stale": age is None or age > stale_after_s,
    }


def topology_block(
    topology: Topology, snapshots: Mapping[str, Mapping[str, Any] | None], links: Mapping[frozenset[str], LinkSample]
) -> dict[str, Any]:
    out_links = []
    for link in topology.links:
        sample = links.get(frozenset((link.a, link.b)), LinkSample())
        capacity = link.capacity_bps
        util = sample.rate_bps / capacity if sample.rate_bps is not None and capacity else None
        out_links.append(
            {
                "a": link.a,
                "b": link.b,
                "rtt_s": link.rtt_s,
                "measured_rtt_s": sample.rtt_s,
                "latency_tier": link.latency_tier.value,
                "rate_bps": sample.rate_bps,
                "capacity_bps": capacity,
                "utilisation": util,
            }
        )
    edges = []
    for tier in topology.tiers:
        snap = snapshots.get(tier.name) or {}
        cap = _edge_cap(snap)
        edges.append(
            {
                "tier": tier.name,
                "cap_bps": cap if cap is not None else tier.client_cap_bps,
                "rate_bps": _num(snap.get("link_rx_bps")),
            }
        )
    return {
        "name": topology.name,
        "client": {"name": topology.client.name, "gateway": topology.client.gateway, "rtt_s": topology.client.rtt_ms / 1000.0},
        "pops": [{"name": p.name, "gpus": p.gpus, "gpu_model": p.gpu_model} for p in topology.pops],
        "links": out_links,
        "client_edges": edges,
    }


def action_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """One action as the page reads it, flat: the controller's audit rows nest the ``Action`` under
    ``action`` and name the tier ``tier``; the older store rows are flat already."""
    inner = row.get("action")
    item: dict[str, Any] = {**(inner if isinstance(inner, Mapping) else {}), **{k: v for k, v in row.items() if k != "action"}}
    item["slice"] = item.get("slice") or row.get("tier")
    diagnosis = row.get("diagnosis")
    attribution = diagnosis.get("attribution") if isinstance(diagnosis, Mapping) else None
    share = attribution.get("excess_share") if isinstance(attribution, Mapping) else None
    item["diagnosis"] = None  # the whole verdict is too heavy to poll; its excess shares say why
    item["cause_share"] = {k: _num(v) for k, v in share.items()} if isinstance(share, Mapping) else None
    return item


def action_state(action: Mapping[str, Any]) -> str:
    return str(action.get("state") or action.get("outcome") or "unknown")


def verdict(action: Mapping[str, Any]) -> str | None:
    """The outcome check's verdict on the action, as such (``inferslice.actions.JUDGED_OUTCOMES``), or None
    while it is not judged. ``futile`` is what trails written before the outcome names changed call ineffective."""
    measured = action.get("measured")
    for v in (action.get("outcome"), action.get("state")):
        if v in JUDGED_OUTCOMES:
            return str(v)
        if v == "futile":
            return OUTCOME_INEFFECTIVE
    if action.get("futile") or (isinstance(measured, Mapping) and measured.get("futile")):
        return OUTCOME_INEFFECTIVE
    return None


def controller_block(actions: Iterable[Mapping[str, Any]], alerts: Iterable[Mapping[str, Any]], now_s: float, limit: int) -> dict[str, Any]:
    """Pending actions (an operator can decide), the timeline (newest first), the alerts firing now."""
    pending: list[dict[str, Any]] = []
    timeline: list[dict[str, Any]] = []
    for row in actions:
        a = action_row(row)
        item = {**a, "state": action_state(a), "verdict": verdict(a)}
        if item["state"] in PENDING_STATES and item.get("id"):
            pending.append(item)
        if len(timeline) < limit:
            timeline.append(item)
    active = [
        dict(al)
        for al in alerts
        if al.get("status") == "firing" and (_num(al.get("ends_at_s")) is None or (_num(al.get("ends_at_s")) or 0.0) > now_s)
    ]
    return {"pending": pending, "timeline": timeline, "alerts": active}


def console_state(
    topology: Topology,
    snapshots: Mapping[str, Mapping[str, Any] | None],
    diagnoses: Mapping[str, Mapping[str, Any] | None],
    history: Mapping[str, TierHistory],
    controller: Mapping[str, Any],
    links: Mapping[frozenset[str], LinkSample],
    sources: Sequence[Mapping[str, Any]],
    now_s: float,
    since_s: float | None,
    settings: ConsoleSettings,
) -> dict[str, Any]:
    """The whole page's data; ``history`` holds only windows after ``since_s`` (what the page lacks)."""
    stale_after = settings.stale_after_scrapes * topology.timing.scrape_interval_s
    tiers = []
    for tier in topology.tiers:
        windows = history.get(tier.name, TierHistory())
        block = tier_block(tier, snapshots.get(tier.name), diagnoses.get(tier.name), windows, now_s, stale_after)
        block["history"] = windows.after(since_s)
        tiers.append(block)
    return {
        "now_s": now_s,
        "since_s": since_s,
        "poll_interval_s": settings.poll_interval_s,
        "stale_after_s": stale_after,
        "history_s": settings.history_s,
        "topology": topology_block(topology, snapshots, links),
        "tiers": tiers,
        "controller": dict(controller),
        "sources": [dict(s) for s in sources],
    }
