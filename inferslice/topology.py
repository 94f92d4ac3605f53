"""The tiers and topology model: the single source of truth for PoPs, links and service tiers.

One YAML file declares it (``testbed/topology.yaml`` is the default, following the brief). The
testbed builds from it, exporters label by it, control respects its ceilings, dashboards and rules
are generated from it. ``load_topology`` turns any validation failure into a ``ConfigError`` that
names the offending field (``tiers[1].replicas_max``).
"""

from __future__ import annotations

import enum
import heapq
import ipaddress
from collections import Counter
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from inferslice.errors import ConfigError

NAME_PATTERN = r"^[a-z][a-z0-9-]{0,14}$"


class LatencyTier(enum.StrEnum):
    """RTT classes of the brief's WAN measurement (90 directed node pairs)."""

    INTRA_POP = "intra_pop"
    NEAR = "near"
    MID = "mid"
    FAR = "far"
    DISTANT = "distant"


class Parallelism(enum.StrEnum):
    REPLICATION = "replication"
    PIPELINE = "pipeline"
    TENSOR = "tensor"
    PREFILL_DECODE = "prefill_decode"


def latency_tier(rtt_s: float, same_pop: bool = False) -> LatencyTier:
    """Classify a path by round-trip time with the brief's boundaries (< 5, 5-10, 10-15, >= 15 ms)."""
    if same_pop:
        return LatencyTier.INTRA_POP
    rtt_ms = rtt_s * 1000.0
    if rtt_ms < 5.0:
        return LatencyTier.NEAR
    if rtt_ms < 10.0:
        return LatencyTier.MID
    if rtt_ms < 15.0:
        return LatencyTier.FAR
    return LatencyTier.DISTANT


# From the brief's distributed-inference results: TP and prefill/decode disaggregation only within
# a PoP, pipeline parallelism up to the mid tier, replication anywhere.
_FEASIBLE: dict[Parallelism, frozenset[LatencyTier]] = {
    Parallelism.REPLICATION: frozenset(LatencyTier),
    Parallelism.PIPELINE: frozenset({LatencyTier.INTRA_POP, LatencyTier.NEAR, LatencyTier.MID}),
    Parallelism.TENSOR: frozenset({LatencyTier.INTRA_POP}),
    Parallelism.PREFILL_DECODE: frozenset({LatencyTier.INTRA_POP}),
}


def feasible_parallelism(tier: LatencyTier) -> list[Parallelism]:
    """Which parallelism strategies stay within the SLO over a path of this latency tier."""
    return [p for p in Parallelism if tier in _FEASIBLE[p]]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Pop(_Model):
    """A Point of Presence with GPU hosts."""

    name: str = Field(pattern=NAME_PATTERN)
    gpus: int = Field(default=2, ge=0, le=64, description="physical GPUs at this PoP")
    gpu_model: str = "NVIDIA L40S"
    gpu_memory_bytes: int = Field(default=48 * 1024**3, gt=0)
    cpus: int = Field(default=16, gt=0)


class Link(_Model):
    """A WAN link between two PoPs; the testbed delays it by ``rtt_ms`` round trip."""

    a: str
    b: str
    rtt_ms: float = Field(gt=0, le=1000)
    capacity_bps: float | None = Field(
        default=None, gt=0, description="the link's physical rate (the testbed's delay line serialises at it); null = unlimited"
    )
    buffer_ms: float = Field(
        default=50.0, gt=0, le=10_000, description="drop-tail buffer per direction in ms at the link's rate (a WAN router port's)"
    )

    @model_validator(mode="after")
    def _distinct(self) -> Link:
        if self.a == self.b:
            raise ValueError("a link joins two different PoPs")
        return self

    @property
    def rtt_s(self) -> float:
        return self.rtt_ms / 1000.0

    @property
    def latency_tier(self) -> LatencyTier:
        return latency_tier(self.rtt_s)


class Client(_Model):
    """The client site: where load comes from and where the client-edge caps bind."""

    name: str = Field(default="client", pattern=NAME_PATTERN)
    gateway: str = Field(description="PoP hosting the tiers' serving fronts (Ray Serve proxies)")
    rtt_ms: float = Field(
        default=0.6, ge=0, le=1000, description="client-edge round trip (the testbed delays it); 0.6 ms: the brief's intra-PoP mean"
    )
    # How a tier's client-edge cap binds, as Kube-OVN has OVS enforce it (docs/testbed-network.md):
    # "policer" = a pod's egress_rate (OVS ingress policing: a token bucket of edge_burst_ms at the
    # rate, 800 ms by Kube-OVN's default; traffic above it dropped, no queue); "shaper" = a pod's
    # ingress_rate (an OVS linux-htb queue: a small burst and a queue of edge_buffer_ms, or the
    # kernel's 1000 packets when null).
    edge_mode: Literal["shaper", "policer"] = Field(default="shaper", description="how the client-edge caps bind")
    edge_buffer_ms: float | None = Field(
        default=None,
        gt=0,
        le=10_000,
        description="shaper: drop-tail queue of each tier's class, in ms at its current rate; null = the kernel's 1000 packets",
    )
    edge_burst_ms: float | None = Field(
        default=None,
        gt=0,
        le=10_000,
        description="token bucket of each capped class in ms at its rate; null = the mode's (policer 800 ms, shaper 2 frames or 2 ms)",
    )


class Tier(_Model):
    """A service tier: a slice of network, compute and serving at once."""

    name: str = Field(pattern=NAME_PATTERN)
    title: str = ""
    subnet: ipaddress.IPv4Network = Field(description="the tier's overlay subnet (one Kube-OVN logical switch)")
    vni: int = Field(ge=1, le=16_777_215, description="overlay network identifier of the tier")
    gpu_quota: float = Field(gt=0, description="fractional GPUs (Run:ai project quota)")
    cpu_quota: float = Field(gt=0)
    gpu_per_replica: float = Field(default=0.5, gt=0, le=1)
    replicas_min: int = Field(default=1, ge=0)
    replicas_max: int = Field(ge=1)
    max_ongoing_requests: int = Field(default=5, ge=1, description="Ray Serve per-replica admission limit")
    target_ongoing_requests: float = Field(default=2.0, gt=0, description="Ray Serve autoscaling target")
    slo_ttft_p99_s: float = Field(default=0.5, gt=0)
    slo_tpot_p99_s: float | None = Field(default=None, gt=0)
    attainment_objective: float = Field(default=0.99, gt=0, lt=1, description="fraction of requests meeting the TTFT SLO over 30 d")
    priority: int = Field(default=0, description="higher wins when tiers compete")
    placement: list[str] = Field(description="GPU slots 'pop/gpuN' in the order replicas are placed")
    client_cap_bps: float | None = Field(default=None, gt=0, description="client-edge bandwidth cap; null = uncapped")

    @field_validator("placement")
    @classmethod
    def _slots(cls, value: list[str]) -> list[str]:
        for slot in value:
            parse_slot(slot)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Tier:
        if self.replicas_min > self.replicas_max:
            raise ValueError("replicas_min exceeds replicas_max")
        if self.replicas_max * self.gpu_per_replica > self.gpu_quota + 1e-9:
            raise ValueError(
                f"replicas_max x gpu_per_replica = {self.replicas_max * self.gpu_per_replica:g} exceeds gpu_quota {self.gpu_quota:g}"
            )
        if len(self.placement) < self.replicas_max:
            raise ValueError(f"placement lists {len(self.placement)} slots for replicas_max {self.replicas_max}")
        return self

    @property
    def label(self) -> str:
        return self.title or self.name.capitalize()


def parse_slot(slot: str) -> tuple[str, int]:
    """'bristol/gpu1' -> ('bristol', 1)."""
    pop, sep, gpu = slot.partition("/")
    if not sep or not gpu.startswith("gpu") or not gpu[3:].isdigit():
        raise ValueError(f"GPU slot {slot!r} is not of the form 'pop/gpuN'")
    return pop, int(gpu[3:])


class Timing(_Model):
    """Time compression of the testbed relative to the paper's cluster."""

    cold_start_s: float = Field(default=8.0, ge=0, description="paper: 285-560 s; scaled so a 20-30 s load step sees it")
    upscale_delay_s: float = Field(default=3.0, ge=0, description="Ray default 30 s, scaled by the same ~1/10")
    downscale_delay_s: float = Field(default=60.0, ge=0, description="Ray default 600 s, scaled by ~1/10")
    look_back_period_s: float = Field(default=3.0, gt=0, description="Ray default 30 s, scaled by ~1/10")
    scrape_interval_s: float = Field(default=2.0, gt=0, description="short enough for 20-30 s steps to hold several windows")


class Topology(_Model):
    _tier_index: tuple[list[Tier], dict[str, Tier]] | None = PrivateAttr(default=None)
    name: str = "inferslice"
    model: str = Field(default="meta-llama/Llama-3.1-8B-Instruct", description="served model id (sets bytes per SSE chunk)")
    client: Client
    pops: list[Pop] = Field(min_length=1)
    links: list[Link] = Field(default_factory=list)
    tiers: list[Tier] = Field(min_length=1)
    timing: Timing = Field(default_factory=Timing)

    @model_validator(mode="after")
    def _references(self) -> Topology:
        names = [p.name for p in self.pops]
        dup = [n for n, c in Counter(names).items() if c > 1]
        if dup:
            raise ValueError(f"duplicate PoP names {dup}")
        pops = {p.name: p for p in self.pops}
        if self.client.gateway not in pops:
            raise ValueError(f"client.gateway {self.client.gateway!r} is not a PoP")
        if self.client.name in pops:
            raise ValueError(f"client.name {self.client.name!r} collides with a PoP")
        seen_pairs: set[frozenset[str]] = set()
        for i, link in enumerate(self.links):
            for end in (link.a, link.b):
                if end not in pops:
                    raise ValueError(f"links[{i}] names unknown PoP {end!r}")
            pair = frozenset((link.a, link.b))
            if pair in seen_pairs:
                raise ValueError(f"links[{i}] repeats the pair {sorted(pair)}")
            seen_pairs.add(pair)
        tier_names = [t.name for t in self.tiers]
        if len(set(tier_names)) != len(tier_names):
            raise ValueError("duplicate tier names")
        vnis = [t.vni for t in self.tiers]
        if len(set(vnis)) != len(vnis):
            raise ValueError("duplicate tier VNIs")
        # Sorted by start, a subnet overlaps an earlier one iff it starts before the furthest end so far
        # (pairwise was quadratic: minutes for a 10,000-tier fleet).
        furthest: Tier | None = None
        for tier in sorted(self.tiers, key=lambda t: (int(t.subnet.network_address), -t.subnet.prefixlen)):
            if furthest is not None and int(tier.subnet.network_address) <= int(furthest.subnet.broadcast_address):
                raise ValueError(f"tiers {furthest.name!r} and {tier.name!r} have overlapping subnets")
            if furthest is None or int(tier.subnet.broadcast_address) > int(furthest.subnet.broadcast_address):
                furthest = tier
        load: dict[tuple[str, int], float] = {}
        for ti, tier in enumerate(self.tiers):
            for si, slot in enumerate(tier.placement[: tier.replicas_max]):
                pop, gpu = parse_slot(slot)
                if pop not in pops:
                    raise ValueError(f"tiers[{ti}].placement[{si}] names unknown PoP {pop!r}")
                if gpu >= pops[pop].gpus:
                    raise ValueError(f"tiers[{ti}].placement[{si}] names gpu{gpu} but {pop} has {pops[pop].gpus}")
                load[(pop, gpu)] = load.get((pop, gpu), 0.0) + tier.gpu_per_replica
        over = {f"{p}/gpu{g}": v for (p, g), v in load.items() if v > 1.0 + 1e-9}
        if over:
            raise ValueError(f"GPU slots oversubscribed at the tiers' ceilings: {over}")
        for p in self.pops:
            if p.name != self.client.gateway and not self.link_between(self.client.gateway, p.name):
                raise ValueError(f"PoP {p.name!r} has no link to the gateway {self.client.gateway!r}")
        return self

    # -- lookups -------------------------------------------------------------------------------
    def tier(self, name: str) -> Tier:
        # An index, not a scan: a diagnosis round looks up each of 1,000 slices (a scan made it quadratic).
        # Keyed by the list it was built from: ``model_copy(update={"tiers": ...})`` carries private state over.
        built = self._tier_index
        if built is None or built[0] is not self.tiers or len(built[1]) != len(self.tiers):
            built = self._tier_index = (self.tiers, {t.name: t for t in self.tiers})
        return built[1][name]

    def pop(self, name: str) -> Pop:
        for p in self.pops:
            if p.name == name:
                return p
        raise KeyError(name)

    def link_between(self, a: str, b: str) -> Link | None:
        for link in self.links:
            if {link.a, link.b} == {a, b}:
                return link
        return None

    def rtt_s(self, a: str, b: str) -> float:
        """RTT between two PoPs (0 within one PoP)."""
        if a == b:
            return 0.0
        link = self.link_between(a, b)
        if link is None:
            raise KeyError(f"no link {a}-{b}")
        return link.rtt_s

    @property
    def tier_names(self) -> list[str]:
        return [t.name for t in self.tiers]

    def next_hops(self) -> dict[str, dict[str, str]]:
        """For every PoP, the neighbour on the lowest-RTT path to each other PoP it reaches (Dijkstra;
        ties go to the alphabetically first neighbour). The testbed routes by it; the exporter maps a
        tier's traffic onto the WAN links it crosses with it."""
        adj: dict[str, list[tuple[float, str]]] = {p.name: [] for p in self.pops}
        for link in self.links:
            adj[link.a].append((link.rtt_s, link.b))
            adj[link.b].append((link.rtt_s, link.a))
        hops: dict[str, dict[str, str]] = {}
        for src in adj:
            dist = {src: 0.0}
            first: dict[str, str] = {}
            heap: list[tuple[float, str, str]] = [(0.0, src, "")]
            while heap:
                d, node, via = heapq.heappop(heap)
                if d > dist.get(node, float("inf")):
                    continue
                if node != src and node not in first:
                    first[node] = via
                for w, nxt in sorted(adj[node]):
                    nd = d + w
                    if nd < dist.get(nxt, float("inf")):
                        dist[nxt] = nd
                        heapq.heappush(heap, (nd, nxt, via or nxt))
            hops[src] = first
        return hops

    def route(self, src: str, dst: str) -> list[str]:
        """The PoPs a packet from ``src`` to ``dst`` visits, both ends included (``[src]`` when equal)."""
        hops = self.next_hops()
        path = [src]
        while path[-1] != dst:
            nxt = hops[path[-1]].get(dst)
            if nxt is None or nxt in path:
                raise KeyError(f"no route {src} -> {dst}")
            path.append(nxt)
        return path


def _loc(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _from_validation_error(err: ValidationError) -> ConfigError:
    first = err.errors()[0]
    field = _loc(first["loc"]) or None
    message = first["msg"].removeprefix("Value error, ")
    if field is None:
        # Whole-model validators name their field inside the message ("tiers[0].placement[2] ...").
        head = message.split(" ", 1)[0]
        if "[" in head or "." in head:
            field = head
    more = len(err.errors()) - 1
    return ConfigError(message + (f" (and {more} more errors)" if more else ""), field)


def topology_from_dict(data: Any) -> Topology:
    """Validate a parsed document; raise ``ConfigError`` naming the first bad field."""
    if not isinstance(data, dict):
        raise ConfigError("a topology document is a mapping", None)
    try:
        return Topology.model_validate(data)
    except ValidationError as err:
        raise _from_validation_error(err) from None


def topology_from_yaml(text: str) -> Topology:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"not valid YAML: {err}") from None
    return topology_from_dict(data)


def default_topology_path() -> Path:
    return Path(str(resources.files("inferslice.testbed").joinpath("topology.yaml")))


def load_topology(path: str | Path | None = None) -> Topology:
    """Load a topology file; ``None`` loads the default (``testbed/topology.yaml``)."""
    p = Path(path) if path is not None else default_topology_path()
    try:
        text = p.read_text()
    except OSError as err:
        raise ConfigError(f"cannot read topology file {p}: {err.strerror}") from None
    return topology_from_yaml(text)
