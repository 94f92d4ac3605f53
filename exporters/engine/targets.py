"""Where the vLLM replicas and the serving fronts are: four ways to find them.

- a static list from the config;
- the testbed registry (``inferslice.common.registry``): replicas with tier/pop/url/state, fronts per tier;
- Kubernetes Endpoints/EndpointSlices by label: ``targets_from_endpoints`` is pure (JSON in,
  targets out); the live read sits behind an injectable lister (``kubectl_lister`` by default:
  no kube-apiserver is reachable here, so the live path is untested on this machine);
- Ray Serve's ``GET :8265/api/serve/applications/``: ``replicas_from_serve_applications`` is
  pure; the fetch is injectable. Under Ray every node's metrics agent serves all its replicas'
  ``ray_vllm_*`` series, told apart by ``ReplicaId``, so a Ray target is (node URL, replica id).
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from inferslice.common.registry import read_registry
from inferslice.errors import ParseError, SourceUnavailable

DEFAULT_METRICS_PATH = "/metrics"


@dataclass(frozen=True)
class Target:
    """One vLLM replica to scrape."""

    url: str  # the full metrics URL
    slice: str
    pop: str = ""
    replica: str = ""
    state: str = "ready"  # starting | ready | stopping; starting replicas are not scraped
    ray_replica_id: str | None = None  # set when ``url`` is a Ray node agent serving many replicas

    @property
    def key(self) -> str:
        return f"{self.replica}|{self.url}|{self.ray_replica_id or ''}"


@dataclass(frozen=True)
class FrontTarget:
    """A Ray-Serve-like router whose ``ray_serve_*`` metrics describe a slice's admission queue."""

    url: str
    slice: str | None = None  # None: take the slice from each sample's ``application`` label
    pop: str = ""


@dataclass(frozen=True)
class Discovered:
    replicas: tuple[Target, ...] = ()
    fronts: tuple[FrontTarget, ...] = ()


class Discovery(Protocol):
    def discover(self) -> Discovered: ...


def metrics_url(url: str, path: str = DEFAULT_METRICS_PATH) -> str:
    """A base URL gets the metrics path; a URL that already names a path is kept."""
    parts = urlsplit(url)
    if parts.path in ("", "/"):
        return url.rstrip("/") + path
    return url


def _host(ip: str) -> str:
    try:
        return f"[{ip}]" if ipaddress.ip_address(ip).version == 6 else ip
    except ValueError:
        return ip  # a hostname


# -- static -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class StaticDiscovery:
    replicas: tuple[Target, ...] = ()
    fronts: tuple[FrontTarget, ...] = ()

    def discover(self) -> Discovered:
        return Discovered(self.replicas, self.fronts)


# -- testbed registry -------------------------------------------------------------------------
@dataclass(frozen=True)
class RegistryDiscovery:
    path: str
    metrics_path: str = DEFAULT_METRICS_PATH

    def discover(self) -> Discovered:
        reg = read_registry(self.path)  # SourceUnavailable when the testbed is down
        replicas = tuple(
            Target(url=r.metrics_url or metrics_url(r.url, self.metrics_path), slice=r.tier, pop=r.pop, replica=r.id,
                   state=r.state, ray_replica_id=r.ray_replica_id)
            for r in reg.replicas
        )
        # A Ray Serve front's metrics URL is the node agent's, shared by every Ray tier: one target whose
        # slices come from the samples' application label (slice None), scraped once.
        fronts = tuple(
            FrontTarget(url=f.metrics_url, slice=None) if f.metrics_url
            else FrontTarget(url=metrics_url(f.url, self.metrics_path), slice=f.tier)
            for f in reg.fronts
        )  # fmt: skip
        return Discovered(replicas, fronts)


# -- Kubernetes -------------------------------------------------------------------------------
def _slice_of(labels: Mapping[str, str], label_to_slice: Mapping[str, str], slice_label: str | None) -> str | None:
    for selector, slice_ in label_to_slice.items():
        key, eq, value = selector.partition("=")
        if key in labels and (not eq or labels[key] == value):
            return slice_
    if slice_label is not None and labels.get(slice_label):
        return labels[slice_label]
    return None


def _pick_port(ports: Sequence[Any], port: int | str | None) -> int | None:
    if isinstance(port, int):
        return port
    for p in ports:
        if not isinstance(p, dict):
            continue
        if port is None or p.get("name") == port:
            number = p.get("port")
            return number if isinstance(number, int) else None
    return None


def targets_from_endpoints(
    obj: Any,
    label_to_slice: Mapping[str, str],
    *,
    slice_label: str | None = None,
    port: int | str | None = None,
    scheme: str = "http",
    path: str = DEFAULT_METRICS_PATH,
) -> list[Target]:
    """Targets from an ``Endpoints``, an ``EndpointSlice`` or a list of either (``kubectl get -o json``).

    The slice comes from the object's labels: the first ``label_to_slice`` entry that matches
    (``"key=value"`` or a bare ``"key"``), else the value of ``slice_label``; objects with no slice
    are skipped. ``port`` is a number, a port name, or ``None`` for the first port. The pop is the
    endpoint's zone (EndpointSlice), else its node name. Not-ready addresses become ``starting``.
    """
    if not isinstance(obj, dict):
        raise ParseError("endpoints: expected a JSON object")
    items = obj.get("items") if "items" in obj else [obj]
    if not isinstance(items, list):
        raise ParseError("endpoints: 'items' is not a list")
    out: list[Target] = []
    for item in items:
        if not isinstance(item, dict):
            raise ParseError("endpoints: an item is not an object")
        meta = item.get("metadata") or {}
        labels = meta.get("labels") or {}
        if not isinstance(labels, dict):
            raise ParseError("endpoints: metadata.labels is not an object")
        slice_ = _slice_of(labels, label_to_slice, slice_label)
        if slice_ is None:
            continue
        kind = item.get("kind") or ("EndpointSlice" if "endpoints" in item else "Endpoints")
        try:
            if kind == "EndpointSlice":
                out.extend(_from_endpoint_slice(item, slice_, port, scheme, path))
            else:
                out.extend(_from_endpoints(item, slice_, port, scheme, path))
        except (AttributeError, TypeError) as err:
            raise ParseError(f"endpoints: malformed {kind} {meta.get('name', '?')!r}: {err}") from None
    return out


def _target(ip: str, number: int, scheme: str, path: str, slice_: str, pop: str, name: str, ready: bool) -> Target:
    return Target(
        url=f"{scheme}://{_host(ip)}:{number}{path}",
        slice=slice_,
        pop=pop,
        replica=name or ip,
        state="ready" if ready else "starting",
    )


def _from_endpoint_slice(item: dict[str, Any], slice_: str, port: int | str | None, scheme: str, path: str) -> Iterable[Target]:
    number = _pick_port(item.get("ports") or [], port)
    if number is None:
        return
    for ep in item.get("endpoints") or []:
        cond = ep.get("conditions") or {}
        ready = cond.get("ready") is not False  # nil means unknown: the API says treat as ready
        name = (ep.get("targetRef") or {}).get("name") or ep.get("hostname") or ""
        pop = ep.get("zone") or ep.get("nodeName") or ""
        for ip in ep.get("addresses") or []:
            yield _target(str(ip), number, scheme, path, slice_, pop, name, ready)


def _from_endpoints(item: dict[str, Any], slice_: str, port: int | str | None, scheme: str, path: str) -> Iterable[Target]:
    for subset in item.get("subsets") or []:
        number = _pick_port(subset.get("ports") or [], port)
        if number is None:
            continue
        for field, ready in (("addresses", True), ("notReadyAddresses", False)):
            for addr in subset.get(field) or []:
                name = (addr.get("targetRef") or {}).get("name") or addr.get("hostname") or ""
                yield _target(str(addr["ip"]), number, scheme, path, slice_, addr.get("nodeName") or "", name, ready)


def kubectl_lister(namespace: str, selector: str, kind: str = "endpointslices", timeout_s: float = 5.0) -> Callable[[], Any]:
    """The live read: ``kubectl get <kind> -l <selector> -o json`` (kubectl is on the machine image)."""

    def list_() -> Any:
        cmd = ["kubectl", "get", kind, "-n", namespace, "-l", selector, "-o", "json"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise SourceUnavailable(f"kubectl: {err}") from None
        if done.returncode != 0:
            raise SourceUnavailable(f"kubectl: {done.stderr.strip()[:200]}")
        try:
            return json.loads(done.stdout)
        except json.JSONDecodeError as err:
            raise ParseError(f"kubectl: not JSON: {err}") from None

    return list_


@dataclass(frozen=True)
class KubernetesDiscovery:
    lister: Callable[[], Any]
    label_to_slice: Mapping[str, str]
    slice_label: str | None = None
    port: int | str | None = None
    scheme: str = "http"
    path: str = DEFAULT_METRICS_PATH

    def discover(self) -> Discovered:
        targets = targets_from_endpoints(
            self.lister(), self.label_to_slice, slice_label=self.slice_label, port=self.port, scheme=self.scheme, path=self.path
        )
        return Discovered(tuple(targets), ())


# -- Ray Serve --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ServeReplica:
    application: str
    deployment: str
    replica_id: str
    actor_name: str
    node_ip: str
    node_id: str
    state: str  # RUNNING | STARTING | STOPPING | RECOVERING | PENDING_MIGRATION


def replicas_from_serve_applications(obj: Any) -> dict[str, list[ServeReplica]]:
    """Replicas per application from the Serve REST API's ``ServeInstanceDetails`` JSON."""
    if isinstance(obj, str):
        try:
            obj = json.loads(obj)
        except json.JSONDecodeError as err:
            raise ParseError(f"serve applications: not JSON: {err}") from None
    if not isinstance(obj, dict):
        raise ParseError("serve applications: expected a JSON object")
    apps = obj.get("applications") or {}
    if not isinstance(apps, dict):
        raise ParseError("serve applications: 'applications' is not an object")
    out: dict[str, list[ServeReplica]] = {}
    try:
        for app_name, app in apps.items():
            reps = out.setdefault(str(app_name), [])
            for dep_name, dep in (app.get("deployments") or {}).items():
                for r in dep.get("replicas") or []:
                    reps.append(
                        ServeReplica(
                            application=str(app_name),
                            deployment=str(dep_name),
                            replica_id=str(r.get("replica_id", "")),
                            actor_name=str(r.get("actor_name", "")),
                            node_ip=str(r.get("node_ip", "")),
                            node_id=str(r.get("node_id", "")),
                            state=str(r.get("state", "")),
                        )
                    )
    except AttributeError as err:
        raise ParseError(f"serve applications: malformed: {err}") from None
    return out


_RAY_STATES = {"RUNNING": "ready", "STARTING": "starting", "PENDING_MIGRATION": "stopping", "STOPPING": "stopping"}


def targets_from_serve_applications(
    obj: Any,
    *,
    metrics_port: int,
    application_slices: Mapping[str, str] | None = None,
    deployments: Iterable[str] | None = None,
    node_pops: Mapping[str, str] | None = None,
    path: str = DEFAULT_METRICS_PATH,
) -> Discovered:
    """One target per replica (node agent URL + replica id) and one front per node agent."""
    apps = application_slices or {}
    wanted = set(deployments) if deployments is not None else None
    pops = node_pops or {}
    replicas: list[Target] = []
    fronts: dict[str, FrontTarget] = {}
    for app, reps in replicas_from_serve_applications(obj).items():
        for r in reps:
            if not r.node_ip or (wanted is not None and r.deployment not in wanted):
                continue
            url = f"http://{_host(r.node_ip)}:{metrics_port}{path}"
            pop = pops.get(r.node_ip, r.node_ip)
            replicas.append(
                Target(
                    url=url,
                    slice=apps.get(app, app),
                    pop=pop,
                    replica=r.replica_id or r.actor_name,
                    state=_RAY_STATES.get(r.state, "starting"),
                    ray_replica_id=r.replica_id or None,
                )
            )
            fronts.setdefault(url, FrontTarget(url=url, slice=None, pop=pop))
    return Discovered(tuple(replicas), tuple(fronts.values()))


@dataclass(frozen=True)
class RayServeDiscovery:
    fetch: Callable[[], Any]  # returns the applications JSON (object or text)
    metrics_port: int
    application_slices: Mapping[str, str] | None = None
    deployments: tuple[str, ...] | None = None
    node_pops: Mapping[str, str] | None = None
    path: str = DEFAULT_METRICS_PATH

    def discover(self) -> Discovered:
        return targets_from_serve_applications(
            self.fetch(),
            metrics_port=self.metrics_port,
            application_slices=self.application_slices,
            deployments=self.deployments,
            node_pops=self.node_pops,
            path=self.path,
        )
