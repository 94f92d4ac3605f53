"""The Alertmanager config: valid for amtool, routes each tier and severity to a webhook on the
diagnosis API, and the checked-in example matches what the generator writes."""

from __future__ import annotations

from pathlib import Path

import yaml

from inferslice.dashboards import checks
from inferslice.dashboards.alertmanager import DEFAULT_API_URL, alertmanager_config

from .conftest import API_URL, need_tool

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "alertmanager" / "alertmanager.yml"


def test_amtool_accepts_generated_and_example_configs(built):
    amtool = need_tool("amtool")
    for path in (built / "alertmanager/alertmanager.yml", EXAMPLE):
        ok, out = checks.check_alertmanager_config(path, amtool)
        assert ok, out


def test_checked_in_example_is_the_generated_default(topology):
    assert yaml.safe_load(EXAMPLE.read_text()) == alertmanager_config(topology, DEFAULT_API_URL)


def test_every_receiver_posts_to_the_api_webhook(artefacts):
    cfg = artefacts.alertmanager
    urls = {w["url"] for r in cfg["receivers"] for w in r["webhook_configs"]}
    assert urls == {f"{API_URL}/v1/alerts"}
    assert cfg["route"]["group_by"] == ["slice", "alertname"]
    assert all(w["send_resolved"] for r in cfg["receivers"] for w in r["webhook_configs"])


def test_routing_by_tier_and_severity(built):
    amtool = need_tool("amtool")
    path = built / "alertmanager/alertmanager.yml"

    def route(*labels: str) -> str:
        rc, out = checks.run_tool([amtool, "config", "routes", "test", f"--config.file={path}", *labels])
        assert rc == 0, out
        return [line for line in out.strip().splitlines() if not line.startswith("Warning:")][-1]

    assert route("slice=premium", "severity=page", "alertname=InferSliceTTFTAboveSLO") == "inferslice-premium-page"
    assert route("slice=free", "severity=ticket") == "inferslice-free-ticket"
    assert route("source=nvml", "severity=ticket", "alertname=InferSliceSourceDown") == "inferslice-ticket"
    assert route("alertname=Other") == "inferslice-default"
