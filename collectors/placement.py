"""Where a slice's replicas run and in what state: from the testbed registry, Ray Serve or Kubernetes.

Every source answers ``placement(slice) -> list[ReplicaPlacement]`` with states in the registry's
vocabulary (``starting`` | ``ready`` | ``stopping``). The parsers are pure functions over the JSON
each system returns; only the thin ``*Placement`` classes do I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import httpx
import yaml

from inferslice.common.registry import read_registry
from inferslice.errors import ParseError, SourceUnavailable


class ReplicaPlacement(NamedTuple):
    replica: str
    pop: str
    state: str  # starting | ready | stopping


class PlacementSource(Protocol):
    def placement(self, slice: str) -> list[ReplicaPlacement]: ...


def count_ready(placements: Sequence[ReplicaPlacement]) -> int:
    return sum(1 for p in placements if p.state == "ready")


# -- testbed registry ------------------------------------------------------------------------


class RegistryPlacement:
    """Reads the testbed's registry on every call (it changes as the fronts scale)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def placement(self, slice: str) -> list[ReplicaPlacement]:
        reg = read_registry(self.path)
        return [ReplicaPlacement(r.id, r.pop, r.state) for r in reg.replicas_of(slice)]


# -- Ray Serve (GET /api/serve/applications/) -------------------------------------------------

# Ray Serve ReplicaState -> registry vocabulary; UPDATING/RECOVERING replicas do not serve yet.
SERVE_REPLICA_STATES: dict[str, str] = {
    "STARTING": "starting",
    "UPDATING": "starting",
    "RECOVERING": "starting",
    "PENDING_MIGRATION": "stopping",
    "RUNNING": "ready",
    "STOPPING": "stopping",
}


@dataclass(frozen=True)
class ServeApp:
    name: str
    status: str  # RUNNING, DEPLOYING, UNHEALTHY, ...
    replicas: tuple[ReplicaPlacement, ...]
    target_replicas: int | None  # Serve's current target, summed over the app's deployments
    max_replicas: int | None  # the autoscaling ceiling, summed likewise; None when not autoscaled


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _sum_known(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def parse_serve_applications(body: Any, node_pops: Mapping[str, str] | None = None) -> dict[str, ServeApp]:
    """Ray Serve's ``ServeInstanceDetails`` JSON -> per-application replica placement.

    A replica's pop is ``node_pops[node_id]`` or ``node_pops[node_ip]``, else its node IP (Ray knows
    nodes, not PoPs; the deployment provides the mapping).
    """
    pops = node_pops or {}
    if not isinstance(body, dict) or not isinstance(body.get("applications", {}), dict):
        raise ParseError("serve applications: expected an object with 'applications'")
    out: dict[str, ServeApp] = {}
    try:
        for app_name, app in body.get("applications", {}).items():
            replicas: list[ReplicaPlacement] = []
            targets: list[int | None] = []
            ceilings: list[int | None] = []
            for dep_name, dep in (app.get("deployments") or {}).items():
                cfg = dep.get("deployment_config") or {}
                auto = cfg.get("autoscaling_config") or {}
                targets.append(_int_or_none(dep.get("target_num_replicas", cfg.get("num_replicas"))))
                ceilings.append(_int_or_none(auto.get("max_replicas")))
                for i, rep in enumerate(dep.get("replicas") or []):
                    node_id, node_ip = str(rep.get("node_id") or ""), str(rep.get("node_ip") or "")
                    pop = pops.get(node_id) or pops.get(node_ip) or node_ip or "unknown"
                    state = SERVE_REPLICA_STATES.get(str(rep.get("state", "")).upper(), "starting")
                    replicas.append(ReplicaPlacement(str(rep.get("replica_id") or f"{dep_name}-{i}"), pop, state))
            out[str(app_name)] = ServeApp(
                str(app_name), str(app.get("status", "UNKNOWN")), tuple(replicas), _sum_known(targets), _sum_known(ceilings)
            )
    except (AttributeError, TypeError, ValueError) as err:
        raise ParseError(f"serve applications: {err}") from None
    return out


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


@dataclass(frozen=True)
class WorkerGroup:
    name: str
    pop: str | None
    replicas: int | None  # desired workers of the group
    min_replicas: int | None
    max_replicas: int | None


@dataclass(frozen=True)
class RayServiceState:
    name: str
    service_status: str | None
    app_statuses: dict[str, str]
    deployment_statuses: dict[str, dict[str, str]]  # app -> deployment -> HEALTHY/UPDATING/UNHEALTHY
    ready_workers: int | None
    desired_workers: int | None
    worker_groups: tuple[WorkerGroup, ...]
    serve_replicas: dict[str, int | None]  # app -> num_replicas (fixed) from serveConfigV2
    serve_max_replicas: dict[str, int | None]  # app -> autoscaling max_replicas from serveConfigV2


def parse_rayservice(obj: Any, pop_label: str = "topology.kubernetes.io/zone") -> RayServiceState:
    """A ``ray.io/v1`` RayService object (as ``kubectl get -o json`` returns it) -> its serving state.

    RayService status reports app/deployment health and the cluster's worker counts, not where each
    Serve replica runs: pops come from each worker group's ``nodeSelector[pop_label]``.
    """
    if not isinstance(obj, dict):
        raise ParseError("rayservice: expected an object")
    try:
        meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        active = status.get("activeServiceStatus") or {}
        apps = active.get("applicationStatuses") or {}
        cluster = active.get("rayClusterStatus") or {}
        groups = []
        for g in (spec.get("rayClusterConfig") or {}).get("workerGroupSpecs") or []:
            selector = ((g.get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
            groups.append(
                WorkerGroup(
                    str(g.get("groupName")),
                    selector.get(pop_label),
                    _int_or_none(g.get("replicas")),
                    _int_or_none(g.get("minReplicas")),
                    _int_or_none(g.get("maxReplicas")),
                )
            )
        serve_cfg = yaml.safe_load(spec.get("serveConfigV2") or "") or {}
        fixed: dict[str, int | None] = {}
        ceiling: dict[str, int | None] = {}
        for app in serve_cfg.get("applications") or []:
            name = str(app.get("name", "default"))
            deps = app.get("deployments") or []
            fixed[name] = _sum_known([_int_or_none(d.get("num_replicas")) for d in deps])
            ceiling[name] = _sum_known([_int_or_none((d.get("autoscaling_config") or {}).get("max_replicas")) for d in deps])
        return RayServiceState(
            name=str(meta.get("name", "")),
            service_status=status.get("serviceStatus"),
            app_statuses={k: str(v.get("status")) for k, v in apps.items()},
            deployment_statuses={
                k: {d: str(dv.get("status")) for d, dv in (v.get("serveDeploymentStatuses") or {}).items()} for k, v in apps.items()
            },
            ready_workers=_int_or_none(cluster.get("readyWorkerReplicas")),
            desired_workers=_int_or_none(cluster.get("desiredWorkerReplicas")),
            worker_groups=tuple(groups),
            serve_replicas=fixed,
            serve_max_replicas=ceiling,
        )
    except (AttributeError, TypeError, ValueError, yaml.YAMLError) as err:
        raise ParseError(f"rayservice: {err}") from None


def placement_from_rayservice(obj: Any, pop_label: str = "topology.kubernetes.io/zone") -> list[ReplicaPlacement]:
    """Worker pods per group (``<group>-<i>``): the first ``readyWorkerReplicas`` are ready, the rest starting.

    An approximation by design: the status does not say which group's pods are the ready ones.
    """
    state = parse_rayservice(obj, pop_label)
    ready_left = state.ready_workers if state.ready_workers is not None else 0
    out: list[ReplicaPlacement] = []
    for g in state.worker_groups:
        for i in range(g.replicas or 0):
            out.append(ReplicaPlacement(f"{g.name}-{i}", g.pop or "unknown", "ready" if ready_left > 0 else "starting"))
            ready_left -= 1
    return out


class KubernetesPlacement:
    """Placement from RayService objects; ``get_rayservice(slice)`` does the fetching (kube client, kubectl, a file)."""

    def __init__(self, get_rayservice: Callable[[str], Any], pop_label: str = "topology.kubernetes.io/zone") -> None:
        self._get = get_rayservice
        self.pop_label = pop_label

    def placement(self, slice: str) -> list[ReplicaPlacement]:
        return placement_from_rayservice(self._get(slice), self.pop_label)
