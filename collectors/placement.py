"""Where a slice's replicas run and in what state: from the testbed registry, Ray Serve or Kubernetes.

Every source answers ``placement(slice) -> list[ReplicaPlacement]`` (the vocabulary's one type) with
states in the registry's vocabulary (``starting`` | ``ready`` | ``stopping``). The parsers are the
shared layer's (``inferslice.common.placement``, which the actuators use too); only the thin
``*Placement`` classes here do I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import httpx

from inferslice.common.placement import (
    SERVE_REPLICA_STATES,
    RayServiceState,
    ServeApp,
    WorkerGroup,
    parse_rayservice,
    parse_serve_applications,
    placement_from_rayservice,
)
from inferslice.common.registry import read_registry
from inferslice.errors import ParseError, SourceUnavailable
from inferslice.placement import ReplicaPlacement, count_ready

__all__ = [
    "SERVE_REPLICA_STATES",
    "KubernetesPlacement",
    "PlacementSource",
    "RayServePlacement",
    "RayServiceState",
    "RegistryPlacement",
    "ReplicaPlacement",
    "ServeApp",
    "WorkerGroup",
    "count_ready",
    "parse_rayservice",
    "parse_serve_applications",
    "placement_from_rayservice",
]


class PlacementSource(Protocol):
    def placement(self, slice: str) -> list[ReplicaPlacement]: ...


# -- testbed registry ------------------------------------------------------------------------


class RegistryPlacement:
    """Reads the testbed's registry on every call (it changes as the fronts scale)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def placement(self, slice: str) -> list[ReplicaPlacement]:
        reg = read_registry(self.path)
        return [ReplicaPlacement(r.id, r.pop, r.gpu, r.state, r.gpu_share) for r in reg.replicas_of(slice)]


# -- Ray Serve (GET /api/serve/applications/) -------------------------------------------------

class RayServePlacement:
    """Placement from Ray Serve's dashboard API (default port 8265); one application per slice."""

    def __init__(
        self,
        base_url: str,
        app_for_slice: Mapping[str, str] | None = None,
        node_pops: Mapping[str, str] | None = None,
        timeout_s: float = 5.0,  # the dashboard answers from the controller's cache; slower means unhealthy
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.app_for_slice = dict(app_for_slice or {})
        self.node_pops = dict(node_pops or {})
        self._client = httpx.Client(base_url=base_url, timeout=timeout_s, transport=transport)

    def applications(self) -> dict[str, ServeApp]:
        try:
            resp = self._client.get("/api/serve/applications/")
            resp.raise_for_status()
            body = resp.json()
        except httpx.HTTPError as err:
            raise SourceUnavailable(f"ray serve: {type(err).__name__}: {err}") from None
        except ValueError as err:  # json.JSONDecodeError
            raise ParseError(f"ray serve: not JSON: {err}") from None
        return parse_serve_applications(body, self.node_pops)

    def placement(self, slice: str) -> list[ReplicaPlacement]:
        app = self.applications().get(self.app_for_slice.get(slice, slice))
        return list(app.replicas) if app else []


# -- Kubernetes (KubeRay RayService) ----------------------------------------------------------


class KubernetesPlacement:
    """Placement from RayService objects; ``get_rayservice(slice)`` does the fetching (kube client, kubectl, a file)."""

    def __init__(self, get_rayservice: Callable[[str], Any], pop_label: str = "topology.kubernetes.io/zone") -> None:
        self._get = get_rayservice
        self.pop_label = pop_label

    def placement(self, slice: str) -> list[ReplicaPlacement]:
        return placement_from_rayservice(self._get(slice), self.pop_label)
