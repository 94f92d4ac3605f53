"""The generated promtool tests are an independent oracle: they do not follow the rules they test.

A rule with a wrong label, annotation, threshold or ``for:`` hold must fail them (negative tests run
promtool on deliberately broken copies of the generated rule file), and changing the rule generator
must not change a single expectation.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from inferslice.dashboards import build, checks, rules, ruletests

from .conftest import API_URL, need_tool

Rule = dict[str, Any]


def _rule(rule_file: dict[str, Any], group: str, alert: str, severity: str | None = None) -> Rule:
    """The one alert rule of ``group`` named ``alert`` (of ``severity`` when several stages share the name)."""
    found = [
        r
        for g in rule_file["groups"]
        if g["name"] == group
        for r in g["rules"]
        if r.get("alert") == alert and (severity is None or r["labels"]["severity"] == severity)
    ]
    assert len(found) == 1, (group, alert, severity)
    return found[0]


def _set(key: str, value: str) -> Callable[[Rule], None]:
    def mutate(rule: Rule) -> None:
        rule[key] = value

    return mutate


def _set_in(key: str, sub: str, value: str) -> Callable[[Rule], None]:
    def mutate(rule: Rule) -> None:
        rule[key][sub] = value

    return mutate


@dataclass(frozen=True)
class Mutation:
    what: str  # what is wrong with the rule
    tier: str
    alert: str
    severity: str | None  # which stage, when several share the alert name
    mutate: Callable[[Rule], None]
    cases: str  # name prefix of the generated cases that must catch it


MUTATIONS = [
    Mutation("a ticket hold 1 min too long", "standard", rules.ALERT_TTFT, "ticket", _set("for", "6m"), "standard: TTFT"),
    Mutation("a page hold 1 min too short", "premium", rules.ALERT_TTFT, "page", _set("for", "1m"), "premium: TTFT"),
    Mutation("a page labelled ticket", "premium", rules.ALERT_TTFT, "page", _set_in("labels", "severity", "ticket"), "premium: TTFT"),
    Mutation("a wrong priority", "free", rules.ALERT_REGIME, None, _set_in("labels", "priority", "2"), "free: regime"),
    Mutation("a regime hold of 2 min", "free", rules.ALERT_REGIME, None, _set("for", "2m"), "free: regime"),
    Mutation("no regime hold at all", "free", rules.ALERT_REGIME, None, _set("for", "0s"), "free: regime"),
    Mutation(
        "a remedy that adds replicas to a squeezed link",
        "standard",
        rules.ALERT_REGIME,
        None,
        _set_in("annotations", "remedy", "add replicas"),
        "standard: regime network_limited",
    ),
    Mutation("a link hold of 4 min", "standard", rules.ALERT_LINK_NEAR_CAP, None, _set("for", "4m"), "standard: link"),
    Mutation(
        "a dashboard link to another tier",
        "free",
        rules.ALERT_REPLICA_DOWN,
        None,
        _set_in("annotations", "dashboard", "/d/inferslice-tier-premium"),
        "free: a replica target down",
    ),
    Mutation("a burn page as ticket", "standard", rules.ALERT_BURN, "page", _set_in("labels", "severity", "ticket"), "standard: burn fast"),
]


def _run(tmp_path: Path, rule_file: dict[str, Any], tests: dict[str, Any], case_prefix: str) -> tuple[bool, str]:
    (tmp_path / "rules").mkdir(parents=True)
    (tmp_path / "tests").mkdir()
    (tmp_path / "rules" / "inferslice.rules.yml").write_text(build.dump_yaml(rule_file))
    subset = {**tests, "tests": [c for c in tests["tests"] if c["name"].startswith(case_prefix)]}
    assert subset["tests"], case_prefix
    path = tmp_path / "tests" / "subset.test.yml"
    path.write_text(build.dump_yaml(subset))
    return checks.run_rule_tests(path, need_tool("promtool"))


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.what for m in MUTATIONS])
def test_a_wrong_rule_fails_the_generated_tests(tmp_path: Path, artefacts: build.Artefacts, mutation: Mutation) -> None:
    broken = copy.deepcopy(artefacts.rule_file)
    mutation.mutate(_rule(broken, f"inferslice-tier-{mutation.tier}", mutation.alert, mutation.severity))
    ok, out = _run(tmp_path, broken, artefacts.rule_tests, mutation.cases)
    assert not ok, f"{mutation.what}: promtool passed against a broken rule"
    assert "FAILED" in out and f"name: {mutation.cases}" in out


def test_the_same_subsets_pass_against_the_generated_rules(tmp_path: Path, artefacts: build.Artefacts) -> None:
    # Control for the test above: the subsets fail because of the mutation, not because they are subsets.
    for i, prefix in enumerate(sorted({m.cases for m in MUTATIONS})):
        ok, out = _run(tmp_path / str(i), artefacts.rule_file, artefacts.rule_tests, prefix)
        assert ok, out[-2000:]


def test_a_wrong_near_cap_threshold_fails(tmp_path: Path, artefacts: build.Artefacts) -> None:
    broken = copy.deepcopy(artefacts.rule_file)
    rule = _rule(broken, "inferslice-tier-standard", rules.ALERT_LINK_NEAR_CAP)
    rule["expr"] = rule["expr"].replace("> 0.9", "> 0.95")
    ok, out = _run(tmp_path, broken, artefacts.rule_tests, "standard: link")
    assert not ok and "name: standard: link at 93% of its cap" in out


def test_changing_the_rule_generator_changes_no_expectation(monkeypatch: pytest.MonkeyPatch, topology: Any) -> None:
    before = ruletests.rule_tests(topology, ["r.yml"], API_URL)
    monkeypatch.setattr(rules, "ttft_stages", lambda tier: (rules.TtftStage("page", "1m"),))
    monkeypatch.setattr(rules, "REGIME_FOR", "9m")
    monkeypatch.setattr(rules, "LINK_NEAR_CAP_FOR", "9m")
    monkeypatch.setattr(rules, "SOURCE_DOWN_FOR", "9m")
    monkeypatch.setattr(rules, "BURN_ALERTS", (rules.BurnAlert("ticket", 2.0, "1h", "5m"),))
    monkeypatch.setattr(rules, "REGIME_REMEDY", dict.fromkeys(rules.REGIME_REMEDY, "add replicas"))
    monkeypatch.setattr(rules, "_tier_labels", lambda tier, severity: {"severity": "page", "priority": "9"})
    assert yaml.safe_dump(ruletests.rule_tests(topology, ["r.yml"], API_URL)) == yaml.safe_dump(before)
