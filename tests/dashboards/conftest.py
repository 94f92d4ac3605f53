"""Fixtures for the dashboards/rules tests: the default topology, a copy with a fourth tier, and
one build of every artefact (session-scoped: generation is pure, the tools only read)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from inferslice.dashboards import build
from inferslice.deploy.crds import crd_path
from inferslice.topology import Topology, default_topology_path, load_topology

API_URL = "http://api.test:8080"
CRD = crd_path("PrometheusRule")
FOURTH_TIER = {
    "name": "batch",
    "title": "Batch",
    "subnet": "10.204.0.0/24",
    "vni": 204,
    "gpu_quota": 1.0,
    "cpu_quota": 4,
    "replicas_max": 2,
    "slo_ttft_p99_s": 2.0,
    "attainment_objective": 0.9,
    "priority": 0,
    "placement": ["dublin/gpu1", "dublin/gpu1"],
}


def need_tool(name: str) -> str:
    path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if path is None:
        pytest.skip(f"{name} is not installed (Debian package {'prometheus' if name == 'promtool' else 'prometheus-alertmanager'})")
    return path


@pytest.fixture(scope="session")
def topology() -> Topology:
    return load_topology()


@pytest.fixture(scope="session")
def four_tier_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    doc = yaml.safe_load(default_topology_path().read_text())
    doc["tiers"].append(FOURTH_TIER)
    path = tmp_path_factory.mktemp("topo") / "four-tiers.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="session")
def four_tiers(four_tier_path: Path) -> Topology:
    return load_topology(four_tier_path)


@pytest.fixture(scope="session")
def artefacts(topology: Topology) -> build.Artefacts:
    return build.generate(topology, api_url=API_URL)


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory, artefacts: build.Artefacts) -> Path:
    out = tmp_path_factory.mktemp("build")
    build.write(out, artefacts)
    return out
