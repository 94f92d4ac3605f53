"""The testbed's address plan, derived from the topology alone so every process agrees on it.

Two plans share one interface:
- ``netns``: the real testbed. Each tier's overlay subnet (from the tiers file) spans the PoPs;
  the tier's serving front is host .1 at the gateway PoP, the replica of placement slot k is host
  .(10+k) at the PoP of that slot; slot k moved to another PoP (``replica_at``) is host
  .(10 + L*(1+i) + k) at PoP i (L: the placement's length), bound there from the start so that a
  make-before-break move needs no address change while the old replica still serves. Each PoP has
  a node address (engine host admin API) on a dummy device, reachable over the underlay; the root
  namespace reaches everything over a management veth to the gateway. The client namespace reaches the fronts over its per-tier edge link.
- ``loopback``: everything on 127.0.0.1 with distinct ports, for tests that need no root.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from inferslice.topology import Topology

SERVE_PORT = 8000
ADMIN_PORT = 9100
ECHO_PORT = 9101  # UDP echo of each PoP's node agent: the target of the exporter's RTT prober
MGMT_NET = ipaddress.IPv4Network("10.250.0.0/30")  # root <-> gateway management link
NODE_NET = ipaddress.IPv4Network("10.251.0.0/24")  # PoP node addresses (/32 each)
UNDERLAY_NET = ipaddress.IPv4Network("10.252.0.0/16")  # point-to-point WAN links, a /30 each
EDGE_NET = ipaddress.IPv4Network("10.253.0.0/24")  # client <-> gateway edge link(s), a /30 each
LOOPBACK_BASE_PORT = 18000


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def listen(self) -> str:
        return f"{self.host}:{self.port}"


class AddressPlan:
    def __init__(self, topology: Topology, mode: str = "netns", base_port: int = LOOPBACK_BASE_PORT) -> None:
        if mode not in ("netns", "loopback"):
            raise ValueError(f"unknown address plan mode {mode!r}")
        self.topology = topology
        self.mode = mode
        self.base_port = base_port

    # -- indices -------------------------------------------------------------------------------
    def _tier_index(self, tier: str) -> int:
        return self.topology.tier_names.index(tier)

    def _pop_index(self, pop: str) -> int:
        return [p.name for p in self.topology.pops].index(pop)

    # -- endpoints -----------------------------------------------------------------------------
    def front(self, tier: str) -> Endpoint:
        if self.mode == "loopback":
            return Endpoint("127.0.0.1", self.base_port + self._tier_index(tier))
        net = self.topology.tier(tier).subnet
        return Endpoint(str(net.network_address + 1), SERVE_PORT)

    def replica(self, tier: str, slot: int) -> Endpoint:
        if self.mode == "loopback":
            return Endpoint("127.0.0.1", self.base_port + 100 + 20 * self._tier_index(tier) + slot)
        net = self.topology.tier(tier).subnet
        return Endpoint(str(net.network_address + 10 + slot), SERVE_PORT)

    def replica_id(self, tier: str, slot: int) -> str:
        return f"{tier}-{slot}"

    def replica_at(self, tier: str, slot: int, pop: str) -> Endpoint:
        """Where slot ``slot`` of ``tier`` serves when placed at ``pop`` (its own PoP: ``replica``)."""
        if pop == self.slot_of(tier, slot)[0]:
            return self.replica(tier, slot)
        i = self._pop_index(pop)
        if self.mode == "loopback":
            return Endpoint("127.0.0.1", self.base_port + 400 + 20 * (self._tier_index(tier) * len(self.topology.pops) + i) + slot)
        t = self.topology.tier(tier)
        return Endpoint(str(t.subnet.network_address + 10 + len(t.placement) * (1 + i) + slot), SERVE_PORT)

    def replica_id_at(self, tier: str, slot: int, pop: str) -> str:
        """The replica's id at ``pop``: distinct from the one at its own PoP, which still serves during a move."""
        return self.replica_id(tier, slot) if pop == self.slot_of(tier, slot)[0] else f"{tier}-{slot}-{pop}"

    def host_admin(self, pop: str) -> Endpoint:
        if self.mode == "loopback":
            return Endpoint("127.0.0.1", self.base_port + 200 + self._pop_index(pop))
        return Endpoint(self.node_ip(pop), ADMIN_PORT)

    def echo(self, pop: str) -> Endpoint:
        """UDP echo responder at a PoP's node address (Kube-OVN's pinger probes node to node)."""
        if self.mode == "loopback":
            return Endpoint("127.0.0.1", self.base_port + 300 + self._pop_index(pop))
        return Endpoint(self.node_ip(pop), ECHO_PORT)

    def front_admin(self, tier: str) -> Endpoint:
        """The front's admin API shares its serving listener (paths under /admin)."""
        return self.front(tier)

    def node_ip(self, pop: str) -> str:
        return str(NODE_NET.network_address + 1 + self._pop_index(pop))

    def slot_of(self, tier: str, slot: int) -> tuple[str, int]:
        """(pop, gpu) of a tier's placement slot."""
        pop, _, gpu = self.topology.tier(tier).placement[slot].partition("/")
        return pop, int(gpu[3:])
