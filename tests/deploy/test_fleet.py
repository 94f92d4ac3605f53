"""The production overlay's sharded form: Prometheus spec.shards keyed on the PoP, VictoriaMetrics
taking the recorded series, the API as a StatefulSet of diagnosis groups whose flags the CLI accepts."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from inferslice.cli import api as api_cli
from inferslice.collectors import recorded
from inferslice.deploy import fleet, platform, rbac, validate
from inferslice.topology import Topology

from .conftest import kubectl_or_skip


def _production(rendered_dir: Path) -> list[dict[str, Any]]:
    kubectl_or_skip()
    return validate.kustomize(rendered_dir / "overlays" / "production")


def _find(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def test_the_production_overlay_is_the_sharded_form(rendered_dir: Path) -> None:
    objs = _production(rendered_dir)
    assert not [o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "inferslice-api"]
    sts = _find(objs, "StatefulSet", "inferslice-api")
    prom = _find(objs, "Prometheus", "inferslice")
    assert sts["spec"]["replicas"] == prom["spec"]["shards"] == fleet.SHARDS
    args = sts["spec"]["template"]["spec"]["containers"][0]["args"]
    parser = argparse.ArgumentParser()
    api_cli.add_arguments(parser)
    parsed = parser.parse_args(args[1:])  # the CLI takes every flag the manifest passes
    assert (parsed.shard_groups, parsed.recorded) == (fleet.SHARDS, True)
    # $(NAME) is expanded by the kubelet from the container's env
    assert (parsed.shard_identity, parsed.prometheus_url) == ("$(POD_NAME)", "$(PROMETHEUS_URL)")
    env = {e["name"]: e for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["PROMETHEUS_URL"]["value"] == fleet.VM_URL  # the query layer over the shards
    assert sts["spec"]["template"]["spec"]["automountServiceAccountToken"] is True  # the Leases
    assert parsed.shard_peer_url.format(identity="inferslice-api-1").startswith(f"http://inferslice-api-1.{fleet.PODS_SERVICE}.")
    assert _find(objs, "Service", fleet.PODS_SERVICE)["spec"]["clusterIP"] == "None"
    assert validate.check_objects(objs) == []


def test_shards_remote_write_exactly_the_recorded_families(rendered_dir: Path) -> None:
    prom = _find(_production(rendered_dir), "Prometheus", "inferslice")
    (write,) = prom["spec"]["remoteWrite"]
    assert write["url"] == f"{fleet.VM_URL}/api/v1/write"
    keep = re.compile(write["writeRelabelConfigs"][0]["regex"])
    for fam in recorded.FAMILIES:
        assert keep.fullmatch(recorded.family_name(fam, 8.0))
    assert not keep.fullmatch(recorded.bucket_rates_name("inferslice_engine_time_to_first_token_seconds", 8.0))  # helpers stay in the shard
    assert not keep.fullmatch("inferslice_engine_time_to_first_token_seconds_bucket")


def test_the_exporter_is_sharded_by_its_pop_label(topology: Topology, rendered_dir: Path) -> None:
    pm = _find(_production(rendered_dir), "PodMonitor", "inferslice-exporter")
    (relabel,) = pm["spec"]["podMetricsEndpoints"][0]["relabelings"]
    # Prometheus's Kubernetes discovery turns the pod label inferslice.io/pop into this meta label.
    assert relabel == {"sourceLabels": ["__meta_kubernetes_pod_label_inferslice_io_pop"], "targetLabel": "__tmp_hash"}
    ds = next(o for o in platform.platform_objects(topology, "x: 1\n") if o["kind"] == "DaemonSet")
    assert "inferslice.io/pop" in ds["spec"]["template"]["metadata"]["labels"]


def test_only_the_sharded_api_holds_lease_verbs(rendered_dir: Path) -> None:
    objs = _production(rendered_dir)
    user = rbac.service_account_user(platform.PLATFORM_NS, "inferslice-api")
    for verb in ("get", "create", "update"):  # what the elector calls (release is an update)
        assert rbac.authorize(objs, user, verb, "coordination.k8s.io", "leases", platform.PLATFORM_NS, "inferslice-diagnosis-0")
    assert not rbac.authorize(objs, user, "delete", "coordination.k8s.io", "leases", platform.PLATFORM_NS, "inferslice-diagnosis-0")
    base = validate.kustomize(rendered_dir / "base") if kubectl_or_skip() else []
    assert not rbac.authorize(base, user, "get", "coordination.k8s.io", "leases", platform.PLATFORM_NS, "inferslice-diagnosis-0")
