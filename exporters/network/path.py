"""Which WAN links each slice's traffic crosses: ``inferslice_slice_wan_path_rtt_seconds``.

A tier's response streams flow from its replicas' PoPs to the gateway (its serving front), along
the topology's lowest-RTT route (``Topology.route``, the route the testbed installs). For every
hop ``u -> v`` of a replica's route, this source emits one series
``{slice, pop=v, peer_pop=u, link=<the registry's link entry at v toward u>}`` whose value is that
link's declared round trip (the topology's, not the one in force now: the probes measure that).
``pop`` and ``link`` are the labels of the link's counters at its gateway-side end, whose receive
bytes are what the link delivered toward the gateway, so collectors join the two on ``(pop, link)``
(and the PoP probes on ``(pop, peer_pop)``) to read, per slice, how full and how slow the WAN
links its traffic depends on are. A slice whose replicas all sit at the gateway has no series.

Replicas and placements change at run time (autoscaling, moves): the registry is re-read on every
scrape (a few small files).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

from prometheus_client.core import Metric

from inferslice import metric_names as mn
from inferslice.common.registry import Registry, read_registry
from inferslice.topology import Topology, load_topology

from ..rows import RowFamily

PATH_LABELS = ["slice", "pop", "peer_pop", "link"]
SERVING_STATES = ("starting", "ready")  # a stopping replica's traffic is draining away


def path_rows(reg: Registry, top: Topology) -> list[tuple[tuple[str, str, str, str], float]]:
    """((slice, pop, peer_pop, link), declared RTT) for every WAN hop of every serving replica's route to the gateway."""
    gateway = top.client.gateway
    entries = {(lk.pop, lk.peer_pop): lk.name for lk in reg.links if lk.kind == "wan" and lk.peer_pop}
    rows: dict[tuple[str, str, str, str], float] = {}
    for rep in reg.replicas:
        if rep.state not in SERVING_STATES or rep.pop == gateway:
            continue
        try:
            route = top.route(rep.pop, gateway)
        except KeyError:
            continue  # a PoP the topology does not route to the gateway carries no traffic of ours
        for u, v in itertools.pairwise(route):
            name = entries.get((v, u))
            link = top.link_between(u, v)
            if name is not None and link is not None:
                rows[(rep.tier, v, u, name)] = link.rtt_s
    return sorted(rows.items())


class WanPathSource:
    """The path gauge from the testbed registry (replicas, WAN link entries) and the topology."""

    def __init__(self, registry_path: str, topology: Topology | None = None,
                 reader: Callable[[str], Registry] = read_registry, name: str = "network_path") -> None:  # fmt: skip
        self.name = name
        self._path = registry_path
        self._topology = topology
        self._reader = reader
        self._loaded: tuple[str, Topology] | None = None

    def _top(self, reg: Registry) -> Topology:
        if self._topology is not None:
            return self._topology
        if self._loaded is None or self._loaded[0] != reg.topology_path:
            self._loaded = (reg.topology_path, load_topology(reg.topology_path))
        return self._loaded[1]

    def collect(self) -> Iterator[Metric]:
        reg = self._reader(self._path)  # SourceUnavailable while there is no registry
        fam = RowFamily(mn.SLICE_WAN_PATH_RTT, "Declared RTT of each WAN link the slice's replicas reach the gateway over", "gauge",
                        PATH_LABELS)  # fmt: skip
        for labels, rtt in path_rows(reg, self._top(reg)):
            fam.add(labels, rtt)
        return iter([fam])
