"""``promtool test rules`` unit tests generated for the tiers file: every alert fires when it should
and stays quiet when it should not, for every tier, including the burn-rate windows.

Expected labels, annotations and holds come from ``expected_alerts`` (the tiers file and the alerting
conventions), never from the generated rules, so a wrong label or hold in ``rules`` fails. Holds are
checked on both sides: one evaluation before a stage may fire it must not, at the minute it may, it
must. ``group_eval_order`` runs the recording groups before the alerting ones, so an alert's start
does not depend on map order.

Burn-rate expectations come from a small model (error ratio per window from piecewise-constant
error segments at a constant request rate); a scenario whose burn lands within ``MARGIN`` of a
threshold raises instead of producing a test that would hinge on sample alignment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from inferslice import metric_names as m
from inferslice.dashboards import expected_alerts as ex
from inferslice.dashboards import queries as q
from inferslice.dashboards import rules as r
from inferslice.topology import Tier, Topology

STEP_MIN = 1  # sample and evaluation interval of the tests (minutes)
REQ_PER_MIN = 60.0  # one request per second
PREFIX_MIN = 360  # six healthy hours before a spike: the long windows hold history, not just the spike (longer costs O(n^2) in promtool)
MARGIN = 0.1  # relative distance a modelled burn keeps from each threshold
_WINDOW_MIN = {"5m": 5, "30m": 30, "1h": 60, "2h": 120, "6h": 360, "1d": 1440, "3d": 4320}
RATE_ACTIVE_MIN = 1  # an alert on a rate() is first true at 1m: rate needs the samples at 0m and 1m


class ScenarioError(ValueError):
    """A generated scenario would sit too close to a threshold to give a deterministic test."""


# -- series -------------------------------------------------------------------------------------
def _num(x: float) -> str:
    return repr(round(x, 6))


def counter(increments: list[float]) -> str:
    """A promtool series for a counter starting at 0 with per-step increments, run-length encoded.

    ``a+bxn`` yields n+1 values a..a+n*b, so each run starts one increment past the last value.
    """
    parts = ["0"]
    value, i = 0.0, 0
    while i < len(increments):
        j = i
        while j + 1 < len(increments) and math.isclose(increments[j + 1], increments[i]):
            j += 1
        inc, k = increments[i], j - i + 1
        parts.append(f"{_num(value + inc)}+{_num(inc)}x{k - 1}")
        value += inc * k
        i = j + 1
    return " ".join(parts)


def gauge(value: float, steps: int) -> str:
    return f"{_num(value)}x{steps}"


def _label_str(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


# -- burn-rate model ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Segment:
    start_min: int
    end_min: int
    error_ratio: float


def window_error_ratio(segments: list[Segment], t_min: int, window_min: int) -> float:
    lo = max(0, t_min - window_min)
    span = t_min - lo
    bad = sum(max(0, min(s.end_min, t_min) - max(s.start_min, lo)) * s.error_ratio for s in segments)
    return bad / span if span else 0.0


def _firing_at(segments: list[Segment], t_min: int, budget: float) -> list[str]:
    firing: list[str] = []
    for alert in ex.SRE_BURN_WINDOWS:
        burns = [window_error_ratio(segments, t_min, _WINDOW_MIN[w]) / budget for w in (alert.long_window, alert.short_window)]
        for burn in burns:
            if abs(burn - alert.factor) <= MARGIN * alert.factor:
                raise ScenarioError(f"burn {burn:.2f} within {MARGIN:.0%} of {alert.factor}x at t={t_min}m")
        if all(b > alert.factor for b in burns) and alert.severity not in firing:
            firing.append(alert.severity)
    return firing


def firing_burn_severities(segments: list[Segment], t_min: int, budget: float) -> list[str]:
    """Severities of the burn alert at ``t_min``; raises when the answer depends on sample alignment.

    Recorded ratios may lag one evaluation behind the burn rules (groups run in any order) and
    2.x range selectors include their left edge, so the answer must hold from t-2 to t.
    """
    answers = {tuple(_firing_at(segments, t, budget)) for t in (t_min - 2, t_min - 1, t_min)}
    if len(answers) > 1:
        raise ScenarioError(f"burn alerts change between t={t_min - 2}m and t={t_min}m")
    return list(answers.pop())


def _burn_series(tier: Tier, segments: list[Segment], total_min: int) -> list[dict[str, str]]:
    bad = [0.0] * total_min
    for seg in segments:
        for i in range(seg.start_min, min(seg.end_min, total_min)):
            bad[i] = seg.error_ratio
    s = {"slice": tier.name}
    return [
        {"series": f"{m.SLO_TTFT_REQUESTS}{_label_str(s)}", "values": counter([REQ_PER_MIN] * total_min)},
        {"series": f"{m.SLO_TTFT_GOOD}{_label_str(s)}", "values": counter([REQ_PER_MIN * (1 - b) for b in bad])},
    ]


def _burn_case(tier: Tier, api_url: str, name: str, segments: list[Segment], evals: list[int], total_min: int) -> dict[str, Any]:
    budget = 1.0 - tier.attainment_objective
    alert_tests = []
    for t in evals:
        sev = firing_burn_severities(segments, t, budget)
        alert_tests.append(
            {
                "eval_time": f"{t}m",
                "alertname": r.ALERT_BURN,
                "exp_alerts": [ex.burn_alert(tier, x, api_url) for x in sev],
            }
        )
    return {
        "name": f"{tier.name}: burn {name}",
        "interval": f"{STEP_MIN}m",
        "input_series": _burn_series(tier, segments, total_min),
        "alert_rule_test": alert_tests,
    }


def burn_cases(tier: Tier, api_url: str) -> list[dict[str, Any]]:
    budget = 1.0 - tier.attainment_objective
    cases = []
    slow = min(1.0, 4.0 * budget)  # 4x: above the 3x and 1x ticket thresholds, below 6x and 14.4x
    cases.append(_burn_case(tier, api_url, "slow (ticket only)", [Segment(0, 10**6, slow)], [30, 120, 180], 200))
    if 14.4 * budget * (1 + MARGIN) >= 1.0:
        return cases  # a budget this loose cannot burn at 14.4x: the page paths are unreachable
    fast = min(1.0, 20.0 * budget)
    cases.append(_burn_case(tier, api_url, "fast (14.4x page)", [Segment(0, 10**6, fast)], [10, 30], 40))
    # A 5-minute spike: the short windows light up, the long ones never reach their factor.
    spike = min(1.0, 50.0 * budget)
    p = PREFIX_MIN
    case = _burn_case(tier, api_url, "brief spike (no page)", [Segment(p, p + 5, spike)], [p + 3, p + 5, p + 10, p + 30], p + 40)
    case["promql_expr_test"] = [  # the short window does see the spike; the long one keeps it from paging
        {
            "expr": f'{q.rec_burn_rate("5m")}{{slice="{tier.name}"}} > bool 14.4',
            "eval_time": f"{p + 5}m",
            "exp_samples": [{"labels": f'{{slice="{tier.name}"}}', "value": 1}],
        }
    ]
    cases.append(case)
    # A longer outage pages, then recovers: the 1h window still burns above 14.4x, the 5m one does not.
    d, segments, after = _outage(p, budget)
    case = _burn_case(tier, api_url, "outage then recovery", segments, [p + d, p + d + after], p + d + after + 5)
    case["promql_expr_test"] = [
        {
            "expr": f'{q.rec_burn_rate("1h")}{{slice="{tier.name}"}} > bool 14.4',
            "eval_time": f"{p + d + after}m",
            "exp_samples": [{"labels": f'{{slice="{tier.name}"}}', "value": 1}],
        }
    ]
    cases.append(case)
    return cases


def _outage(start_min: int, budget: float) -> tuple[int, list[Segment], int]:
    """A total outage long enough to page at its end, clear of every threshold margin."""
    for d in range(max(10, math.ceil(1.2 * 14.4 * 60 * budget)), 120):
        segments = [Segment(start_min, start_min + d, 1.0)]
        try:
            if ex.PAGE in firing_burn_severities(segments, start_min + d, budget):
                return d, segments, _quiet_after(segments, start_min + d, budget)
        except ScenarioError:
            continue
    raise ScenarioError("no outage length pages clear of the thresholds")


def _quiet_after(segments: list[Segment], end_min: int, budget: float) -> int:
    """Minutes after an outage when no page fires although the 1h window still burns above 14.4x."""
    for after in range(6, 60):
        t = end_min + after
        try:
            pages = ex.PAGE in firing_burn_severities(segments, t, budget)
        except ScenarioError:
            continue
        if not pages and window_error_ratio(segments, t, 60) / budget > 14.4 * (1 + MARGIN):
            return after
    raise ScenarioError("no point after the outage where the 5m window is quiet and the 1h window still burns")


# -- TTFT, regime, link, platform ---------------------------------------------------------------
def _ttft_series(tier: Tier, engine_bad: bool, client_bad: bool, steps: int) -> list[dict[str, str]]:
    out = []
    for histogram, bad in ((m.ENGINE_TTFT, engine_bad), (m.CLIENT_TTFT, client_bad)):
        per_min = 600.0  # ten observations a second
        good_bucket = 0.0 if bad else per_min  # all in (slo, 2 slo] when bad, all <= slo/5 when healthy
        slo = tier.slo_ttft_p99_s
        for le, inc in ((_num(slo / 5), good_bucket), (_num(slo), good_bucket), (_num(2 * slo), per_min), ("+Inf", per_min)):
            out.append({"series": f"{histogram}_bucket{_label_str({'slice': tier.name, 'le': le})}", "values": counter([inc] * steps)})
    return out


def _hold_evals(active_min: int, holds: list[int]) -> list[int]:
    """Evaluation minutes on both sides of each hold: just before it may fire, and when it must."""
    return sorted({t for h in holds for t in (active_min + h - 1, active_min + h)})


def ttft_cases(tier: Tier, api_url: str) -> list[dict[str, Any]]:
    ladder = ex.ttft_ladder(tier)
    evals = _hold_evals(RATE_ACTIVE_MIN, [hold for _, hold in ladder])
    horizon = evals[-1] + 3
    cases = []
    for label, engine_bad, client_bad in (
        ("engine-side breach", True, False),
        ("client-only breach (network)", False, True),
        ("healthy", False, False),
    ):
        tests: list[dict[str, Any]] = []
        for t in evals:
            firing = [(sev, hold) for sev, hold in ladder if RATE_ACTIVE_MIN + hold <= t] if (engine_bad or client_bad) else []
            tests.append(
                {
                    "eval_time": f"{t}m",
                    "alertname": r.ALERT_TTFT,
                    "exp_alerts": [ex.ttft_alert(tier, sev, hold, api_url) for sev, hold in firing],
                }
            )
        case: dict[str, Any] = {
            "name": f"{tier.name}: TTFT {label}",
            "interval": f"{STEP_MIN}m",
            "input_series": _ttft_series(tier, engine_bad, client_bad, horizon),
            "alert_rule_test": tests,
        }
        if engine_bad:
            case["promql_expr_test"] = [
                {
                    "expr": f'{q.rec_ttft_quantile(0.99, "5m")}{{slice="{tier.name}",vantage="engine"}}',
                    "eval_time": "5m",
                    "exp_samples": [
                        {
                            "labels": f'{q.rec_ttft_quantile(0.99, "5m")}{{slice="{tier.name}",vantage="engine"}}',
                            "value": 1.99 * tier.slo_ttft_p99_s,
                        }
                    ],
                }
            ]
        cases.append(case)
    return cases


def _two_sided(alertname: str, hold_eval: list[int], expected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Nothing one evaluation before the hold has elapsed, ``expected`` from the minute it has."""
    before, at = hold_eval
    return [
        {"eval_time": f"{before}m", "alertname": alertname, "exp_alerts": []},
        {"eval_time": f"{at}m", "alertname": alertname, "exp_alerts": expected},
    ]


def regime_cases(tier: Tier, api_url: str) -> list[dict[str, Any]]:
    cases = []
    for active in (*q.BINDING_REGIMES, "healthy"):
        series = [
            {
                "series": f"{m.DIAGNOSIS_REGIME}{_label_str({'slice': tier.name, 'regime': reg})}",
                "values": gauge(1.0 if reg == active else 0.0, 10),
            }
            for reg in (*q.BINDING_REGIMES, "healthy")
        ]
        firing = [] if active == "healthy" else [ex.regime_alert(tier, active, api_url)]
        cases.append(
            {
                "name": f"{tier.name}: regime {active}",
                "interval": f"{STEP_MIN}m",
                "input_series": series,
                "alert_rule_test": _two_sided(r.ALERT_REGIME, _hold_evals(0, [ex.REGIME_HOLD_MIN]), firing),
            }
        )
    return cases


def link_cases(tier: Tier, api_url: str) -> list[dict[str, Any]]:
    cap_bps = 1_000_000.0
    cases = []
    # Just above and just below the near-cap share: a threshold moved by more than 3 points fails.
    for share, fires in ((ex.LINK_NEAR_CAP_SHARE + 0.03, True), (ex.LINK_NEAR_CAP_SHARE - 0.03, False)):
        where = {"slice": tier.name, "pop": "bristol", "link": "client"}
        series = [
            {"series": f"{m.LINK_RECEIVE_BYTES}{_label_str(where)}", "values": counter([share * cap_bps / 8 * 60] * 15)},
            {"series": f"{m.LINK_CAP_BPS}{_label_str({**where, 'direction': 'receive'})}", "values": gauge(cap_bps, 15)},
        ]
        exp = [ex.link_alert(tier, "bristol", "client", "receive", api_url)] if fires else []
        cases.append(
            {
                "name": f"{tier.name}: link at {share:.0%} of its cap",
                "interval": f"{STEP_MIN}m",
                "input_series": series,
                "alert_rule_test": _two_sided(r.ALERT_LINK_NEAR_CAP, _hold_evals(RATE_ACTIVE_MIN, [ex.LINK_HOLD_MIN]), exp),
            }
        )
    return cases


def replica_cases(tier: Tier) -> list[dict[str, Any]]:
    down = {"slice": tier.name, "pop": "bristol", "replica": f"{tier.name}-0", "target": "engine"}
    up = {**down, "replica": f"{tier.name}-1"}
    series = [
        {"series": f"{m.TARGET_UP}{_label_str(down)}", "values": gauge(0, 10)},
        {"series": f"{m.TARGET_UP}{_label_str(up)}", "values": gauge(1, 10)},
    ]
    expected = [ex.replica_down_alert(tier, "bristol", f"{tier.name}-0", "engine")]
    return [
        {
            "name": f"{tier.name}: a replica target down",
            "interval": f"{STEP_MIN}m",
            "input_series": series,
            "alert_rule_test": _two_sided(r.ALERT_REPLICA_DOWN, _hold_evals(0, [ex.DOWN_HOLD_MIN]), expected),
        }
    ]


def platform_cases() -> list[dict[str, Any]]:
    before, at = _hold_evals(0, [ex.DOWN_HOLD_MIN])
    series = [
        {"series": f'{m.SOURCE_UP}{{source="nvml"}}', "values": gauge(0, 10)},
        {"series": f'{m.SOURCE_UP}{{source="netlink"}}', "values": gauge(1, 10)},
        {"series": 'up{job="inferslice-exporter",instance="127.0.0.1:9400"}', "values": gauge(0, 10)},
        {"series": 'up{job="inferslice-exporter",instance="127.0.0.1:9401"}', "values": gauge(1, 10)},
    ]
    return [
        {
            "name": "platform: a source and a scrape target down",
            "interval": f"{STEP_MIN}m",
            "input_series": series,
            "alert_rule_test": [
                *_two_sided(r.ALERT_SOURCE_DOWN, [before, at], [ex.source_down_alert("nvml")]),
                *_two_sided(r.ALERT_TARGET_DOWN, [before, at], [ex.target_down_alert("inferslice-exporter", "127.0.0.1:9400")]),
            ],
        }
    ]


def rule_tests(topology: Topology, rule_files: list[str], api_url: str) -> dict[str, Any]:
    """A promtool test file for ``rule_files`` (paths as promtool will see them).

    Only the groups' names and order are taken from the rules (recordings first); every expectation
    comes from ``expected_alerts``."""
    tests: list[dict[str, Any]] = platform_cases()
    for tier in topology.tiers:
        tests += ttft_cases(tier, api_url) + burn_cases(tier, api_url) + regime_cases(tier, api_url)
        tests += link_cases(tier, api_url) + replica_cases(tier)
    order = [g["name"] for g in r.rule_groups(topology, api_url)]
    return {"rule_files": rule_files, "evaluation_interval": f"{STEP_MIN}m", "group_eval_order": order, "tests": tests}
