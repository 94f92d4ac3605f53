"""Rules: promtool check and unit tests (every alert fires when it should and stays quiet when it
should not, burn-rate windows included), PromQL parsing, the PrometheusRule CRD schema, and the
tiers file as the single source (a fourth tier adds its dashboard and alerts)."""

from __future__ import annotations

from pathlib import Path

import yaml

from inferslice.dashboards import boards, build, checks, rules, ruletests
from inferslice.dashboards.alertmanager import alertmanager_config

from .conftest import API_URL, CRD, need_tool


def test_promtool_check_rules_passes_with_lint(built):
    promtool = need_tool("promtool")
    ok, out = checks.check_rule_file(built / "prometheus/rules/inferslice.rules.yml", promtool)
    assert ok, out
    assert "SUCCESS" in out


def test_every_promql_expression_parses(artefacts):
    promtool = need_tool("promtool")
    exprs = checks.dashboard_exprs(artefacts.dashboards) + checks.rule_exprs(artefacts.rule_file)
    assert len(exprs) > 200
    assert checks.promql_errors(exprs, promtool) == {}


def test_promql_check_names_the_broken_expressions():
    promtool = need_tool("promtool")
    errors = checks.promql_errors(["up", "sum(rate(x[5m])", "rate(y[5m])", 'foo{a="b"'], promtool)
    assert set(errors) == {"sum(rate(x[5m])", 'foo{a="b"'}
    assert "parse error" in errors["sum(rate(x[5m])"]


def test_promtool_unit_tests_of_every_alert_pass(built):
    """Runs the generated promtool tests: TTFT ladder per tier, fast/slow burn, brief spike, outage
    and recovery, regimes, link near cap, sources and targets down."""
    promtool = need_tool("promtool")
    ok, out = checks.run_rule_tests(built / "prometheus/tests/inferslice.rules.test.yml", promtool)
    assert ok, out[-4000:]


def _case(artefacts, name: str) -> dict:
    return next(c for c in artefacts.rule_tests["tests"] if c["name"] == name)


def _severities(case: dict) -> list[tuple[str, list[str]]]:
    return [(t["eval_time"], sorted(a["exp_labels"]["severity"] for a in t["exp_alerts"])) for t in case["alert_rule_test"]]


def test_burn_scenarios_expect_what_the_sre_workbook_says(artefacts):
    # fast burn pages (the ticket fires too; Alertmanager inhibits it), slow burn only tickets,
    # a brief spike never pages, an outage pages and stops paging once the 5m window is clean.
    assert all("page" in sev for _, sev in _severities(_case(artefacts, "standard: burn fast (14.4x page)")))
    assert all(sev == ["ticket"] for _, sev in _severities(_case(artefacts, "standard: burn slow (ticket only)")))
    assert all("page" not in sev for _, sev in _severities(_case(artefacts, "standard: burn brief spike (no page)")))
    outage = _severities(_case(artefacts, "standard: burn outage then recovery"))
    assert "page" in outage[0][1] and "page" not in outage[-1][1]
    # ...while the 1h window still burns above 14.4x at that point (asserted by promtool):
    assert _case(artefacts, "standard: burn outage then recovery")["promql_expr_test"][0]["exp_samples"][0]["value"] == 1


def test_scenario_model_refuses_thresholds_it_cannot_call():
    seg = [ruletests.Segment(0, 10**6, 0.03)]  # exactly 3x a 0.01 budget
    try:
        ruletests.firing_burn_severities(seg, 120, 0.01)
    except ruletests.ScenarioError:
        return
    raise AssertionError("a burn at the threshold must not produce a test")


def test_alert_inventory_and_labels(artefacts, topology):
    names = rules.alert_names(artefacts.rule_file)
    assert names["inferslice-platform"] == [rules.ALERT_SOURCE_DOWN, rules.ALERT_TARGET_DOWN]
    for tier in topology.tiers:
        group = next(g for g in artefacts.rule_file["groups"] if g["name"] == f"inferslice-tier-{tier.name}")
        alerts = [r for r in group["rules"] if "alert" in r]
        assert {r["alert"] for r in alerts} >= {rules.ALERT_TTFT, rules.ALERT_BURN, rules.ALERT_REGIME, rules.ALERT_LINK_NEAR_CAP}
        for rule in alerts:
            assert rule["labels"]["priority"] == str(tier.priority) and rule["labels"]["severity"] in ("page", "ticket")
            assert f'slice="{tier.name}"' in rule["expr"]
        regime = next(r for r in alerts if r["alert"] == rules.ALERT_REGIME)
        assert 'regime=~"queue_limited|network_limited|compute_limited"' in regime["expr"]
        assert regime["annotations"]["diagnosis_url"] == f"{API_URL}/v1/slices/{{{{ $labels.slice }}}}"
        assert regime["annotations"]["diagnosis"] == "{{ $labels.regime }}"
    ladder = {t.name: [(s.severity, s.for_) for s in rules.ttft_stages(t)] for t in topology.tiers}
    assert ladder == {"free": [("ticket", "10m")], "standard": [("ticket", "5m"), ("page", "15m")], "premium": [("page", "2m")]}


def test_burn_rates_use_each_tiers_objective(artefacts):
    exprs = {
        r["labels"]["slice"]: r["expr"]
        for g in artefacts.rule_file["groups"]
        for r in g["rules"]
        if r.get("record") == "slice:inferslice_slo_ttft_burn:rate1h"
    }
    assert exprs["free"].endswith("/ 0.05") and exprs["standard"].endswith("/ 0.01") and exprs["premium"].endswith("/ 0.001")


def test_prometheus_rule_objects_validate_against_the_crd(artefacts):
    schema = checks.crd_schema(CRD)
    assert checks.custom_object_errors(artefacts.prometheus_rule, schema) == []
    assert artefacts.prometheus_rule["spec"]["groups"] == artefacts.rule_file["groups"]
    broken = yaml.safe_load(yaml.safe_dump(artefacts.prometheus_rule))
    broken["spec"]["groups"][4]["rules"][7]["for"] = "five minutes"
    del broken["spec"]["groups"][0]["name"]
    errors = checks.custom_object_errors(broken, schema)
    assert any("for" in e for e in errors) and any("name" in e for e in errors)


def test_a_fourth_tier_adds_its_dashboard_alerts_and_routes(four_tiers, tmp_path: Path):
    art = build.generate(four_tiers, api_url=API_URL)
    uids = [d["uid"] for d in art.dashboards]
    assert "inferslice-tier-batch" in uids and len(uids) == 7
    assert checks.dashboards_problems(art.dashboards) == []
    names = rules.alert_names(art.rule_file)
    assert set(names["inferslice-tier-batch"]) >= {rules.ALERT_TTFT, rules.ALERT_BURN, rules.ALERT_REGIME, rules.ALERT_LINK_NEAR_CAP}
    overview = next(d for d in art.dashboards if d["uid"] == boards.UID_OVERVIEW)
    assert any(link["url"] == "/d/inferslice-tier-batch" for link in overview["links"])
    receivers = {r["name"] for r in alertmanager_config(four_tiers, API_URL)["receivers"]}
    assert {"inferslice-batch-page", "inferslice-batch-ticket"} <= receivers
    assert checks.custom_object_errors(art.prometheus_rule, checks.crd_schema(CRD)) == []
    # Run promtool on the new tier's own unit tests (a loose 0.9 objective: no 14.4x page path).
    promtool = need_tool("promtool")
    build.write(tmp_path, art)
    ok, out = checks.check_rule_file(tmp_path / "prometheus/rules/inferslice.rules.yml", promtool)
    assert ok, out
    tests = art.rule_tests
    tests["tests"] = [c for c in tests["tests"] if c["name"].startswith("batch:")]
    assert any("TTFT engine-side breach" in c["name"] for c in tests["tests"])
    path = tmp_path / "prometheus/tests/batch.test.yml"
    path.write_text(yaml.safe_dump(tests, width=10_000))
    ok, out = checks.run_rule_tests(path, promtool)
    assert ok, out[-4000:]
