"""The one placement parser: what each serving system says about its replicas -> ``ReplicaPlacement``.

Pure functions over the JSON each system returns; the I/O around them lives with whoever asks
(``collectors.placement``'s sources, the actuators in ``control.actuators``, the testbed's front
client). Every backend's replica states map onto the registry's vocabulary here and nowhere else:

- the testbed's tier front (``GET /admin/state``): ``pending``/``unhealthy`` do not serve yet;
- Ray Serve (``GET /api/serve/applications/``, ``ServeInstanceDetails``);
- KubeRay (a ``ray.io/v1`` RayService object) and its worker pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from inferslice.errors import ParseError
from inferslice.placement import READY, STARTING, STOPPING, ReplicaPlacement

# -- the testbed's tier front ---------------------------------------------------------------------

# The front's replica states -> registry vocabulary; a pending or unhealthy replica does not serve yet.
FRONT_REPLICA_STATES: dict[str, str] = {"pending": STARTING, "unhealthy": STARTING, "starting": STARTING, "ready": READY}


def placement_from_front(entry: Mapping[str, Any]) -> ReplicaPlacement:
    """One replica of the front's ``GET /admin/state`` (``{id, pop, gpu, state, gpu_share, ...}``)."""
    try:
        state = str(entry["state"])
        return ReplicaPlacement(
            str(entry["id"]),
            str(entry["pop"]),
            int(entry["gpu"]),
            FRONT_REPLICA_STATES.get(state, state),
            float(entry.get("gpu_share", 1.0)),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise ParseError(f"front replica: {err!r} in {dict(entry)}") from None


# -- Ray Serve (GET /api/serve/applications/) -------------------------------------------------------

# Ray Serve ReplicaState -> registry vocabulary; UPDATING/RECOVERING replicas do not serve yet.
SERVE_REPLICA_STATES: dict[str, str] = {
    "STARTING": STARTING,
    "UPDATING": STARTING,
    "RECOVERING": STARTING,
    "PENDING_MIGRATION": STOPPING,
    "RUNNING": READY,
    "STOPPING": STOPPING,
}


@dataclass(frozen=True)
class ServeApp:
    name: str
    status: str  # RUNNING, DEPLOYING, UNHEALTHY, ...
    replicas: tuple[ReplicaPlacement, ...]
    target_replicas: int | None  # Serve's current target, summed over the app's deployments
    max_replicas: int | None  # the autoscaling ceiling, summed likewise; None when not autoscaled
    fixed: bool = False  # the first deployment is pinned (num_replicas, no autoscaling_config): someone outside Serve owns the count


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _sum_known(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def serve_app(name: str, app: Mapping[str, Any], node_pops: Mapping[str, str] | None = None) -> ServeApp:
    """One application of ``ServeInstanceDetails``. A replica's pop is ``node_pops[node_id]`` or
    ``node_pops[node_ip]``, else its node IP (Ray knows nodes, not PoPs; the deployment provides the mapping)."""
    pops = node_pops or {}
    try:
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
                state = SERVE_REPLICA_STATES.get(str(rep.get("state", "")).upper(), STARTING)
                replicas.append(ReplicaPlacement(str(rep.get("replica_id") or f"{dep_name}-{i}"), pop, 0, state))
        declared = (app.get("deployed_app_config") or {}).get("deployments") or [{}]
        first = declared[0] if isinstance(declared[0], Mapping) else {}
        return ServeApp(
            str(name),
            str(app.get("status", "UNKNOWN")),
            tuple(replicas),
            _sum_known(targets),
            _sum_known(ceilings),
            "num_replicas" in first and "autoscaling_config" not in first,
        )
    except (AttributeError, TypeError, ValueError) as err:
        raise ParseError(f"serve application {name!r}: {err}") from None


def parse_serve_applications(body: Any, node_pops: Mapping[str, str] | None = None) -> dict[str, ServeApp]:
    """Ray Serve's ``ServeInstanceDetails`` JSON -> per-application replica placement."""
    if not isinstance(body, dict) or not isinstance(body.get("applications", {}), dict):
        raise ParseError("serve applications: expected an object with 'applications'")
    apps = body.get("applications", {})
    try:
        return {str(name): serve_app(str(name), app, node_pops) for name, app in apps.items()}
    except AttributeError as err:
        raise ParseError(f"serve applications: {err}") from None


# -- Kubernetes (KubeRay RayService, worker pods) ---------------------------------------------------

DEFAULT_POP_LABEL = "topology.kubernetes.io/zone"


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


def parse_rayservice(obj: Any, pop_label: str = DEFAULT_POP_LABEL) -> RayServiceState:
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


def placement_from_rayservice(obj: Any, pop_label: str = DEFAULT_POP_LABEL) -> list[ReplicaPlacement]:
    """Worker pods per group (``<group>-<i>``): the first ``readyWorkerReplicas`` are ready, the rest starting.

    An approximation by design: the status does not say which group's pods are the ready ones.
    """
    state = parse_rayservice(obj, pop_label)
    ready_left = state.ready_workers if state.ready_workers is not None else 0
    out: list[ReplicaPlacement] = []
    for g in state.worker_groups:
        for i in range(g.replicas or 0):
            out.append(ReplicaPlacement(f"{g.name}-{i}", g.pop or "unknown", 0, READY if ready_left > 0 else STARTING))
            ready_left -= 1
    return out


def pod_ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def placement_from_pod(pod: Mapping[str, Any], pop_label: str = DEFAULT_POP_LABEL) -> ReplicaPlacement:
    """A worker pod: stopping once deleted, ready with its Ready condition, else starting; its PoP from ``pop_label``."""
    meta = pod.get("metadata") or {}
    state = STOPPING if meta.get("deletionTimestamp") is not None else READY if pod_ready(pod) else STARTING
    # The GPU index is Run:ai's choice and not visible here; gpu 0 stands for "a GPU of that PoP".
    return ReplicaPlacement(str(meta.get("name", "")), str((meta.get("labels") or {}).get(pop_label, "")), 0, state)
