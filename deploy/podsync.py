"""``inferslice deploy pods-sync``: keep a file of this node's pods for the exporter.

The exporter maps OVS ports, subnets, caps and GPU fractions from a ``kubectl get pods -o json``
document (``pods_file``); on Kubernetes this sidecar writes it: one list call per interval,
field-selected to the node (``spec.nodeName``), written atomically so the exporter never reads a
half-written file. Listing pods is the only permission it uses (``rbac.PERMISSIONS``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from inferslice.common.files import atomic_write_text
from inferslice.errors import RetryableError

log = logging.getLogger(__name__)

PodLister = Callable[[str], dict[str, Any]]  # node name -> a v1 PodList document


def kubernetes_lister(api_client: Any = None) -> PodLister:
    """A lister with the ``kubernetes`` client; by default the in-cluster ServiceAccount."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    if api_client is None:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
        api_client = client.ApiClient()
    core = client.CoreV1Api(api_client)

    def list_node_pods(node: str) -> dict[str, Any]:
        try:
            result = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}", _preload_content=False)
        except (ApiException, HTTPError) as err:
            raise RetryableError(f"listing pods of node {node}: {err}") from err
        doc: dict[str, Any] = json.loads(result.data)  # type: ignore[attr-defined]  # _preload_content=False: the raw response
        return doc

    return list_node_pods


def sync_once(lister: PodLister, node: str, out: Path) -> int:
    doc = lister(node)
    items = doc.get("items", [])
    atomic_write_text(out, json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return len(items)


def run(lister: PodLister, node: str, out: Path, interval_s: float, stop: Callable[[], bool] = lambda: False) -> None:
    while not stop():
        try:
            sync_once(lister, node, out)
        except (RetryableError, OSError) as err:  # a failed list keeps the last file; the exporter reads it again
            log.warning("pods-sync: list failed: %s", err)
        time.sleep(interval_s)
