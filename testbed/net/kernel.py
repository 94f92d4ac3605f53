"""Kernel objects of the netns testbed, built with pyroute2: namespaces, the underlay addresses and
routes over the delay line's TUN devices, the per-tier VXLAN overlay, the client edge with its HTB
caps, and the management veth from the root namespace.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute
from pyroute2 import netns as pr_netns
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl import tcmsg
from pyroute2.netlink.rtnl.tcmsg import sched_pfifo

from inferslice.errors import PermanentError
from inferslice.testbed.net import htb
from inferslice.testbed.net.plan import (
    EDGE_IF,
    EDGE_IFB,
    EDGE_RATE_BPS,
    HTB_DEFAULT_MINOR,
    MGMT_IF,
    OVERLAY_MTU,
    UNDERLAY_MTU,
    VXLAN_PORT,
    NetPlan,
)

NETNS_DIR = Path("/run/netns")
# pyroute2 0.9 knows pfifo but not bfifo; both take the same options (struct tc_fifo_qopt: a u32 limit,
# packets for pfifo, bytes for bfifo), so bfifo is pfifo's encoder under its own kind.
tcmsg.plugins.setdefault("bfifo", sched_pfifo)
EDGE_TXQUEUELEN = 1000  # a TUN device's default is 500; the kernel default leaf queue takes this many packets
EDGE_PREFIXLEN = 30
MGMT_PREFIXLEN = 30
# Namespace-wide settings: forward between interfaces; no reverse-path filtering (replies from a
# replica to the root namespace take the underlay, requests came over the overlay); no IPv6, whose
# neighbour discovery would add noise to the edge counters; CUBIC, the Linux default and so what the
# paper's Kubernetes nodes would run (a new namespace inherits the root's choice, which on this
# machine is bbr: a pacing, model-based sender that meets a full drop-tail buffer quite unlike CUBIC).
NS_CONGESTION_CONTROL = "cubic"
NS_SYSCTLS = (
    f"net.ipv4.tcp_congestion_control={NS_CONGESTION_CONTROL}",
    "net.ipv4.ip_forward=1",
    "net.ipv4.conf.all.rp_filter=0",
    "net.ipv4.conf.default.rp_filter=0",
    "net.ipv6.conf.all.disable_ipv6=1",
    "net.ipv6.conf.default.disable_ipv6=1",
)


class NetworkBuildError(PermanentError):
    """A kernel object of the testbed could not be created."""


def list_netns(prefix: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(NETNS_DIR) if n.startswith(prefix))
    except FileNotFoundError:
        return []


@contextmanager
def ipr_in(netns: str | None) -> Iterator[Any]:
    """An IPRoute socket inside ``netns`` (root when None); never creates a namespace."""
    ipr = IPRoute(netns=netns, flags=0) if netns else IPRoute()
    try:
        yield ipr
    finally:
        ipr.close()


def _idx(ipr: Any, ifname: str) -> int:
    found = ipr.link_lookup(ifname=ifname)
    if not found:
        raise NetworkBuildError(f"interface {ifname} not found")
    return int(found[0])


def _sysctl(netns: str, settings: tuple[str, ...]) -> None:
    # /proc/sys/net is per namespace of the *reader*: the simplest safe way in is `ip netns exec`.
    done = subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-qw", *settings], capture_output=True, text=True)
    if done.returncode != 0:
        raise NetworkBuildError(f"sysctl in {netns} failed: {done.stderr.strip() or done.returncode}")


ROOT_ALLOWED_CC = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")


def allow_congestion_control(name: str, allowed_file: Path = ROOT_ALLOWED_CC) -> None:
    """Let non-root namespaces choose ``name`` as their default congestion control.

    Only the initial namespace may set a default outside ``tcp_allowed_congestion_control`` (the
    kernel answers EPERM elsewhere), and that list holds just reno and the boot default: on a machine
    that boots with bbr, cubic is missing and every namespace sysctl below would fail. Appending to
    the list changes no socket's behaviour in the root namespace.
    """
    allowed = allowed_file.read_text().split()
    if name in allowed:
        return
    try:
        allowed_file.write_text(" ".join([*allowed, name]) + "\n")
    except OSError as exc:
        raise NetworkBuildError(f"cannot allow congestion control {name} in namespaces ({allowed_file}: {exc})") from exc


def check_free(plan: NetPlan) -> None:
    """Refuse to build over what a testbed of the same prefix left: its namespaces, or the root end
    of its management veth. That end outlives ``ip netns del`` whenever a process still lives in the
    gateway namespace (removing the name does not end a namespace in use), and it would otherwise
    surface as a bare ``File exists`` from netlink halfway through ``up``."""
    for ns in plan.all_netns:
        if (NETNS_DIR / ns).exists():
            raise NetworkBuildError(f"namespace {ns} already exists: run `inferslice testbed down` first")
    with ipr_in(None) as ipr:
        if ipr.link_lookup(ifname=plan.mgmt_host_if):
            raise NetworkBuildError(
                f"interface {plan.mgmt_host_if} already exists in the root namespace (an earlier testbed's, whose namespaces "
                "are gone or held by a process): run `inferslice testbed down` first"
            )


def create_namespaces(plan: NetPlan) -> None:
    """The plan's namespaces, each with lo up (``check_free`` has refused any that exist)."""
    allow_congestion_control(NS_CONGESTION_CONTROL)
    for ns in plan.all_netns:
        pr_netns.create(ns)
        _sysctl(ns, NS_SYSCTLS)
        with ipr_in(ns) as ipr:
            ipr.link("set", index=_idx(ipr, "lo"), state="up")


def setup_nodes(plan: NetPlan) -> None:
    for pop in plan.pops:
        with ipr_in(plan.netns(pop)) as ipr:
            # No dummy driver in this kernel: the node address lives on lo (a /32, reachable over the underlay).
            ipr.addr("add", index=_idx(ipr, "lo"), address=plan.node_ips[pop], prefixlen=32)


def wait_tuns(plan: NetPlan, timeout_s: float, alive: Any) -> None:
    """Wait until the delay line has created every TUN device (``alive()`` False: it died)."""
    deadline = time.monotonic() + timeout_s
    pending = {(ns, ifname) for ns_a, ns_b, ifname, _ in plan.delay_links for ns in (ns_a, ns_b)}
    while pending:
        for ns, ifname in sorted(pending):
            with ipr_in(ns) as ipr:
                if ipr.link_lookup(ifname=ifname):
                    pending.discard((ns, ifname))
        if not pending:
            return
        if not alive() or time.monotonic() > deadline:
            raise NetworkBuildError(f"delay line did not create {sorted(pending)}")
        time.sleep(0.05)


def setup_underlay(plan: NetPlan) -> None:
    for w in plan.wan:
        for ns, ip in ((w.ns_a, w.ip_a), (w.ns_b, w.ip_b)):
            with ipr_in(ns) as ipr:
                i = _idx(ipr, w.ifname)
                ipr.link("set", index=i, mtu=UNDERLAY_MTU, state="up")
                ipr.addr("add", index=i, address=ip, prefixlen=30)
    for pop in plan.pops:
        with ipr_in(plan.netns(pop)) as ipr:
            for r in plan.routes[pop]:
                ipr.route("add", dst=r.dst, gateway=r.via, oif=_idx(ipr, r.dev))


def setup_overlay(plan: NetPlan) -> None:
    for pop in plan.pops:
        others = [plan.node_ips[p] for p in plan.pops if p != pop]
        addrs = plan.bridge_addrs[pop]
        with ipr_in(plan.netns(pop)) as ipr:
            for t in plan.tiers:
                ipr.link("add", ifname=t.bridge, kind="bridge")
                br = _idx(ipr, t.bridge)
                ipr.link(
                    "add",
                    ifname=t.vxlan,
                    kind="vxlan",
                    vxlan_id=t.vni,
                    vxlan_port=VXLAN_PORT,
                    vxlan_local=plan.node_ips[pop],
                    vxlan_learning=True,
                )
                vx = _idx(ipr, t.vxlan)
                ipr.link("set", index=vx, mtu=OVERLAY_MTU, master=br, state="up")
                for dst in others:  # head-end replication of broadcast/unknown to every other PoP
                    ipr.fdb("append", ifindex=vx, lladdr="00:00:00:00:00:00", dst=dst)
                ipr.link("set", index=br, mtu=OVERLAY_MTU, state="up")
                for bridge, cidr in addrs:
                    if bridge == t.bridge:
                        host, plen = cidr.split("/")
                        ipr.addr("add", index=br, address=host, prefixlen=int(plen))


def _edge_classes(plan: NetPlan, offset: int, caps: dict[str, float | None]) -> list[tuple[int, float, int, int, int]]:
    return [
        (
            t.classid_int,
            caps.get(t.name) or EDGE_RATE_BPS,
            int(t.subnet.network_address),
            t.subnet.prefixlen,
            offset,
        )
        for t in plan.tiers
    ]


INGRESS_HANDLE = 0xFFFF0000  # tc's "ffff:"


def setup_edge(plan: NetPlan) -> None:
    """The client edge: the delay line's TUN pair (its RTT is the access round trip), shaped at the
    client end after the delay, where a real access link's shaper sits: transmit caps on the client
    end's egress (by destination), receive caps on an IFB its ingress is redirected to (by source)."""
    gw, cl = plan.gateway_netns, plan.client_netns
    initial = {t.name: t.cap_bps for t in plan.tiers}
    for ns, ip in ((gw, plan.edge_gateway_ip), (cl, plan.edge_client_ip)):
        with ipr_in(ns) as ipr:
            i = _idx(ipr, EDGE_IF)
            # GSO off: HTB must meter wire frames, not 64 KB super-packets (one would take 1 s at 0.5 Mbit/s).
            ipr.link("set", index=i, mtu=UNDERLAY_MTU, gso_max_size=UNDERLAY_MTU, gso_max_segs=1, txqlen=EDGE_TXQUEUELEN)
            ipr.addr("add", index=i, address=ip, prefixlen=EDGE_PREFIXLEN)
            ipr.link("set", index=i, state="up")
    with ipr_in(cl) as ipr:
        i = _idx(ipr, EDGE_IF)
        for t in plan.tiers:
            ipr.route("add", dst=str(t.subnet), gateway=plan.edge_gateway_ip, oif=i)
        ipr.route("add", dst="default", gateway=plan.edge_gateway_ip, oif=i)
        htb.install(ipr, i, _edge_classes(plan, 16, initial), HTB_DEFAULT_MINOR, EDGE_RATE_BPS, shape=plan.edge_shape)
        ipr.link("add", ifname=EDGE_IFB, kind="ifb")
        b = _idx(ipr, EDGE_IFB)
        ipr.link("set", index=b, mtu=UNDERLAY_MTU, gso_max_size=UNDERLAY_MTU, gso_max_segs=1, txqlen=EDGE_TXQUEUELEN, state="up")
        htb.install(ipr, b, _edge_classes(plan, 12, initial), HTB_DEFAULT_MINOR, EDGE_RATE_BPS, shape=plan.edge_shape)
        # Everything the client end receives goes through the IFB's HTB first (u32 wants a flowid; unused here).
        ipr.tc("add", "ingress", i, INGRESS_HANDLE)
        ipr.tc(
            "add-filter", "u32", i, parent=INGRESS_HANDLE, prio=htb.FILTER_PRIO, protocol=htb.ETH_P_IP, target=INGRESS_HANDLE | 1,
            keys=["0x0/0x0+0"], action={"kind": "mirred", "direction": "egress", "action": "redirect", "ifindex": b},
        )  # fmt: skip


def setup_mgmt(plan: NetPlan) -> None:
    host_if = plan.mgmt_host_if
    with ipr_in(None) as ipr:
        ipr.link("add", ifname=host_if, kind="veth", peer={"ifname": MGMT_IF, "net_ns_fd": plan.gateway_netns})
        i = _idx(ipr, host_if)
        ipr.addr("add", index=i, address=plan.mgmt_root_ip, prefixlen=MGMT_PREFIXLEN)
        ipr.link("set", index=i, state="up")
        with ipr_in(plan.gateway_netns) as gw:
            g = _idx(gw, MGMT_IF)
            gw.addr("add", index=g, address=plan.mgmt_gateway_ip, prefixlen=MGMT_PREFIXLEN)
            gw.link("set", index=g, state="up")
        for dst in plan.root_routes:
            ipr.route("add", dst=dst, gateway=plan.mgmt_gateway_ip, oif=i)


def set_class_rate(netns: str, ifname: str, classid: int, rate_bps: float, buffer_s: float | None = None,
                   burst_s: float | None = None) -> None:  # fmt: skip
    with ipr_in(netns) as ipr:
        htb.change_rate(ipr, _idx(ipr, ifname), classid, rate_bps, buffer_s, burst_s)


def read_edge_classes(netns: str, ifname: str = EDGE_IF) -> dict[str, htb.HtbClassStats]:
    with ipr_in(netns) as ipr:
        classes: dict[str, htb.HtbClassStats] = htb.read_classes(ipr, _idx(ipr, ifname))
    return classes


def remove_root_links(prefix: str) -> list[str]:
    """Delete every root-namespace interface whose name starts with ``prefix``."""
    removed: list[str] = []
    with ipr_in(None) as ipr:
        for link in ipr.get_links():
            name = link.get_attr("IFLA_IFNAME")
            if isinstance(name, str) and name.startswith(prefix):
                try:
                    ipr.link("del", index=link["index"])
                    removed.append(f"interface {name}")
                except NetlinkError as err:
                    if err.code != 19:  # ENODEV: its peer's namespace took it already
                        raise
    return removed


def remove_netns(names: list[str]) -> list[str]:
    removed: list[str] = []
    for ns in names:
        try:
            pr_netns.remove(ns)
            removed.append(f"netns {ns}")
        except FileNotFoundError:
            pass
    return removed
