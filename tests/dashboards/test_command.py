"""``inferslice dashboards build|check`` end to end through the CLI entry point."""

from __future__ import annotations

import json

import yaml

from inferslice.cli import main
from inferslice.dashboards.panels import DATASOURCE_UID

from .conftest import need_tool


def test_build_writes_every_artefact_with_the_api_url(tmp_path, capsys):
    need_tool("promtool")
    need_tool("amtool")
    out = tmp_path / "out"
    rc = main(["dashboards", "build", "--out", str(out), "--api-url", "http://diag.example:9000", "--check"])
    assert rc == 0, capsys.readouterr().err
    names = sorted(p.name for p in (out / "grafana/dashboards").iterdir())
    assert names == sorted(f"inferslice-{n}.json" for n in ("overview", "tier-free", "tier-standard", "tier-premium", "network", "control"))
    ds = yaml.safe_load((out / "grafana/provisioning/datasources/inferslice.yaml").read_text())
    assert ds["datasources"][0]["uid"] == DATASOURCE_UID and ds["datasources"][0]["jsonData"]["timeInterval"] == "2s"
    prov = yaml.safe_load((out / "grafana/provisioning/dashboards/inferslice.yaml").read_text())
    assert prov["providers"][0]["options"]["path"] == str((out / "grafana/dashboards").resolve())
    am = yaml.safe_load((out / "alertmanager/alertmanager.yml").read_text())
    assert am["receivers"][0]["webhook_configs"][0]["url"] == "http://diag.example:9000/v1/alerts"
    rules_text = (out / "prometheus/rules/inferslice.rules.yml").read_text()
    assert "http://diag.example:9000/v1/slices/{{ $labels.slice }}" in rules_text
    tier = json.loads((out / "grafana/dashboards/inferslice-tier-free.json").read_text())
    assert "http://diag.example:9000/v1/slices/free" in json.dumps(tier)
    assert (out / "kubernetes/prometheusrule.yaml").exists() and (out / "prometheus/tests/inferslice.rules.test.yml").exists()


def test_rebuild_with_fewer_tiers_removes_stale_dashboards(tmp_path, four_tier_path):
    out = tmp_path / "out"
    assert main(["dashboards", "build", "--out", str(out), "--topology", str(four_tier_path)]) == 0
    assert (out / "grafana/dashboards/inferslice-tier-batch.json").exists()
    assert main(["dashboards", "build", "--out", str(out)]) == 0
    assert not (out / "grafana/dashboards/inferslice-tier-batch.json").exists()


def test_check_action(capsys):
    need_tool("promtool")
    assert main(["dashboards", "check"]) == 0
    assert "6 dashboards" in capsys.readouterr().out


def test_bad_topology_is_a_config_error(tmp_path, capsys):
    bad = tmp_path / "t.yaml"
    bad.write_text("tiers: []\n")
    assert main(["dashboards", "check", "--topology", str(bad)]) == 1
    assert "inferslice dashboards:" in capsys.readouterr().err
