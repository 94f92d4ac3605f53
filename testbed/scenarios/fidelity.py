"""Judge a scenario summary against the brief's figures (pure functions over summary rows).

Each check returns what was measured, what the paper reports and the tolerance the testbed
issue sets, so the report says *how* each figure compares, not just pass/fail.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from inferslice.common import units

Row = Mapping[str, Any]

SLO_TTFT_S = 0.5
EXPECTED_BREACH = {"free": 16, "standard": 20}  # paper: first concurrency whose P99 TTFT > 500 ms
BREACH_TOLERANCE = 4
PREMIUM_OVER_FREE_GOODPUT = 2.2  # paper: >= 5.36 / 2.49 req/s
GOODPUT_TOLERANCE = 0.25
DEMAND_AT_10_BPS = 0.9e6  # paper: ~0.9 Mbit/s of streamed response at concurrency 10
DEMAND_TOLERANCE = 0.25
DEMAND_CAP_TOLERANCE = 0.20  # a cap just above demand leaves P99 TTFT and TPOT within 20 %
LOW_CAP_PIN_TOLERANCE = 0.10  # a 0.5 Mbit/s cap pins the link at the cap
LOW_CAP_TPOT_FACTOR = 4.0  # ... and multiplies P99 TPOT by >= 4


@dataclass(frozen=True)
class Check:
    name: str
    measured: float | str | None
    expected: str
    ok: bool
    detail: str = ""
    unit: str = ""  # how the report prints ``measured``: "s", "bit/s", "x" or "" (a count)


def first_breach(rows: Iterable[Row], tier: str, slo_s: float = SLO_TTFT_S) -> int | None:
    """Lowest concurrency at which the tier's P99 TTFT exceeded the SLO (None: never)."""
    mine = sorted((r for r in rows if r["tier"] == tier and r.get("cap_bps") is None), key=lambda r: r["concurrency"])
    for r in mine:
        p99 = r.get("p99_ttft_s")
        if p99 is None or p99 > slo_s or (r.get("completed", 0) == 0):
            return int(r["concurrency"])
    return None


def peak_goodput(rows: Iterable[Row], tier: str) -> float:
    return max((float(r.get("goodput_rps") or 0.0) for r in rows if r["tier"] == tier), default=0.0)


def differentiation_checks(rows: Sequence[Row]) -> list[Check]:
    rows = [r for r in rows if r.get("scenario") == "differentiation"]
    tiers = {r["tier"] for r in rows}
    checks: list[Check] = []
    for tier, expected in EXPECTED_BREACH.items():
        if tier not in tiers:
            continue
        got = first_breach(rows, tier)
        ok = got is not None and abs(got - expected) <= BREACH_TOLERANCE
        checks.append(Check(f"{tier}: first P99 TTFT breach", got, f"{expected} +/- {BREACH_TOLERANCE}", ok))
    if "premium" in tiers:
        got = first_breach(rows, "premium")
        top = max(int(r["concurrency"]) for r in rows if r["tier"] == "premium")
        checks.append(Check("premium: no breach up to the top concurrency", got, f"none up to {top}", got is None))
    if {"premium", "free"} <= tiers:
        free = peak_goodput(rows, "free")
        ratio = peak_goodput(rows, "premium") / free if free > 0 else None
        ok = ratio is not None and abs(ratio - PREMIUM_OVER_FREE_GOODPUT) <= GOODPUT_TOLERANCE * PREMIUM_OVER_FREE_GOODPUT
        checks.append(
            Check(
                "premium/free peak goodput",
                None if ratio is None else round(ratio, 3),
                f"{PREMIUM_OVER_FREE_GOODPUT}x +/- 25 %",
                ok,
                unit="x",
            )
        )
    return checks


def _row(rows: Sequence[Row], tier: str, concurrency: int, cap: str) -> Row | None:
    for r in rows:
        if r["tier"] == tier and r["concurrency"] == concurrency and r.get("cap") == cap:
            return r
    return None


def _within(a: float | None, b: float | None, tol: float) -> bool:
    return a is not None and b is not None and b > 0 and abs(a - b) <= tol * b


def bandwidth_checks(rows: Sequence[Row]) -> list[Check]:
    rows = [r for r in rows if r.get("scenario") == "client-bandwidth"]
    checks: list[Check] = []
    for tier in sorted({r["tier"] for r in rows}):
        base10 = _row(rows, tier, 10, "none")
        if base10 is not None:
            rx = base10.get("link_rx_bps")
            checks.append(
                Check(
                    f"{tier}: uncapped demand at concurrency 10",
                    rx,
                    f"{units.bits_per_second(DEMAND_AT_10_BPS)} +/- 25 %",
                    _within(rx, DEMAND_AT_10_BPS, DEMAND_TOLERANCE),
                    unit="bit/s",
                )
            )
        for c in sorted({int(r["concurrency"]) for r in rows if r["tier"] == tier}):
            base, demand, low = _row(rows, tier, c, "none"), _row(rows, tier, c, "demand"), _row(rows, tier, c, "fixed")
            if base and demand:
                ok = _within(demand.get("p99_ttft_s"), base.get("p99_ttft_s"), DEMAND_CAP_TOLERANCE) and _within(
                    demand.get("p99_tpot_s"), base.get("p99_tpot_s"), DEMAND_CAP_TOLERANCE
                )
                checks.append(
                    Check(
                        f"{tier} c={c}: cap just above demand changes nothing",
                        f"TTFT {units.seconds(demand.get('p99_ttft_s'))} vs {units.seconds(base.get('p99_ttft_s'))}; "
                        f"TPOT {units.seconds(demand.get('p99_tpot_s'))} vs {units.seconds(base.get('p99_tpot_s'))}",
                        "P99 TTFT and TPOT within 20 %",
                        ok,
                    )
                )
            if base and low:
                cap = low.get("cap_bps") or 0.0
                pinned = _within(low.get("link_rx_bps"), cap, LOW_CAP_PIN_TOLERANCE)
                checks.append(
                    Check(
                        f"{tier} c={c}: 0.5 Mbit/s cap pins the link",
                        low.get("link_rx_bps"),
                        f"{units.bits_per_second(cap)} +/- 10 %",
                        pinned,
                        unit="bit/s",
                    )
                )
                b, lo = base.get("p99_tpot_s"), low.get("p99_tpot_s")
                factor = lo / b if b and lo else None
                checks.append(
                    Check(
                        f"{tier} c={c}: 0.5 Mbit/s cap multiplies P99 TPOT",
                        None if factor is None else round(factor, 2),
                        f">= {LOW_CAP_TPOT_FACTOR}x",
                        factor is not None and factor >= LOW_CAP_TPOT_FACTOR,
                        unit="x",
                    )
                )
    return checks


def evaluate(rows: Sequence[Row]) -> list[Check]:
    return differentiation_checks(rows) + bandwidth_checks(rows)


def checks_to_json(checks: list[Check]) -> list[dict[str, Any]]:
    return [asdict(c) for c in checks]


def checks_to_markdown(checks: list[Check]) -> str:
    lines = ["| check | measured | paper / target | ok |", "|---|---|---|---|"]
    for c in checks:
        measured = _measured(c)
        lines.append(f"| {c.name} | {measured} | {c.expected} | {'yes' if c.ok else 'NO'} |")
    return "\n".join(lines) + "\n"


def _measured(check: Check) -> str:
    value = check.measured
    if not isinstance(value, int | float) or isinstance(value, bool):
        return units.MISSING if value is None else str(value)
    if check.unit == "s":
        return units.seconds(value)
    if check.unit == "bit/s":
        return units.bits_per_second(value)
    if check.unit == "x":
        return units.factor(value)
    return f"{value:g}"
