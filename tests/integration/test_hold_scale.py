"""``hold_scale`` of the rule and Alertmanager generators (what lets the alerting test finish in
seconds): pure checks, plus promtool/amtool accepting the scaled files when installed. No root."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from inferslice.common.promtime import parse_duration as duration_s
from inferslice.dashboards import build, checks
from inferslice.dashboards.rules import ALERT_TTFT, scaled_duration
from inferslice.topology import load_topology

Pair = tuple[build.Artefacts, build.Artefacts]


@pytest.fixture(scope="module")
def pair() -> Pair:
    top = load_topology()
    return build.generate(top), build.generate(top, hold_scale=0.01)


def _holds(rule_file: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(g["name"], r["alert"], r["for"]) for g in rule_file["groups"] for r in g["rules"] if "for" in r]


def test_durations() -> None:
    assert duration_s("10m") == 600 and duration_s("1h30m") == 5400 and duration_s("500ms") == 0.5
    assert scaled_duration("10m", 0.01) == "6s"
    assert scaled_duration("1m", 0.01) == "1s"  # never below one second
    assert scaled_duration("12h", 0.01) == "432s"
    with pytest.raises(ValueError):
        duration_s("10 minutes")


def test_default_is_unchanged_and_scale_touches_only_holds(pair: Pair) -> None:
    prod, fast = pair
    assert build.generate(load_topology(), hold_scale=1.0).rule_file == prod.rule_file
    before, after = _holds(prod.rule_file), _holds(fast.rule_file)
    assert [(g, a) for g, a, _ in before] == [(g, a) for g, a, _ in after]
    for (_, _, slow), (_, _, quick) in zip(before, after, strict=True):
        assert duration_s(quick) == max(1, round(duration_s(slow) * 0.01))
    free_ttft = [f for g, a, f in after if g == "inferslice-tier-free" and a == ALERT_TTFT]
    assert free_ttft == ["6s"]  # Free's 10 m ticket
    # expressions (windows included) stay the production ones
    strip = [[{k: v for k, v in r.items() if k != "for"} for r in g["rules"]] for g in prod.rule_file["groups"]]
    assert strip == [[{k: v for k, v in r.items() if k != "for"} for r in g["rules"]] for g in fast.rule_file["groups"]]
    assert fast.rule_tests == prod.rule_tests and fast.prometheus_rule == prod.prometheus_rule


def test_alertmanager_timing_scaled(pair: Pair) -> None:
    prod, fast = pair
    assert fast.alertmanager["route"]["group_wait"] == "1s"  # 30 s
    for slow, quick in zip(prod.alertmanager["route"]["routes"], fast.alertmanager["route"]["routes"], strict=True):
        assert slow["matchers"] == quick["matchers"] and slow["receiver"] == quick["receiver"]
        for key in ("group_wait", "group_interval", "repeat_interval"):
            assert quick[key] == scaled_duration(slow[key], 0.01)
    with pytest.raises(ValueError):
        build.generate(load_topology(), hold_scale=0)


@pytest.mark.skipif(not (shutil.which("promtool") and shutil.which("amtool")), reason="promtool/amtool not installed")
def test_tools_accept_scaled_files(pair: Pair, tmp_path: Path) -> None:
    _, fast = pair
    build.write(tmp_path, fast)
    ok, out = checks.check_rule_file(tmp_path / "prometheus/rules/inferslice.rules.yml")
    assert ok, out
    ok, out = checks.check_alertmanager_config(tmp_path / "alertmanager/alertmanager.yml")
    assert ok, out
