"""Grafana-free structural checks of the generated dashboards, and proof that the checks bite."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from inferslice import metric_names as m
from inferslice.dashboards import boards, checks
from inferslice.dashboards.panels import DATASOURCE_UID


def test_generated_dashboards_have_no_structural_problems(artefacts):
    assert checks.dashboards_problems(artefacts.dashboards) == []


def test_one_dashboard_per_tier_plus_overview_network_control(artefacts, topology):
    uids = [d["uid"] for d in artefacts.dashboards]
    assert uids == [
        "inferslice-overview",
        *(f"inferslice-tier-{t}" for t in topology.tier_names),
        "inferslice-network",
        "inferslice-control",
    ]
    assert len(set(uids)) == len(uids)


def test_uids_are_stable_across_builds(artefacts, topology):
    again = boards.all_dashboards(topology, "http://api.test:8080")
    assert again == artefacts.dashboards


def _dash(artefacts, uid: str) -> dict[str, Any]:
    return next(d for d in artefacts.dashboards if d["uid"] == uid)


def _exprs(dash: dict[str, Any]) -> str:
    return "\n".join(q.expr for q in checks.iter_queries(dash))


def test_overview_reads_the_contract_metrics(artefacts):
    text = _exprs(_dash(artefacts, "inferslice-overview"))
    for name in (
        m.ENGINE_TTFT + "_bucket",
        m.CLIENT_TTFT + "_bucket",
        m.SLO_TTFT_GOOD,
        m.DIAGNOSIS_REGIME,
        m.SLICE_REPLICAS,
        m.SLICE_REPLICAS_MAX,
        m.LINK_CAP_BPS,
        m.LINK_RECEIVE_BYTES,
        m.CONTROL_ACTIONS,
        m.SLO_TTFT_THRESHOLD,
    ):
        assert name in text, name
    annotations = _dash(artefacts, "inferslice-overview")["annotations"]["list"]
    assert any(m.CONTROL_ACTIONS in a["expr"] and a["datasource"]["uid"] == DATASOURCE_UID for a in annotations)


def test_tier_dashboard_covers_every_layer_and_links_the_api(artefacts):
    dash = _dash(artefacts, "inferslice-tier-premium")
    text = _exprs(dash)
    for name in (
        m.ENGINE_TPOT,
        m.ENGINE_ITL,
        m.CLIENT_TPOT,
        m.ENGINE_GENERATION_TOKENS,
        m.ENGINE_WAITING,
        m.SERVE_QUEUED,
        m.ENGINE_QUEUE_TIME,
        m.ENGINE_KV_CACHE_USAGE,
        m.ENGINE_PREEMPTIONS,
        m.SERVE_TARGET_REPLICAS,
        m.GPU_ALLOCATED_FRACTION,
        m.SLICE_GPU_QUOTA,
        m.LINK_TRANSMIT_BYTES,
        m.POP_RTT,
        m.DIAGNOSIS_CONFIDENCE,
        m.DIAGNOSIS_REQUESTS,
    ):
        assert name in text, name
    assert 'slice="premium"' in text and "$slice" not in text
    urls = [link["url"] for p in checks.iter_panels(dash) for link in p.get("links") or []] + [link["url"] for link in dash["links"]]
    assert "http://api.test:8080/v1/slices/premium" in urls
    evidence = next(p for p in checks.iter_panels(dash) if p["type"] == "text")
    assert "http://api.test:8080/v1/slices/premium" in evidence["options"]["content"]


def test_units_are_set_per_panel_kind(artefacts):
    units = {
        p["title"]: p["fieldConfig"]["defaults"]["unit"]
        for d in artefacts.dashboards
        for p in checks.iter_panels(d)
        if p["type"] not in checks.NO_QUERY_TYPES
    }
    assert units["P99 TTFT against the SLO"] == "s"
    assert units["Client-edge caps against demand"] == "bps"
    assert units["Goodput (requests meeting the TTFT SLO)"] == "reqps"
    assert units["SLO attainment"] == "percentunit"


def test_network_and_control_dashboards(artefacts):
    net = _exprs(_dash(artefacts, "inferslice-network"))
    for name in (m.LINK_RECEIVE_DROPS, m.HTB_OVERLIMITS, m.HTB_BACKLOG_BYTES, m.TUNNEL_RECEIVE_BYTES, m.POP_RTT):
        assert name in net
    matrix = next(p for p in checks.iter_panels(_dash(artefacts, "inferslice-network")) if "matrix" in p["title"])
    assert matrix["transformations"][0]["id"] == "groupingToMatrix"
    ctl = _exprs(_dash(artefacts, "inferslice-control"))
    for outcome in ("pending", "applied", "effective", "insufficient", "ineffective"):  # each verdict as such
        assert f'outcome="{outcome}"' in ctl


# -- the checks catch what they claim to ---------------------------------------------------------
def _first_query_panel(dash: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in dash["panels"] if p["type"] not in checks.NO_QUERY_TYPES)


def _break(dash: dict[str, Any], how: str) -> None:
    panels = [p for p in dash["panels"] if p["type"] not in checks.NO_QUERY_TYPES]
    if how == "duplicate id":
        panels[1]["id"] = panels[0]["id"]
    elif how == "too wide":
        panels[0]["gridPos"]["x"] = 20
    elif how == "overlap":
        panels[1]["gridPos"] = dict(panels[0]["gridPos"], x=panels[0]["gridPos"]["x"] + 1)
    elif how == "wrong datasource":
        panels[0]["targets"][0]["datasource"] = {"type": "prometheus", "uid": "other"}
    elif how == "no unit":
        panels[0]["fieldConfig"]["defaults"]["unit"] = ""
    elif how == "undefined variable":
        panels[0]["targets"][0]["expr"] += ' and on() vector(1) unless absent(up{job="$nosuch"})'
    elif how == "unused variable":
        dash["templating"]["list"].append(dict(dash["templating"]["list"][0], name="orphan"))


@pytest.mark.parametrize(
    ("how", "fragment"),
    [
        ("duplicate id", "duplicated"),
        ("too wide", "24-column"),
        ("overlap", "overlaps"),
        ("wrong datasource", "datasource"),
        ("no unit", "no unit"),
        ("undefined variable", "$nosuch is used but not defined"),
        ("unused variable", "$orphan is defined but"),
    ],
)
def test_checks_catch_broken_dashboards(artefacts, how, fragment):
    dash = copy.deepcopy(next(d for d in artefacts.dashboards if d["uid"] == "inferslice-overview"))
    _break(dash, how)
    problems = checks.dashboard_problems(dash)
    assert any(fragment in p for p in problems), problems


def test_duplicate_uid_across_dashboards_is_reported(artefacts):
    dashes = copy.deepcopy(artefacts.dashboards)
    dashes[1]["uid"] = dashes[0]["uid"]
    assert any("more than one dashboard" in p for p in checks.dashboards_problems(dashes))


def test_variables_are_defined_and_used(artefacts):
    for dash in artefacts.dashboards:
        defined = {v["name"] for v in dash["templating"]["list"]}
        used = set().union(*(checks.variables_in(q.expr) for q in checks.iter_queries(dash)))
        assert defined <= used and {u for u in used if not u.startswith("__")} <= defined, dash["uid"]
    assert {v["name"] for v in next(d for d in artefacts.dashboards if d["uid"] == "inferslice-overview")["templating"]["list"]} == {
        "slice",
        "pop",
    }
