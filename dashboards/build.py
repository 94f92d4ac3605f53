"""Write every generated artefact under one directory.

OUT/grafana/dashboards/<uid>.json                 dashboards (import or provision)
OUT/grafana/provisioning/dashboards/inferslice.yaml   file provider pointing at the folder above
OUT/grafana/provisioning/datasources/inferslice.yaml  Prometheus datasource with the fixed uid
OUT/prometheus/rules/inferslice.rules.yml         Prometheus rule file (rule_files:)
OUT/prometheus/tests/inferslice.rules.test.yml    `promtool test rules` unit tests of those rules
OUT/kubernetes/prometheusrule.yaml                the same groups as a PrometheusRule object
OUT/alertmanager/alertmanager.yml                 routes by tier and severity to the API webhook
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from inferslice.dashboards import alertmanager, boards, rules, ruletests
from inferslice.dashboards.panels import DATASOURCE_UID
from inferslice.topology import Topology

DEFAULT_PROMETHEUS_URL = "http://127.0.0.1:9090"


@dataclass(frozen=True)
class Artefacts:
    dashboards: list[dict[str, Any]]
    rule_file: dict[str, Any]
    rule_tests: dict[str, Any]
    prometheus_rule: dict[str, Any]
    alertmanager: dict[str, Any]
    datasources: dict[str, Any]
    providers: dict[str, Any]


@dataclass(frozen=True)
class Written:
    root: Path
    files: list[Path] = field(default_factory=list)


def datasource_provisioning(topology: Topology, prometheus_url: str) -> dict[str, Any]:
    return {
        "apiVersion": 1,
        "datasources": [
            {
                "name": "InferSlice Prometheus",
                "type": "prometheus",
                "uid": DATASOURCE_UID,
                "access": "proxy",
                "url": prometheus_url,
                "isDefault": True,
                "editable": False,
                # Lets $__rate_interval cover four of the testbed's scrapes.
                "jsonData": {"timeInterval": f"{topology.timing.scrape_interval_s:g}s"},
            }
        ],
    }


def dashboard_provisioning(dashboards_path: str) -> dict[str, Any]:
    return {
        "apiVersion": 1,
        "providers": [
            {
                "name": "inferslice",
                "folder": "InferSlice",
                "type": "file",
                "disableDeletion": False,
                "allowUiUpdates": False,
                "updateIntervalSeconds": 30,
                "options": {"path": dashboards_path, "foldersFromFilesStructure": False},
            }
        ],
    }


def generate(
    topology: Topology,
    api_url: str = alertmanager.DEFAULT_API_URL,
    prometheus_url: str = DEFAULT_PROMETHEUS_URL,
    dashboards_path: str = "/var/lib/grafana/dashboards/inferslice",
    namespace: str = "monitoring",
    hold_scale: float = 1.0,
    token_file: str | None = None,
) -> Artefacts:
    """``hold_scale`` shortens alert holds and Alertmanager grouping for tests (rule file and
    Alertmanager config only: the promtool unit tests and the PrometheusRule keep production holds).
    ``token_file``: where Alertmanager reads the API's bearer token for the webhook (see alertmanager.py)."""
    return Artefacts(
        dashboards=boards.all_dashboards(topology, api_url),
        rule_file=rules.rule_file(topology, api_url, hold_scale),
        rule_tests=ruletests.rule_tests(topology, ["../rules/inferslice.rules.yml"], api_url),
        prometheus_rule=rules.prometheus_rule(topology, api_url, namespace),
        alertmanager=alertmanager.alertmanager_config(topology, api_url, hold_scale, token_file),
        datasources=datasource_provisioning(topology, prometheus_url),
        providers=dashboard_provisioning(dashboards_path),
    )


def dump_yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, width=10_000, allow_unicode=True)


def write(out: Path, art: Artefacts, header: str = "") -> Written:
    """Write the artefacts; files are replaced, stale dashboards of removed tiers are deleted."""
    written = Written(out)
    prefix = f"# {header}\n" if header else ""

    def put(rel: str, text: str) -> None:
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.files.append(path)

    dash_dir = out / "grafana" / "dashboards"
    if dash_dir.is_dir():
        for old in dash_dir.glob("inferslice-*.json"):
            old.unlink()
    for dash in art.dashboards:
        put(f"grafana/dashboards/{dash['uid']}.json", json.dumps(dash, indent=2, sort_keys=True) + "\n")
    put("grafana/provisioning/dashboards/inferslice.yaml", prefix + dump_yaml(art.providers))
    put("grafana/provisioning/datasources/inferslice.yaml", prefix + dump_yaml(art.datasources))
    put("prometheus/rules/inferslice.rules.yml", prefix + dump_yaml(art.rule_file))
    put("prometheus/tests/inferslice.rules.test.yml", prefix + dump_yaml(art.rule_tests))
    put("kubernetes/prometheusrule.yaml", prefix + dump_yaml(art.prometheus_rule))
    put("alertmanager/alertmanager.yml", prefix + dump_yaml(art.alertmanager))
    return written
