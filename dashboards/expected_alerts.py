"""What every generated alert must look like when it fires: labels, rendered annotations and holds.

This is the oracle of the promtool unit tests (``ruletests``). It is written from the tiers file (a
tier's name, SLO, objective and priority) and the alerting conventions the project follows (the SRE
workbook's multi-window burn rates; the severity policy below), and it never reads the generated
rules (``rules``): a wrong label, annotation text or ``for:`` hold in the rules fails the tests instead
of being copied into their expectations.

Severity policy, as the platform's operators are promised it:
- P99 TTFT above the SLO: an objective >= 0.999 pages after 2 min; >= 0.99 opens a ticket after 5 min
  and pages after 15 min; looser tiers open a ticket after 10 min.
- Error-budget burn (30-day objective): page at 14.4x over 1h and 5m or 6x over 6h and 30m; ticket at
  3x over 1d and 2h or 1x over 3d and 6h; no hold (the short window already confirms).
- A binding regime: ticket after 1 min. A link above 90 % of its cap: ticket after 5 min. A source,
  scrape target or replica target down: ticket after 2 min.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inferslice.topology import Tier

PAGE = "page"
TICKET = "ticket"

REGIME_HOLD_MIN = 1  # the classifier debounces episodes already; one minute more filters flapping
LINK_HOLD_MIN = 5  # longer than a load step, shorter than an incident
LINK_NEAR_CAP_SHARE = 0.9  # "near its cap": above 90 % of the configured rate
DOWN_HOLD_MIN = 2  # one missed exporter restart is tolerated


@dataclass(frozen=True)
class BurnWindow:
    """One multi-window condition of the SRE workbook: both windows above ``factor`` x the budget rate."""

    severity: str
    factor: float
    long_window: str
    short_window: str


# SRE workbook, chapter 5 (also Sloth and Pyrra's defaults), for a 30-day objective.
SRE_BURN_WINDOWS: tuple[BurnWindow, ...] = (
    BurnWindow(PAGE, 14.4, "1h", "5m"),
    BurnWindow(PAGE, 6.0, "6h", "30m"),
    BurnWindow(TICKET, 3.0, "1d", "2h"),
    BurnWindow(TICKET, 1.0, "3d", "6h"),
)

# The remedy each binding regime's alert names: the cause decides the cure.
REMEDY: dict[str, str] = {
    "queue_limited": "add replicas (up to the ceiling) or tighten admission; replicas cure queueing",
    "network_limited": "raise the tier's bandwidth cap or move replicas nearer its clients; replicas will not help",
    "compute_limited": "give the replicas a larger GPU share or move them to a less shared GPU",
}


def ttft_ladder(tier: Tier) -> tuple[tuple[str, int], ...]:
    """(severity, hold in minutes) of each stage of the P99 TTFT alert, from the tier's objective."""
    if tier.attainment_objective >= 0.999:
        return ((PAGE, 2),)
    if tier.attainment_objective >= 0.99:
        return ((TICKET, 5), (PAGE, 15))
    return ((TICKET, 10),)


def _alert(labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    return {"exp_labels": labels, "exp_annotations": annotations}


def _tier_labels(tier: Tier, severity: str) -> dict[str, str]:
    return {"slice": tier.name, "severity": severity, "priority": str(tier.priority)}


def _links(tier: Tier, api_url: str) -> dict[str, str]:
    return {"diagnosis_url": f"{api_url.rstrip('/')}/v1/slices/{tier.name}", "dashboard": f"/d/inferslice-tier-{tier.name}"}


def ttft_alert(tier: Tier, severity: str, hold_min: int, api_url: str) -> dict[str, Any]:
    return _alert(
        _tier_labels(tier, severity),
        {
            "summary": f"P99 TTFT of {tier.name} above its {tier.slo_ttft_p99_s:g} s SLO for {hold_min}m",
            "description": "Engine-side or client-perceived P99 TTFT (5m) exceeds the SLO; see the diagnosis for the cause.",
            **_links(tier, api_url),
        },
    )


def burn_alert(tier: Tier, severity: str, api_url: str) -> dict[str, Any]:
    windows = ", ".join(f"{w.factor:g}x over {w.long_window}/{w.short_window}" for w in SRE_BURN_WINDOWS if w.severity == severity)
    return _alert(
        _tier_labels(tier, severity),
        {
            "summary": f"{tier.name} burns its {tier.attainment_objective:g} TTFT objective too fast ({windows})",
            "description": "Requests missing the TTFT SLO burn the 30-day budget faster than the multi-window thresholds allow.",
            **_links(tier, api_url),
        },
    )


def regime_alert(tier: Tier, regime: str, api_url: str) -> dict[str, Any]:
    links = _links(tier, api_url)
    return _alert(
        {**_tier_labels(tier, TICKET), "regime": regime},
        {
            "summary": f"{tier.name} is {regime}",
            "diagnosis": regime,
            "evidence": f"{links['diagnosis_url']} (diagnosis.evidence); panels: {links['dashboard']}",
            "remedy": REMEDY[regime],
            "attribution": "no attribution exported",  # the rule tests' series carry no attribution gauge
            **links,
        },
    )


def link_alert(tier: Tier, pop: str, link: str, direction: str, api_url: str) -> dict[str, Any]:
    return _alert(
        {**_tier_labels(tier, TICKET), "pop": pop, "link": link, "direction": direction},
        {
            "summary": f"{tier.name} link {link} at {pop} runs near its {direction} cap",
            "description": "Utilisation alone is not a bottleneck: check P99 TPOT and the diagnosed regime before raising the cap.",
            **_links(tier, api_url),
        },
    )


def replica_down_alert(tier: Tier, pop: str, replica: str, target: str) -> dict[str, Any]:
    return _alert(
        {**_tier_labels(tier, TICKET), "pop": pop, "replica": replica, "target": target},
        {
            "summary": f"{tier.name} replica {replica} ({target}) at {pop} is not answering",
            "dashboard": f"/d/inferslice-tier-{tier.name}",
        },
    )


def source_down_alert(source: str) -> dict[str, Any]:
    return _alert(
        {"source": source, "severity": TICKET},
        {
            "summary": f"exporter source {source} is down",
            "description": f"The exporter serves but cannot read {source}; the panels and the diagnosis fed by it go stale.",
        },
    )


def target_down_alert(job: str, instance: str) -> dict[str, Any]:
    return _alert(
        {"job": job, "instance": instance, "severity": TICKET},
        {"summary": f"scrape target {job}/{instance} is down", "description": f"Prometheus cannot scrape {instance} (job {job})."},
    )
