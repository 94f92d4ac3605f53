"""What each measured thing carries: interface / HTB class / OVS port / tunnel -> slice, pop, link.

Three ways to fill the mapping, all producing the same frozen entries:
- an explicit config section (``config.py`` parses it);
- the testbed's published registry (``maps_from_registry``): its LinkEntry list names netns,
  ifname, HTB class, tier, direction, pop and peer PoP;
- Kubernetes (``kube.py``): pod annotations of Kube-OVN, matched to OVS ports by iface-id.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from inferslice.common.registry import LinkEntry, Registry, read_registry
from inferslice.errors import ConfigError, ParseError

from .netlink import parse_classid

SHARED_SLICE = "shared"  # slice label of a link every tier crosses (registry tier None)
DIRECTIONS = ("receive", "transmit")


@dataclass(frozen=True)
class InterfaceMap:
    """A kernel interface. ``invert`` swaps rx/tx so counters read from the far end of the wire;
    with ``peer_pop`` set the interface is a tunnel and also feeds the tunnel byte counters."""

    ifname: str
    slice: str
    pop: str
    link: str
    netns: str | None = None  # None: the exporter's own namespace
    peer_pop: str | None = None
    invert: bool = False
    capacity_bps: float | None = None  # the interface's physical rate, where declared (exported as a gauge)


@dataclass(frozen=True)
class HtbMap:
    """An HTB class on an interface. ``direction`` is the viewpoint its traffic is counted in:
    HTB shapes egress, so it defaults to ``transmit``; the testbed's client edge says ``receive``."""

    ifname: str
    classid: int  # 0x00010011 for tc's "1:11"
    slice: str
    pop: str
    link: str
    direction: str = "transmit"
    netns: str | None = None


@dataclass(frozen=True)
class OvsPortMap:
    """An OVS Interface, matched by its name or by external_ids:iface-id (``<pod>.<namespace>``).
    Counters are the switch's viewpoint unless ``invert`` (a pod's viewpoint: receive = to the pod).
    The ``cap_*_bps`` values come from Kube-OVN annotations; a cap read from OVSDB wins."""

    slice: str
    pop: str
    link: str
    port: str | None = None
    iface_id: str | None = None
    invert: bool = False
    cap_receive_bps: float | None = None
    cap_transmit_bps: float | None = None


@dataclass(frozen=True)
class TunnelMap:
    """An OVS tunnel interface (geneve/vxlan) by ``options:remote_ip`` (or its port name)."""

    peer_pop: str
    pop: str
    slice: str = SHARED_SLICE
    remote_ip: str | None = None
    port: str | None = None


@dataclass(frozen=True)
class KernelMaps:
    interfaces: tuple[InterfaceMap, ...] = ()
    htb: tuple[HtbMap, ...] = ()

    def merged(self, other: KernelMaps) -> KernelMaps:
        return KernelMaps(self.interfaces + other.interfaces, self.htb + other.htb)


@dataclass(frozen=True)
class OvsMaps:
    ports: tuple[OvsPortMap, ...] = ()
    tunnels: tuple[TunnelMap, ...] = field(default_factory=tuple)


def check_unique(maps: KernelMaps, where: str = "network") -> None:
    """Two entries producing the same series would make an invalid exposition: refuse them."""
    seen: dict[tuple[str, ...], str] = {}
    for i, itf in enumerate(maps.interfaces):
        for d in DIRECTIONS:
            key = (itf.slice, itf.pop, itf.link, d)
            if key in seen:
                raise ConfigError(f"duplicates the labels of {seen[key]}", f"{where}.interfaces[{i}]")
            seen[key] = f"{where}.interfaces[{i}]"
    for i, h in enumerate(maps.htb):
        key = (h.slice, h.pop, h.link, h.direction)
        if key in seen:
            raise ConfigError(f"duplicates the labels of {seen[key]}", f"{where}.htb[{i}]")
        seen[key] = f"{where}.htb[{i}]"


def maps_from_links(links: Sequence[LinkEntry]) -> KernelMaps:
    """Registry links -> kernel maps: an entry with an HTB class is that class, else the interface."""
    interfaces: list[InterfaceMap] = []
    htb: list[HtbMap] = []
    for i, lk in enumerate(links):
        slice_ = lk.tier or SHARED_SLICE
        if lk.htb_classid:
            try:
                classid = parse_classid(lk.htb_classid)
            except ValueError as err:
                raise ParseError(f"registry links[{i}].htb_classid: {err}") from None
            direction = lk.direction or "transmit"
            if direction not in DIRECTIONS:
                raise ParseError(f"registry links[{i}].direction: {direction!r} is not receive|transmit")
            htb.append(HtbMap(lk.ifname, classid, slice_, lk.pop, lk.name, direction, lk.netns))
        else:
            interfaces.append(InterfaceMap(lk.ifname, slice_, lk.pop, lk.name, lk.netns, lk.peer_pop, capacity_bps=lk.capacity_bps))
    return KernelMaps(tuple(interfaces), tuple(htb))


def maps_from_registry(reg: Registry) -> KernelMaps:
    return maps_from_links(reg.links)


class RegistryMaps:
    """Re-reads the registry only when its file changes (one stat per scrape), so a testbed that
    comes up, or adds links, after the exporter started is picked up without a restart."""

    def __init__(self, path: str | os.PathLike[str], static: KernelMaps | None = None,
                 reader: Callable[[Path], Registry] = read_registry) -> None:
        p = Path(path)
        self._path = p / "registry.json" if p.is_dir() else p
        self._static = static or KernelMaps()
        self._reader = reader
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._maps = self._static

    def __call__(self) -> KernelMaps:
        """Current maps; ``SourceUnavailable`` (from read_registry) while there is no registry."""
        with self._lock:
            try:
                st = self._path.stat()
                stamp = (st.st_mtime_ns, st.st_size)
            except OSError:
                stamp = None
            if stamp is None or stamp != self._stamp:
                reg = self._reader(self._path)
                maps = self._static.merged(maps_from_registry(reg))
                check_unique(maps, "registry")
                self._maps, self._stamp = maps, stamp
            return self._maps
