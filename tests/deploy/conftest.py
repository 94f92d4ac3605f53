from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from inferslice.deploy import render
from inferslice.topology import Topology, default_topology_path, topology_from_yaml

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "deploy" / "kubernetes"


@pytest.fixture(scope="session")
def tiers_text() -> str:
    return default_topology_path().read_text()


@pytest.fixture(scope="session")
def topology(tiers_text: str) -> Topology:
    return topology_from_yaml(tiers_text)


@pytest.fixture(scope="session")
def tree(topology: Topology, tiers_text: str) -> render.Tree:
    return render.render(topology, tiers_text)


@pytest.fixture(scope="session")
def base_objects(topology: Topology, tiers_text: str) -> list[dict[str, Any]]:
    return [o for objs in render.base_objects(topology, tiers_text).values() for o in objs]


@pytest.fixture(scope="session")
def rendered_dir(tree: render.Tree, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("k8s")
    render.write(tree, out)
    return out


def kubectl_or_skip() -> str:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (with kustomize) is not on PATH; the machine image ships kubectl 1.32")
    return kubectl


def load_all(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
