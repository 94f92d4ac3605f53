"""A cluster in the apiserver stand-in, seeded from the rendered manifests as KubeRay and the kubelet
would leave it: each tier's RayService (status naming its active RayCluster), that RayCluster, a
head pod and one Ready worker pod per group replica."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from inferslice.deploy import apiserver, render
from inferslice.topology import Topology, load_topology

TOKEN = "test-token"


@pytest.fixture(scope="session")
def topology() -> Topology:
    return load_topology()


def cluster_name(tier: str) -> str:
    return f"{tier}-raycluster-x7k2p"


def pod(
    name: str, ns: str, cluster: str, node_type: str, group: str | None, template: dict[str, Any], ready: bool = True
) -> dict[str, Any]:
    labels = {**template.get("metadata", {}).get("labels", {}), "ray.io/cluster": cluster, "ray.io/node-type": node_type}
    if group:
        labels["ray.io/group"] = group
    spec = copy.deepcopy(template["spec"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": labels,
            "annotations": dict(template.get("metadata", {}).get("annotations", {})),
        },
        "spec": spec,
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def seed(store: apiserver.Store, topology: Topology) -> None:
    objects = [o for objs in render.base_objects(topology, "").values() for o in objs]
    for rs in (o for o in objects if o["kind"] == "RayService"):
        tier, ns = rs["metadata"]["name"], rs["metadata"]["namespace"]
        name = cluster_name(tier)
        store.seed({**rs, "status": {"activeServiceStatus": {"rayClusterName": name}}})
        rc = {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {"name": name, "namespace": ns},
            "spec": copy.deepcopy(rs["spec"]["rayClusterConfig"]),
        }
        store.seed(rc)
        store.seed(pod(f"{name}-head", ns, name, "head", None, rc["spec"]["headGroupSpec"]["template"]))
        for g in rc["spec"]["workerGroupSpecs"]:
            for i in range(g["replicas"]):
                store.seed(pod(f"{name}-{g['groupName']}-w{i}", ns, name, "worker", g["groupName"], g["template"]))
    for cr in (o for o in objects if o["kind"] == "InferSliceTier"):
        store.seed(cr)


@pytest.fixture
def server(topology: Topology) -> Iterator[apiserver.StandIn]:
    with apiserver.serve(TOKEN) as srv:
        seed(srv.store, topology)
        srv.store.calls.clear()
        srv.store.writes.clear()
        yield srv


def api_client(url: str, token: str = TOKEN) -> Any:
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = url
    cfg.api_key = {"BearerToken": token}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    cfg.retries = False  # as `inferslice control` configures it: a request timeout is the whole wait
    return client.ApiClient(cfg)


@pytest.fixture
def api(server: apiserver.StandIn) -> Any:
    return api_client(server.url)
