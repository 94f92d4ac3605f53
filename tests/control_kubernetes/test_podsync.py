"""pods-sync: this node's pods into the file the exporter reads, with only the exporter's permission."""

from __future__ import annotations

import json
from pathlib import Path

from inferslice.deploy import apiserver, podsync, rbac
from inferslice.exporters.network.kube import pod_items

from .conftest import api_client


def test_pods_of_one_node_are_written_for_the_exporter(server: apiserver.StandIn, tmp_path: Path) -> None:
    pods = apiserver._resource("", "v1", "pods")
    listing = server.store.list(pods, None)["items"]
    assert len(listing) > 2
    on_node = listing[:2]
    for p in on_node:
        p["spec"]["nodeName"] = "gpu-node-1"
        server.store.write(pods, p["metadata"]["namespace"], p["metadata"]["name"], p, False, None)
    server.store.calls.clear()
    out = tmp_path / "pods.json"
    n = podsync.sync_once(podsync.kubernetes_lister(api_client(server.url)), "gpu-node-1", out)
    assert n == 2
    items = pod_items(json.loads(out.read_text()))
    assert sorted(p["metadata"]["name"] for p in items) == sorted(p["metadata"]["name"] for p in on_node)
    used = {(c.group, c.resource, c.verb, c.namespace) for c in server.store.calls}
    declared = {(p.api_group, p.resource, v, None) for p in rbac.PERMISSIONS if p.component == rbac.Component.EXPORTER for v in p.verbs}
    assert used == declared
