"""The kernel network plan of the netns testbed, computed from the topology alone (pure).

Everything the testbed creates carries a name prefix (``isl-`` by default) so that ``down`` can
find leftovers after a crash: namespaces ``<prefix><pop>`` and ``<prefix><client>``, and the one
interface in the root namespace, ``<prefix>mgmt``. Interfaces inside our namespaces disappear with
them, so they use short fixed names.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from inferslice.testbed.addressing import EDGE_NET, MGMT_NET, NODE_NET, UNDERLAY_NET, AddressPlan
from inferslice.topology import Topology

DEFAULT_PREFIX = "isl-"
IFNAMSIZ_MAX = 15  # Linux interface names hold at most 15 characters
MAX_PREFIX_LEN = IFNAMSIZ_MAX - len("mgmt")  # the root-namespace interface is <prefix>mgmt

EDGE_IF = "isl-edge"  # both ends of the client edge, a delay-line TUN pair (each end in its own namespace)
EDGE_IFB = "isl-ifb"  # in the client namespace: the edge's ingress redirected here, where the receive caps bind
MGMT_IF = "isl-mgmt"  # the gateway end of the management veth
VXLAN_PORT = 4789  # IANA VXLAN port
UNDERLAY_MTU = 1500  # the delay line's TUN devices
OVERLAY_MTU = UNDERLAY_MTU - 50  # VXLAN over IPv4 adds 50 bytes
EDGE_RATE_BPS = 10e9  # the brief's 10 Gbit/s NICs: "uncapped" means this rate
HTB_DEFAULT_MINOR = 0x10  # unclassified traffic
HTB_TIER_MINOR_BASE = 0x11  # tier i gets minor 0x11 + i ("1:11", "1:12", ...)
HTB_MAJOR = 1
POLICER_BURST_S = 0.8  # Kube-OVN: ingress_policing_burst = 80 % of ingress_policing_rate, kbit over kbit/s
POLICER_UNCAPPED_BUFFER_S = 1.0  # an uncapped policer class queues like any line-rate port (bounded by htb.MAX_LEAF_BYTES)


def check_prefix(prefix: str) -> None:
    if not prefix.startswith("isl-") or len(prefix) > MAX_PREFIX_LEN or "/" in prefix:
        raise ValueError(f"name prefix {prefix!r} must start with 'isl-' and be at most {MAX_PREFIX_LEN} characters")


@dataclass(frozen=True)
class WanLink:
    index: int
    a: str
    b: str
    ns_a: str
    ns_b: str
    ifname: str  # the TUN device's name at both ends (each end in its own namespace)
    ip_a: str
    ip_b: str
    rtt_s: float
    rate_bps: float | None = None  # the link's physical rate (topology capacity_bps): the delay line serialises at it
    buffer_s: float = 0.05  # the link's drop-tail buffer per direction, in seconds at the rate

    @property
    def name(self) -> str:
        return f"wan-{self.a}-{self.b}"

    def end(self, pop: str) -> tuple[str, str]:
        """(namespace, own underlay address) of the link's end at ``pop``."""
        if pop == self.a:
            return self.ns_a, self.ip_a
        if pop == self.b:
            return self.ns_b, self.ip_b
        raise KeyError(f"{pop} is not an end of {self.name}")

    def other(self, pop: str) -> str:
        return self.b if pop == self.a else self.a


@dataclass(frozen=True)
class Route:
    dst: str  # CIDR
    via: str | None
    dev: str


@dataclass(frozen=True)
class TierNet:
    name: str
    index: int
    subnet: ipaddress.IPv4Network
    vni: int
    bridge: str
    vxlan: str
    classid: str  # "1:11"
    classid_int: int
    cap_bps: float | None  # initial client-edge cap from the topology


@dataclass(frozen=True)
class NetPlan:
    prefix: str
    pops: tuple[str, ...]
    gateway: str
    client: str
    wan: tuple[WanLink, ...]
    tiers: tuple[TierNet, ...]
    node_ips: dict[str, str]
    routes: dict[str, tuple[Route, ...]]  # PoP -> routes over the underlay
    # bridge addresses per PoP: (bridge, ip/prefixlen)
    bridge_addrs: dict[str, tuple[tuple[str, str], ...]]
    edge_gateway_ip: str
    edge_client_ip: str
    mgmt_root_ip: str
    mgmt_gateway_ip: str
    edge_rtt_s: float = 0.0  # the client edge's round trip, added by the delay line
    edge_buffer_s: float | None = None  # drop-tail queue per tier class in seconds at its rate; None: kernel default
    edge_mode: str = "shaper"  # shaper | policer (topology client.edge_mode)
    edge_burst_s: float | None = None  # token bucket of a capped class in seconds at its rate; None: the mode's default

    def edge_shape(self, rate_bps: float) -> tuple[float | None, float | None]:
        """(burst_s, buffer_s) of a client-edge class at ``rate_bps``: what htb.install/change_rate take.

        A policer is a token bucket with no queue: its bucket is ``edge_burst_s`` (Kube-OVN's 80 % of
        the rate in kbit: 0.8 s) and its leaf holds two frames, the least a drop-tail leaf can hold.
        An uncapped class (the line rate) binds nothing in either mode: the default burst and a deep
        leaf, so the policer's two frames never drop a burst at line rate."""
        if self.edge_mode == "policer":
            if rate_bps >= EDGE_RATE_BPS:
                return None, POLICER_UNCAPPED_BUFFER_S
            return (self.edge_burst_s if self.edge_burst_s is not None else POLICER_BURST_S), 0.0
        return self.edge_burst_s, self.edge_buffer_s

    @property
    def edge_link(self) -> tuple[str, str, str, float]:
        """The client edge as a delay-line link: (gateway namespace, client namespace, device, RTT)."""
        return (self.gateway_netns, self.client_netns, EDGE_IF, self.edge_rtt_s)

    @property
    def delay_links(self) -> list[tuple[str, str, str, float]]:
        """Every link the delay line serves: the WAN links, then the client edge."""
        return [(w.ns_a, w.ns_b, w.ifname, w.rtt_s) for w in self.wan] + [self.edge_link]

    def shaper(self, direction: str) -> tuple[str, str]:
        """(namespace, device) whose egress HTB caps ``direction``: both in the client namespace.

        Receive caps bind on the IFB the client end's ingress is redirected to, after the delay: the
        senders (the fronts) are then remote from the bottleneck queue, as on a real access link, so
        a full queue drops their packets instead of pushing back on their sockets (TCP small queues
        would keep a local sender's packets out of a qdisc, and nothing would ever be lost)."""
        return (self.client_netns, EDGE_IFB if direction == "receive" else EDGE_IF)

    def netns(self, name: str) -> str:
        return f"{self.prefix}{name}"

    @property
    def client_netns(self) -> str:
        return self.netns(self.client)

    @property
    def gateway_netns(self) -> str:
        return self.netns(self.gateway)

    @property
    def all_netns(self) -> list[str]:
        return [self.netns(p) for p in self.pops] + [self.client_netns]

    @property
    def mgmt_host_if(self) -> str:
        return f"{self.prefix}mgmt"

    def wan_link(self, name: str) -> WanLink:
        """A WAN link by ``wan-a-b``, ``a-b`` or ``b-a`` (the ends in either order)."""
        bare = name.removeprefix("wan-")
        for w in self.wan:
            if bare in (f"{w.a}-{w.b}", f"{w.b}-{w.a}"):
                return w
        raise KeyError(f"no WAN link {name!r} (have {', '.join(f'{w.a}-{w.b}' for w in self.wan)})")

    def tier(self, name: str) -> TierNet:
        for t in self.tiers:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def root_routes(self) -> list[str]:
        """Destinations the root namespace reaches over the management veth."""
        return [str(t.subnet) for t in self.tiers] + [str(NODE_NET), str(EDGE_NET)]


def bridge_name(tier: str, index: int) -> str:
    name = f"t-{tier}"
    return name if len(name) <= IFNAMSIZ_MAX else f"t-{index}"


def net_plan(top: Topology, prefix: str = DEFAULT_PREFIX) -> NetPlan:
    check_prefix(prefix)
    addr = AddressPlan(top)
    pops = tuple(p.name for p in top.pops)
    node_ips = {p: addr.node_ip(p) for p in pops}
    base = int(UNDERLAY_NET.network_address)
    wan: list[WanLink] = []
    for i, link in enumerate(top.links):
        net = base + 4 * i
        wan.append(
            WanLink(
                index=i,
                a=link.a,
                b=link.b,
                ns_a=f"{prefix}{link.a}",
                ns_b=f"{prefix}{link.b}",
                ifname=f"isl-w{i}",
                ip_a=str(ipaddress.IPv4Address(net + 1)),
                ip_b=str(ipaddress.IPv4Address(net + 2)),
                rtt_s=link.rtt_s,
                rate_bps=link.capacity_bps,
                buffer_s=link.buffer_ms / 1000.0,
            )
        )

    def toward(src: str, dst: str) -> Route:
        """Route from src to a neighbour dst's side of their link."""
        for w in wan:
            if (w.a, w.b) == (src, dst):
                return Route("", w.ip_b, w.ifname)
            if (w.b, w.a) == (src, dst):
                return Route("", w.ip_a, w.ifname)
        raise KeyError(f"no link {src}-{dst}")

    hops = top.next_hops()
    gateway = top.client.gateway
    routes: dict[str, tuple[Route, ...]] = {}
    for src in pops:
        rs: list[Route] = []
        for dst in pops:
            if dst == src or dst not in hops[src]:
                continue
            hop = toward(src, hops[src][dst])
            rs.append(Route(f"{node_ips[dst]}/32", hop.via, hop.dev))
        if src != gateway and gateway in hops[src]:
            hop = toward(src, hops[src][gateway])
            for shared_net in (MGMT_NET, EDGE_NET):
                rs.append(Route(str(shared_net), hop.via, hop.dev))
        routes[src] = tuple(rs)

    tiers: list[TierNet] = []
    bridge_addrs: dict[str, list[tuple[str, str]]] = {p: [] for p in pops}
    for i, tier in enumerate(top.tiers):
        minor = HTB_TIER_MINOR_BASE + i
        tn = TierNet(
            name=tier.name,
            index=i,
            subnet=tier.subnet,
            vni=tier.vni,
            bridge=bridge_name(tier.name, i),
            vxlan=f"vx{tier.vni}",
            classid=f"{HTB_MAJOR}:{minor:x}",
            classid_int=(HTB_MAJOR << 16) | minor,
            cap_bps=tier.client_cap_bps,
        )
        tiers.append(tn)
        plen = tier.subnet.prefixlen
        bridge_addrs[gateway].append((tn.bridge, f"{addr.front(tier.name).host}/{plen}"))
        for k in range(len(tier.placement)):
            for pop in pops:  # every slot has an address at every PoP: a replica may move there
                bridge_addrs[pop].append((tn.bridge, f"{addr.replica_at(tier.name, k, pop).host}/{plen}"))

    edge = int(EDGE_NET.network_address)
    mgmt = int(MGMT_NET.network_address)
    return NetPlan(
        prefix=prefix,
        pops=pops,
        gateway=gateway,
        client=top.client.name,
        wan=tuple(wan),
        tiers=tuple(tiers),
        node_ips=node_ips,
        routes=routes,
        bridge_addrs={p: tuple(v) for p, v in bridge_addrs.items()},
        edge_gateway_ip=str(ipaddress.IPv4Address(edge + 1)),
        edge_client_ip=str(ipaddress.IPv4Address(edge + 2)),
        mgmt_root_ip=str(ipaddress.IPv4Address(mgmt + 1)),
        mgmt_gateway_ip=str(ipaddress.IPv4Address(mgmt + 2)),
        edge_rtt_s=top.client.rtt_ms / 1000.0,
        edge_buffer_s=None if top.client.edge_buffer_ms is None else top.client.edge_buffer_ms / 1000.0,
        edge_mode=top.client.edge_mode,
        edge_burst_s=None if top.client.edge_burst_ms is None else top.client.edge_burst_ms / 1000.0,
    )
