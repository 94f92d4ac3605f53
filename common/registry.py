"""The testbed's published registry: its replicas, serving fronts, links and GPU shares.

The testbed writes it (atomically, as JSON) whenever something changes; exporters, collectors and
the demo read it like any other source, so they never import the testbed's internals. On
Kubernetes the same information comes from the API server instead.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from inferslice.common.files import atomic_write_json
from inferslice.errors import ParseError, SourceUnavailable

DEFAULT_STATE_DIR = Path("/run/inferslice")
REGISTRY_FILE = "registry.json"


@dataclass(frozen=True)
class ReplicaEntry:
    id: str  # "premium-0"
    tier: str
    pop: str
    gpu: int  # physical GPU index at the PoP
    gpu_fraction: float  # allocated fraction (Run:ai gpu-fraction)
    gpu_share: float  # effective share relative to the allocation; < 1 when a co-tenant slows it
    url: str  # base URL of the OpenAI-compatible server ("http://10.203.0.11:8000")
    netns: str | None = None
    state: str = "ready"  # starting | ready | stopping
    pid: int | None = None
    # Under Ray Serve the engine's metrics come from Ray's metrics agent, one exposition for all of a
    # node's replicas, told apart by the ReplicaId tag: where to scrape it and this replica's id there.
    metrics_url: str | None = None
    ray_replica_id: str | None = None


@dataclass(frozen=True)
class FrontEntry:
    tier: str
    url: str  # the tier's serving front, as clients address it
    admin_url: str  # replica count / mode control
    netns: str | None = None
    pid: int | None = None
    replicas_target: int = 1
    autoscale: bool = True
    # A Ray Serve front's ray_serve_* metrics are the node agent's (every application's, told apart by
    # the application label); None: the front serves its own at url + /metrics.
    metrics_url: str | None = None


@dataclass(frozen=True)
class LinkEntry:
    """A measured interface or HTB class and what it carries."""

    name: str  # "client-edge", "wan-bristol-london", "overlay-premium-london"
    kind: str  # access | wan | overlay
    netns: str
    ifname: str
    pop: str
    tier: str | None = None  # None: shared by every tier
    peer_pop: str | None = None
    direction: str | None = None  # for HTB classes: "receive" (towards clients) or "transmit"
    htb_classid: str | None = None  # "1:11"
    cap_bps: float | None = None
    rtt_s: float | None = None
    # The interface's physical rate (a WAN link's provisioned capacity): what it carries at most with no
    # slice cap binding; None: not declared (the NIC's line rate).
    capacity_bps: float | None = None


@dataclass(frozen=True)
class Registry:
    topology_path: str
    state_dir: str
    updated_s: float = 0.0
    replicas: tuple[ReplicaEntry, ...] = ()
    fronts: tuple[FrontEntry, ...] = ()
    links: tuple[LinkEntry, ...] = ()
    services: dict[str, str] = field(default_factory=dict)  # name -> URL (exporter, prometheus, api)
    pids: dict[str, int] = field(default_factory=dict)  # every process the testbed started

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def replicas_of(self, tier: str) -> list[ReplicaEntry]:
        return [r for r in self.replicas if r.tier == tier]

    def client_netns(self) -> str:
        """The namespace clients (load generators) run in: the client end of the access link.
        ``ParseError`` when the registry names no client edge."""
        for link in self.links:
            if link.kind == "access" and link.direction == "transmit":
                return link.netns
        raise ParseError("registry: no client edge (access link, direction transmit)")

    def front(self, tier: str) -> FrontEntry | None:
        for f in self.fronts:
            if f.tier == tier:
                return f
        return None


def registry_from_dict(data: Any) -> Registry:
    if not isinstance(data, dict):
        raise ParseError("registry: expected a JSON object")
    try:
        return Registry(
            topology_path=str(data["topology_path"]),
            state_dir=str(data["state_dir"]),
            updated_s=float(data.get("updated_s", 0.0)),
            replicas=tuple(ReplicaEntry(**r) for r in data.get("replicas", [])),
            fronts=tuple(FrontEntry(**f) for f in data.get("fronts", [])),
            links=tuple(LinkEntry(**lk) for lk in data.get("links", [])),
            services={str(k): str(v) for k, v in data.get("services", {}).items()},
            pids={str(k): int(v) for k, v in data.get("pids", {}).items()},
        )
    except (KeyError, TypeError, ValueError) as err:
        raise ParseError(f"registry: {err}") from None


def registry_from_json(text: str) -> Registry:
    try:
        return registry_from_dict(json.loads(text))
    except json.JSONDecodeError as err:
        raise ParseError(f"registry: not JSON: {err}") from None


def read_registry(path: str | Path) -> Registry:
    """Read the registry file; ``SourceUnavailable`` when there is none (testbed down)."""
    p = Path(path)
    if p.is_dir():
        p = p / REGISTRY_FILE
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise SourceUnavailable(f"no testbed registry at {p} (is the testbed up?)") from None
    except OSError as err:
        raise SourceUnavailable(f"cannot read {p}: {err.strerror}") from None
    return _merge_fragments(registry_from_json(text), p.parent)


def replicas_fragment_path(state_dir: str | Path, tier: str) -> Path:
    """Each tier's serving front owns the list of its replicas in a fragment of its own, so no two
    processes ever write the same file; ``read_registry`` merges the fragments."""
    return Path(state_dir) / f"replicas-{tier}.json"


def write_replicas_fragment(state_dir: str | Path, tier: str, replicas: list[ReplicaEntry]) -> None:
    atomic_write_json(replicas_fragment_path(state_dir, tier), [asdict(r) for r in replicas])


def _merge_fragments(reg: Registry, state_dir: Path) -> Registry:
    merged = {r.id: r for r in reg.replicas}
    for frag in sorted(state_dir.glob("replicas-*.json")):
        try:
            items = json.loads(frag.read_text())
            for item in items:
                entry = ReplicaEntry(**item)
                merged[entry.id] = entry
        except (OSError, json.JSONDecodeError, TypeError) as err:
            raise ParseError(f"registry fragment {frag.name}: {err}") from None
    return Registry(
        topology_path=reg.topology_path,
        state_dir=reg.state_dir,
        updated_s=reg.updated_s,
        replicas=tuple(sorted(merged.values(), key=lambda r: r.id)),
        fronts=reg.fronts,
        links=reg.links,
        services=reg.services,
        pids=reg.pids,
    )


def write_registry(reg: Registry, path: str | Path) -> None:
    """Write atomically so a reader never sees half a file. Replica lists live in fragments."""
    p = Path(path)
    if p.is_dir():
        p = p / REGISTRY_FILE
    atomic_write_json(p, reg.to_dict())
