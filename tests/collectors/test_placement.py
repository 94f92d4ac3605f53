"""Placement sources: testbed registry, Ray Serve's REST API, KubeRay RayService status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import yaml

from inferslice.collectors import (
    KubernetesPlacement,
    RayServePlacement,
    RegistryPlacement,
    ReplicaPlacement,
    count_ready,
    parse_rayservice,
    parse_serve_applications,
)
from inferslice.common.registry import Registry, ReplicaEntry, write_registry, write_replicas_fragment
from inferslice.deploy.crds import crd_path
from inferslice.errors import ParseError, SourceUnavailable


def _replica(rid: str, tier: str, pop: str, state: str = "ready") -> ReplicaEntry:
    return ReplicaEntry(id=rid, tier=tier, pop=pop, gpu=0, gpu_fraction=0.5, gpu_share=1.0, url="http://x", state=state)


def test_registry_placement_merges_fragments(tmp_path: Path) -> None:
    src = RegistryPlacement(tmp_path)
    with pytest.raises(SourceUnavailable):
        src.placement("premium")
    write_registry(Registry(topology_path="t.yaml", state_dir=str(tmp_path), replicas=(_replica("free-0", "free", "bristol"),)), tmp_path)
    write_replicas_fragment(
        tmp_path, "premium", [_replica("premium-0", "premium", "bristol"), _replica("premium-1", "premium", "london", "starting")]
    )
    got = src.placement("premium")
    assert got == [ReplicaPlacement("premium-0", "bristol", state="ready"), ReplicaPlacement("premium-1", "london", state="starting")]
    assert count_ready(got) == 1
    assert src.placement("free") == [ReplicaPlacement("free-0", "bristol", state="ready")]


SERVE_BODY: dict[str, Any] = {
    "controller_info": {"node_id": "n0"},
    "proxy_location": "EveryNode",
    "applications": {
        "premium": {
            "name": "premium",
            "route_prefix": "/premium",
            "status": "RUNNING",
            "message": "",
            "deployments": {
                "LLMServer": {
                    "name": "LLMServer",
                    "status": "UPSCALING",
                    "target_num_replicas": 3,
                    "deployment_config": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 6}},
                    "replicas": [
                        {"replica_id": "r1", "state": "RUNNING", "node_id": "n1", "node_ip": "10.0.0.1", "pid": 11},
                        {"replica_id": "r2", "state": "RUNNING", "node_id": "n2", "node_ip": "10.0.0.2", "pid": 12},
                        {"replica_id": "r3", "state": "STARTING", "node_id": "n3", "node_ip": "10.0.0.3", "pid": None},
                    ],
                },
                "Router": {"name": "Router", "status": "HEALTHY", "deployment_config": {"num_replicas": 1}, "replicas": []},
            },
        },
        "free": {"name": "free", "status": "DEPLOYING", "deployments": {}},
    },
}


def test_parse_serve_applications() -> None:
    apps = parse_serve_applications(SERVE_BODY, node_pops={"n1": "bristol", "10.0.0.2": "london"})
    premium = apps["premium"]
    assert premium.status == "RUNNING" and premium.target_replicas == 4 and premium.max_replicas == 6
    assert premium.replicas == (
        ReplicaPlacement("r1", "bristol", state="ready"),
        ReplicaPlacement("r2", "london", state="ready"),
        ReplicaPlacement("r3", "10.0.0.3", state="starting"),  # unmapped node: its IP
    )
    assert apps["free"].replicas == () and apps["free"].max_replicas is None
    with pytest.raises(ParseError):
        parse_serve_applications({"applications": {"x": {"deployments": {"d": {"replicas": "oops"}}}}})
    with pytest.raises(ParseError):
        parse_serve_applications([])


def test_ray_serve_placement_over_http() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/serve/applications/"
        return httpx.Response(200, json=SERVE_BODY)

    src = RayServePlacement("http://ray:8265", app_for_slice={"gold": "premium"}, transport=httpx.MockTransport(handler))
    assert count_ready(src.placement("gold")) == 2
    assert src.placement("nonexistent") == []
    down = RayServePlacement("http://ray:8265", transport=httpx.MockTransport(lambda r: httpx.Response(503)))
    with pytest.raises(SourceUnavailable):
        down.placement("premium")


def _rayservice() -> dict[str, Any]:
    serve_config = {
        "applications": [
            {
                "name": "premium",
                "import_path": "serve_llm:app",
                "deployments": [{"name": "LLMServer", "autoscaling_config": {"min_replicas": 1, "max_replicas": 6}}],
            }
        ]
    }
    worker = {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.60.0"}]}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "premium", "namespace": "inferslice"},
        "spec": {
            "serveConfigV2": yaml.safe_dump(serve_config),
            "rayClusterConfig": {
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0"}]}},
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "bristol",
                        "replicas": 2,
                        "minReplicas": 1,
                        "maxReplicas": 3,
                        "rayStartParams": {},
                        "template": {"spec": {**worker, "nodeSelector": {"topology.kubernetes.io/zone": "bristol"}}},
                    },
                    {
                        "groupName": "london",
                        "replicas": 1,
                        "minReplicas": 0,
                        "maxReplicas": 3,
                        "rayStartParams": {},
                        "template": {"spec": {**worker, "nodeSelector": {"topology.kubernetes.io/zone": "london"}}},
                    },
                ],
            },
        },
        "status": {
            "serviceStatus": "Running",
            "activeServiceStatus": {
                "rayClusterName": "premium-raycluster-abcde",
                "applicationStatuses": {
                    "premium": {"status": "RUNNING", "serveDeploymentStatuses": {"LLMServer": {"status": "UPSCALING"}}}
                },
                "rayClusterStatus": {"readyWorkerReplicas": 2, "desiredWorkerReplicas": 3, "availableWorkerReplicas": 2},
            },
        },
    }


def test_rayservice_fixture_is_valid_against_the_crd() -> None:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the CRD is 1 MB: the C loader is ~10x faster
    crd = yaml.load(crd_path("RayService").read_text(), Loader=loader)
    schema = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]
    # a Validator directly: jsonschema.validate() would first check the 1 MB schema itself (seconds)
    jsonschema.Draft7Validator(schema).validate(_rayservice())


def test_parse_rayservice_and_placement() -> None:
    obj = _rayservice()
    state = parse_rayservice(obj)
    assert state.app_statuses == {"premium": "RUNNING"}
    assert state.deployment_statuses["premium"]["LLMServer"] == "UPSCALING"
    assert state.ready_workers == 2 and state.desired_workers == 3
    assert state.serve_max_replicas == {"premium": 6} and state.serve_replicas == {"premium": None}
    got = KubernetesPlacement(lambda slice: obj).placement("premium")
    assert got == [
        ReplicaPlacement("bristol-0", "bristol", state="ready"),
        ReplicaPlacement("bristol-1", "bristol", state="ready"),
        ReplicaPlacement("london-0", "london", state="starting"),
    ]
    with pytest.raises(ParseError):
        parse_rayservice({"spec": {"serveConfigV2": "applications: [unclosed"}})


def test_one_parser_for_every_backend_maps_states_onto_the_registry_vocabulary() -> None:
    """The actuators read placements through the same parser as the collectors (inferslice.common.placement)."""
    from inferslice.common.placement import placement_from_front, placement_from_pod, serve_app

    front = {"id": "premium-1", "pop": "dublin", "gpu": 1, "state": "pending", "gpu_share": 0.35, "in_flight": 2}
    assert placement_from_front(front) == ReplicaPlacement("premium-1", "dublin", 1, "starting", 0.35)
    assert placement_from_front({**front, "state": "unhealthy"}).state == "starting"
    assert placement_from_front({**front, "state": "stopping"}).slot == "dublin/gpu1"
    with pytest.raises(ParseError):
        placement_from_front({"id": "x", "pop": "bristol"})  # no GPU index: refused, not guessed
    pod = {
        "metadata": {"name": "w-0", "labels": {"topology.kubernetes.io/zone": "london"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    assert placement_from_pod(pod) == ReplicaPlacement("w-0", "london", 0, "ready")
    assert placement_from_pod({**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}).state == "stopping"
    assert placement_from_pod({"metadata": {"name": "w-1"}, "status": {}}).state == "starting"
    pinned = {"name": "free", "deployed_app_config": {"deployments": [{"name": "LLMServer", "num_replicas": 2}]}, "deployments": {}}
    assert serve_app("free", pinned).fixed and not serve_app("premium", SERVE_BODY["applications"]["premium"]).fixed
