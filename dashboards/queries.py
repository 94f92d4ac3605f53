"""PromQL the dashboards and rules share: selectors, quantiles, rates, SLO windows and the names
of the recording rules. Pure string builders, so every expression is written once and the
checks can parse each of them with promtool.

Metric names come from ``inferslice.metric_names`` only: the exporters expose exactly these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from inferslice import actions as a
from inferslice import metric_names as m

# The grid of the SLO alerting conventions (CONTRACTS.md): windows used by the burn-rate alerts.
BURN_WINDOWS: tuple[str, ...] = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")
QUANTILE_WINDOWS: tuple[str, ...] = ("1m", "5m")
QUANTILES: tuple[float, ...] = (0.5, 0.99)

# Outcomes of inferslice_control_actions_total{outcome}: the vocabulary's (``inferslice.actions``).
OUTCOME_APPLIED, OUTCOME_PENDING = a.OUTCOME_APPLIED, a.OUTCOME_PENDING
OUTCOME_REJECTED, OUTCOME_FAILED = a.OUTCOME_REJECTED, a.OUTCOME_FAILED
OUTCOME_EFFECTIVE, OUTCOME_INSUFFICIENT, OUTCOME_INEFFECTIVE = a.OUTCOME_EFFECTIVE, a.OUTCOME_INSUFFICIENT, a.OUTCOME_INEFFECTIVE
BINDING_REGIMES: tuple[str, ...] = ("queue_limited", "network_limited", "compute_limited")

# Vantage label of the latency recording rules: where the latency was measured.
VANTAGE_ENGINE = "engine"
VANTAGE_CLIENT = "client"


def sel(**labels: str) -> str:
    """Label matchers; a value starting with '~' becomes a regex match (``slice="~$slice"``)."""
    parts = []
    for key, value in labels.items():
        if value.startswith("~"):
            parts.append(f'{key}=~"{value[1:]}"')
        else:
            parts.append(f'{key}="{value}"')
    return ",".join(parts)


def rate(metric: str, selector: str, window: str) -> str:
    return f"rate({metric}{{{selector}}}[{window}])"


def sum_rate(metric: str, selector: str, window: str, by: Sequence[str] = ("slice",)) -> str:
    return f"sum by ({', '.join(by)}) ({rate(metric, selector, window)})"


def quantile(q: float, histogram: str, selector: str, window: str, by: Sequence[str] = ("slice",)) -> str:
    """histogram_quantile over a histogram's ``_bucket`` series, aggregated over replicas."""
    group = ", ".join((*by, "le"))
    return f"histogram_quantile({q:g}, sum by ({group}) (rate({histogram}_bucket{{{selector}}}[{window}])))"


def pct(q: float) -> str:
    """0.99 -> 'p99', 0.5 -> 'p50', 0.999 -> 'p999'."""
    return "p" + f"{q:g}".removeprefix("0.").ljust(2, "0")


def budget(objective: float) -> str:
    """The error budget ``1 - objective`` as a short literal (0.999 -> '0.001', not 0.0010000000000000009)."""
    return f"{1.0 - objective:.6g}"


# -- recording rule names (level:metric:operations) --------------------------------------------
def rec_ttft_quantile(q: float, window: str) -> str:
    return f"slice:inferslice_ttft_seconds:{pct(q)}_rate{window}"


def rec_tpot_quantile(q: float, window: str) -> str:
    return f"slice:inferslice_tpot_seconds:{pct(q)}_rate{window}"


def rec_attainment(window: str) -> str:
    return f"slice:inferslice_slo_ttft_attainment:ratio_rate{window}"


def rec_error_ratio(window: str) -> str:
    return f"slice:inferslice_slo_ttft_errors:ratio_rate{window}"


def rec_burn_rate(window: str) -> str:
    return f"slice:inferslice_slo_ttft_burn:rate{window}"


REC_LINK_UTILISATION = "slice_pop_link:inferslice_link_utilisation:ratio_rate1m"


@dataclass(frozen=True)
class LatencySource:
    """One latency histogram per vantage point: engine-side (vLLM merged per slice) or client-perceived."""

    vantage: str
    histogram: str


TTFT_SOURCES: tuple[LatencySource, ...] = (
    LatencySource(VANTAGE_ENGINE, m.ENGINE_TTFT),
    LatencySource(VANTAGE_CLIENT, m.CLIENT_TTFT),
)
TPOT_SOURCES: tuple[LatencySource, ...] = (
    LatencySource(VANTAGE_ENGINE, m.ENGINE_TPOT),
    LatencySource(VANTAGE_CLIENT, m.CLIENT_TPOT),
)


# -- expressions used by several dashboards ------------------------------------------------------
def attainment(selector: str, window: str) -> str:
    good = sum_rate(m.SLO_TTFT_GOOD, selector, window)
    total = sum_rate(m.SLO_TTFT_REQUESTS, selector, window)
    return f"{good} / {total}"


def link_bits(direction: str, selector: str, window: str, by: Sequence[str] = ("slice", "pop", "link")) -> str:
    """Link rate in bit/s; ``direction`` is receive or transmit (the exporter's viewpoint)."""
    metric = m.LINK_RECEIVE_BYTES if direction == "receive" else m.LINK_TRANSMIT_BYTES
    return f"{sum_rate(metric, selector, window, by)} * 8"


def link_cap(direction: str, selector: str, by: Sequence[str] = ("slice", "pop", "link")) -> str:
    cap_sel = ",".join(s for s in (selector, f'direction="{direction}"') if s)
    return f"max by ({', '.join(by)}) ({m.LINK_CAP_BPS}{{{cap_sel}}})"


def link_utilisation(direction: str, window: str) -> str:
    """Rate over cap on the same (slice, pop, link); uncapped links have no cap series and drop out."""
    by = ("slice", "pop", "link")
    return f"{link_bits(direction, '', window, by)} / on ({', '.join(by)}) {link_cap(direction, '', by)}"


def latency_attribution(selector: str, stat: str) -> str:
    """Seconds of ``stat`` per resource (queue, network, compute, base) from the diagnosis API."""
    return f'max by (resource) ({m.LATENCY_ATTRIBUTION}{{{selector},stat="{stat}"}})'


def regime_active(selector: str) -> str:
    return f"max by (slice, regime) ({m.DIAGNOSIS_REGIME}{{{selector}}}) == 1"


def control_changes(selector: str, window: str) -> str:
    """Control actions as events: a counter that moved in the window, or a series that appeared in it
    (the first action of a kind creates its series, which ``changes`` alone would miss)."""
    by = "sum by (slice, kind, outcome)"
    series = f"{m.CONTROL_ACTIONS}{{{selector}}}"
    return f"({by} (changes({series}[{window}])) > 0) or ({by} ({series}) unless {by} ({series} offset {window}))"
