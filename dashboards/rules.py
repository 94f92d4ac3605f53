"""Prometheus recording and alerting rules generated from the tiers file.

Shared groups hold what is the same for every tier (latency quantiles, SLI ratios, link
utilisation, source health); one group per tier holds its burn rates (they need the tier's
objective) and its alerts, so adding a tier to the file adds its group.

Severity policy (documented in the rules' labels and the module, mirrored by Alertmanager routes):
- P99 TTFT above the SLO: objective >= 0.999 pages after 2 m; objective >= 0.99 opens a ticket
  after 5 m and escalates to a page after 15 m (Alertmanager inhibits the ticket while the page
  fires); looser tiers (best effort, Free 0.95) only open a ticket after 10 m.
- Error-budget burn (every tier): page at 14.4x over 1h and 5m or 6x over 6h and 30m; ticket at
  3x over 1d and 2h or 1x over 3d and 6h (SRE workbook, 30-day objective).
- A binding regime is a cause, not a symptom: ticket, so the symptom alerts decide who is woken.
- Link near its cap: ticket (utilisation alone does not make a bottleneck, the brief says).
- Sources and scrape targets down: ticket.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from inferslice import metric_names as m
from inferslice.collectors import recorded
from inferslice.common.promtime import parse_duration
from inferslice.dashboards import queries as q
from inferslice.topology import Tier, Topology

SEVERITY_PAGE = "page"
SEVERITY_TICKET = "ticket"

ALERT_TTFT = "InferSliceTTFTAboveSLO"
ALERT_BURN = "InferSliceErrorBudgetBurn"
ALERT_REGIME = "InferSliceBindingRegime"
ALERT_SOURCE_DOWN = "InferSliceSourceDown"
ALERT_TARGET_DOWN = "InferSliceScrapeTargetDown"
ALERT_REPLICA_DOWN = "InferSliceReplicaTargetDown"
ALERT_LINK_NEAR_CAP = "InferSliceLinkNearCap"

LINK_NEAR_CAP_RATIO = 0.9  # above this share of the cap for LINK_NEAR_CAP_FOR the link is close to binding
LINK_NEAR_CAP_FOR = "5m"  # longer than a load step of the demo (20-30 s), shorter than an incident
REGIME_FOR = "1m"  # the classifier already debounces episodes; one more minute filters flapping
SOURCE_DOWN_FOR = "2m"  # tolerates one missed exporter restart at the testbed's 2 s scrape interval

# What to do about each binding regime: the brief's lesson that the remedy follows the cause.
REGIME_REMEDY: dict[str, str] = {
    "queue_limited": "add replicas (up to the ceiling) or tighten admission; replicas cure queueing",
    "network_limited": "raise the tier's bandwidth cap or move replicas nearer its clients; replicas will not help",
    "compute_limited": "give the replicas a larger GPU share or move them to a less shared GPU",
}


@dataclass(frozen=True)
class BurnAlert:
    """One multi-window multi-burn-rate condition: both windows above ``factor`` x the budget rate."""

    severity: str
    factor: float
    long_window: str
    short_window: str


BURN_ALERTS: tuple[BurnAlert, ...] = (
    BurnAlert(SEVERITY_PAGE, 14.4, "1h", "5m"),
    BurnAlert(SEVERITY_PAGE, 6.0, "6h", "30m"),
    BurnAlert(SEVERITY_TICKET, 3.0, "1d", "2h"),
    BurnAlert(SEVERITY_TICKET, 1.0, "3d", "6h"),
)


@dataclass(frozen=True)
class TtftStage:
    severity: str
    for_: str


# Where the P99 TTFT goes in the latest window (the API's attribution gauge), per resource; rendered
# when the alert fires, so the page says how much of the latency each cause explains.
ATTRIBUTION_TEMPLATE = (
    f'{{{{ with query (printf `max by (resource) ({m.LATENCY_ATTRIBUTION}{{slice="%s",stat="ttft_p99"}})` $labels.slice) }}}}'
    'P99 TTFT: {{ range . }}{{ .Labels.resource }} {{ printf "%.3g" .Value }} s; {{ end }}'
    "{{ else }}no attribution exported{{ end }}"
)


def ttft_stages(tier: Tier) -> tuple[TtftStage, ...]:
    """Severity ladder of the P99 TTFT alert for a tier, from its attainment objective."""
    if tier.attainment_objective >= 0.999:
        return (TtftStage(SEVERITY_PAGE, "2m"),)
    if tier.attainment_objective >= 0.99:
        return (TtftStage(SEVERITY_TICKET, "5m"), TtftStage(SEVERITY_PAGE, "15m"))
    return (TtftStage(SEVERITY_TICKET, "10m"),)


def dashboard_uid_for_tier(tier: str) -> str:
    return f"inferslice-tier-{tier}"


def _record(name: str, expr: str, **labels: str) -> dict[str, Any]:
    rule: dict[str, Any] = {"record": name, "expr": expr}
    if labels:
        rule["labels"] = labels
    return rule


def latency_rules() -> dict[str, Any]:
    rules = []
    for sources, namer in ((q.TTFT_SOURCES, q.rec_ttft_quantile), (q.TPOT_SOURCES, q.rec_tpot_quantile)):
        for window in q.QUANTILE_WINDOWS:
            for quant in q.QUANTILES:
                for src in sources:
                    rules.append(_record(namer(quant, window), q.quantile(quant, src.histogram, "", window), vantage=src.vantage))
    return {"name": "inferslice-latency", "rules": rules}


def sli_rules() -> dict[str, Any]:
    rules = []
    for window in q.BURN_WINDOWS:
        rules.append(_record(q.rec_attainment(window), q.attainment("", window)))
        rules.append(_record(q.rec_error_ratio(window), f"1 - {q.rec_attainment(window)}"))
    return {"name": "inferslice-slo-sli", "rules": rules}


def network_rules() -> dict[str, Any]:
    rules = [_record(q.REC_LINK_UTILISATION, q.link_utilisation(d, "1m"), direction=d) for d in ("receive", "transmit")]
    return {"name": "inferslice-network", "rules": rules}


def platform_rules() -> dict[str, Any]:
    rules = [
        {
            "alert": ALERT_SOURCE_DOWN,
            "expr": f"{m.SOURCE_UP} == 0",
            "for": SOURCE_DOWN_FOR,
            "labels": {"severity": SEVERITY_TICKET},
            "annotations": {
                "summary": "exporter source {{ $labels.source }} is down",
                "description": "The exporter serves but cannot read {{ $labels.source }}; the panels and the diagnosis fed by it go stale.",
            },
        },
        {
            "alert": ALERT_TARGET_DOWN,
            "expr": "up == 0",
            "for": SOURCE_DOWN_FOR,
            "labels": {"severity": SEVERITY_TICKET},
            "annotations": {
                "summary": "scrape target {{ $labels.job }}/{{ $labels.instance }} is down",
                "description": "Prometheus cannot scrape {{ $labels.instance }} (job {{ $labels.job }}).",
            },
        },
    ]
    return {"name": "inferslice-platform", "rules": rules}


def _tier_labels(tier: Tier, severity: str) -> dict[str, str]:
    return {"severity": severity, "priority": str(tier.priority)}


def tier_group(tier: Tier, api_url: str) -> dict[str, Any]:
    """Burn-rate recordings and every alert of one tier."""
    s = q.sel(slice=tier.name)
    api = api_url.rstrip("/")
    dash = f"/d/{dashboard_uid_for_tier(tier.name)}"
    rules: list[dict[str, Any]] = [
        # The static slice label keeps promtool's duplicate-rule lint quiet: same name, one series per tier.
        _record(q.rec_burn_rate(w), f"{q.rec_error_ratio(w)}{{{s}}} / {q.budget(tier.attainment_objective)}", slice=tier.name)
        for w in q.BURN_WINDOWS
    ]
    ttft = f"max by (slice) ({q.rec_ttft_quantile(0.99, '5m')}{{{s}}}) > {tier.slo_ttft_p99_s:g}"
    for stage in ttft_stages(tier):
        rules.append(
            {
                "alert": ALERT_TTFT,
                "expr": ttft,
                "for": stage.for_,
                "labels": _tier_labels(tier, stage.severity),
                "annotations": {
                    "summary": f"P99 TTFT of {{{{ $labels.slice }}}} above its {tier.slo_ttft_p99_s:g} s SLO for {stage.for_}",
                    "description": "Engine-side or client-perceived P99 TTFT (5m) exceeds the SLO; see the diagnosis for the cause.",
                    "diagnosis_url": f"{api}/v1/slices/{{{{ $labels.slice }}}}",
                    "dashboard": dash,
                },
            }
        )
    for severity in (SEVERITY_PAGE, SEVERITY_TICKET):
        conds = [
            f"({q.rec_burn_rate(b.long_window)}{{{s}}} > {b.factor:g} and {q.rec_burn_rate(b.short_window)}{{{s}}} > {b.factor:g})"
            for b in BURN_ALERTS
            if b.severity == severity
        ]
        windows = ", ".join(f"{b.factor:g}x over {b.long_window}/{b.short_window}" for b in BURN_ALERTS if b.severity == severity)
        rules.append(
            {
                "alert": ALERT_BURN,
                "expr": " or ".join(conds),
                # Both windows must agree, so no extra hold: the short window already filters blips.
                "labels": _tier_labels(tier, severity),
                "annotations": {
                    "summary": f"{{{{ $labels.slice }}}} burns its {tier.attainment_objective:g} TTFT objective too fast ({windows})",
                    "description": "Requests missing the TTFT SLO burn the 30-day budget faster than the multi-window thresholds allow.",
                    "diagnosis_url": f"{api}/v1/slices/{{{{ $labels.slice }}}}",
                    "dashboard": dash,
                },
            }
        )
    remedy = "".join(
        f'{{{{ {"if" if i == 0 else "else if"} eq $labels.regime "{regime}" }}}}{text}'
        for i, (regime, text) in enumerate(REGIME_REMEDY.items())
    )
    rules.append(
        {
            "alert": ALERT_REGIME,
            "expr": f"{q.regime_active(q.sel(slice=tier.name, regime='~' + '|'.join(q.BINDING_REGIMES)))}",
            "for": REGIME_FOR,
            "labels": _tier_labels(tier, SEVERITY_TICKET),
            "annotations": {
                "summary": "{{ $labels.slice }} is {{ $labels.regime }}",
                "diagnosis": "{{ $labels.regime }}",
                "evidence": f"{api}/v1/slices/{{{{ $labels.slice }}}} (diagnosis.evidence); panels: {dash}",
                "diagnosis_url": f"{api}/v1/slices/{{{{ $labels.slice }}}}",
                "remedy": remedy + "{{ end }}",
                "attribution": ATTRIBUTION_TEMPLATE,
                "dashboard": dash,
            },
        }
    )
    rules.append(
        {
            "alert": ALERT_LINK_NEAR_CAP,
            "expr": f"{q.REC_LINK_UTILISATION}{{{s}}} > {LINK_NEAR_CAP_RATIO:g}",
            "for": LINK_NEAR_CAP_FOR,
            "labels": _tier_labels(tier, SEVERITY_TICKET),
            "annotations": {
                "summary": "{{ $labels.slice }} link {{ $labels.link }} at {{ $labels.pop }} runs near its {{ $labels.direction }} cap",
                "description": "Utilisation alone is not a bottleneck: check P99 TPOT and the diagnosed regime before raising the cap.",
                "diagnosis_url": f"{api}/v1/slices/{{{{ $labels.slice }}}}",
                "dashboard": dash,
            },
        }
    )
    rules.append(
        {
            "alert": ALERT_REPLICA_DOWN,
            "expr": f"{m.TARGET_UP}{{{s}}} == 0",
            "for": SOURCE_DOWN_FOR,
            "labels": _tier_labels(tier, SEVERITY_TICKET),
            "annotations": {
                "summary": "{{ $labels.slice }} replica {{ $labels.replica }} ({{ $labels.target }}) at {{ $labels.pop }} is not answering",
                "dashboard": dash,
            },
        }
    )
    return {"name": f"inferslice-tier-{tier.name}", "rules": rules}


def snapshot_rules(topology: Topology) -> dict[str, Any]:
    """The diagnosis loop's terms (``collectors.recorded``): evaluated every scrape interval over the
    loop's window of four scrapes, so a round reads three families instead of scanning raw series."""
    interval = topology.timing.scrape_interval_s
    return recorded.snapshot_rule_group(recorded.DEFAULT_WINDOW_SCRAPES * interval, interval)


def rule_groups(topology: Topology, api_url: str) -> list[dict[str, Any]]:
    # The snapshot group last: nothing else reads it, and the groups before it keep their places.
    shared = [latency_rules(), sli_rules(), network_rules(), platform_rules()]
    return [*shared, *(tier_group(t, api_url) for t in topology.tiers), snapshot_rules(topology)]


def rule_file(topology: Topology, api_url: str, hold_scale: float = 1.0) -> dict[str, Any]:
    """A Prometheus rule file (``rule_files:``) holding every group.

    ``hold_scale`` multiplies every alert's ``for:`` (integration tests use ~0.01 so a 10 m hold
    becomes 6 s); evaluation windows and annotation texts keep their production values."""
    return scale_holds({"groups": rule_groups(topology, api_url)}, hold_scale)


def scaled_duration(text: str, factor: float) -> str:
    """``text`` times ``factor`` as whole seconds, never below 1 s (a hold of 0 would change the alert's meaning)."""
    return f"{max(1, round(parse_duration(text) * factor))}s"


def scale_holds(rules: dict[str, Any], factor: float) -> dict[str, Any]:
    """A copy of a rule file whose alerts' ``for:`` are multiplied by ``factor`` (1.0: unchanged, same object)."""
    if factor == 1.0:
        return rules
    if not factor > 0:
        raise ValueError("hold_scale must be > 0")
    out = copy.deepcopy(rules)
    for group in out["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = scaled_duration(rule["for"], factor)
    return out


def prometheus_rule(topology: Topology, api_url: str, namespace: str = "monitoring") -> dict[str, Any]:
    """The same groups as a Prometheus Operator ``PrometheusRule`` object."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": f"{topology.name}-rules",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "inferslice", "role": "alert-rules"},
        },
        "spec": {"groups": rule_groups(topology, api_url)},
    }


def alert_names(rules: dict[str, Any]) -> dict[str, list[str]]:
    """Group name -> alert names (in order, duplicates kept once) of a rule file."""
    out: dict[str, list[str]] = {}
    for group in rules["groups"]:
        names: list[str] = []
        for rule in group["rules"]:
            if "alert" in rule and rule["alert"] not in names:
                names.append(rule["alert"])
        out[group["name"]] = names
    return out
