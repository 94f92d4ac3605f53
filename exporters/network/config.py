"""The ``network`` config section -> sources. Schema in this package's docstring and docs/exporters.md."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from inferslice.common.registry import read_registry
from inferslice.errors import ConfigError, InferSliceError, ParseError
from inferslice.topology import Topology

from .kernel import HtbSource, KernelLinkSource
from .kube import pod_items, port_maps_from_pods
from .mapping import DIRECTIONS, SHARED_SLICE, HtbMap, InterfaceMap, KernelMaps, OvsMaps, OvsPortMap, RegistryMaps, TunnelMap, check_unique
from .netlink import parse_classid
from .ovs import DEFAULT_SOCKET, OvsdbConnection, OvsSource
from .path import WanPathSource
from .prober import DEFAULT_BUCKETS_S, ProbeTarget, RttProber

Source = KernelLinkSource | HtbSource | OvsSource | RttProber | WanPathSource
_TOP_KEYS = {"registry", "interfaces", "htb", "ovs", "probe"}


def _mapping(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError("must be a mapping", field)
    return value


def _list(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError("must be a list", field)
    return value


def _str(d: Mapping[str, Any], key: str, field: str, default: str | None = None, required: bool = True) -> str:
    value = d.get(key, default)
    if value is None:
        if required:
            raise ConfigError("is required", f"{field}.{key}")
        return ""
    if not isinstance(value, str) or not value:
        raise ConfigError("must be a non-empty string", f"{field}.{key}")
    return value


def _opt_str(d: Mapping[str, Any], key: str, field: str, default: str | None = None) -> str | None:
    value = d.get(key, default)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError("must be a non-empty string", f"{field}.{key}")
    return value


def _num(d: Mapping[str, Any], key: str, field: str, default: float) -> float:
    value = d.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ConfigError("must be a positive number", f"{field}.{key}")
    return float(value)


def _bool(d: Mapping[str, Any], key: str, field: str, default: bool) -> bool:
    value = d.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError("must be true or false", f"{field}.{key}")
    return value


def _keys(d: Mapping[str, Any], allowed: set[str], field: str) -> None:
    for key in d:
        if key not in allowed:
            raise ConfigError(f"unknown key (allowed: {', '.join(sorted(allowed))})", f"{field}.{key}")


class _Names:
    """Checks slice and PoP names against the topology, when there is one."""

    def __init__(self, topology: Topology | None) -> None:
        self.slices = None if topology is None else {*topology.tier_names, SHARED_SLICE}
        self.pops = None if topology is None else {p.name for p in topology.pops} | {topology.client.name}

    def slice(self, d: Mapping[str, Any], field: str, default: str | None = None) -> str:
        value = _str(d, "slice", field, default)
        if self.slices is not None and value not in self.slices:
            raise ConfigError(f"{value!r} is not a tier of the topology (or {SHARED_SLICE!r})", f"{field}.slice")
        return value

    def pop(self, d: Mapping[str, Any], field: str, key: str = "pop", default: str | None = None) -> str:
        value = _str(d, key, field, default)
        if self.pops is not None and value not in self.pops:
            raise ConfigError(f"{value!r} is not a PoP of the topology", f"{field}.{key}")
        return value


def parse_kernel_maps(section: Mapping[str, Any], names: _Names, field: str = "network") -> KernelMaps:
    interfaces = []
    for i, raw in enumerate(_list(section.get("interfaces"), f"{field}.interfaces")):
        where = f"{field}.interfaces[{i}]"
        d = _mapping(raw, where)
        _keys(d, {"ifname", "netns", "slice", "pop", "link", "peer_pop", "invert", "capacity_bps"}, where)
        ifname = _str(d, "ifname", where)
        if len(ifname) > 15:
            raise ConfigError("interface names have at most 15 characters", f"{where}.ifname")
        peer = names.pop(d, where, "peer_pop") if d.get("peer_pop") is not None else None
        interfaces.append(InterfaceMap(ifname, names.slice(d, where), names.pop(d, where), _str(d, "link", where, ifname),
                                       _opt_str(d, "netns", where), peer, _bool(d, "invert", where, False),
                                       _num(d, "capacity_bps", where, 0.0) if d.get("capacity_bps") is not None else None))
    htb = []
    for i, raw in enumerate(_list(section.get("htb"), f"{field}.htb")):
        where = f"{field}.htb[{i}]"
        d = _mapping(raw, where)
        _keys(d, {"ifname", "netns", "classid", "slice", "pop", "link", "direction"}, where)
        try:
            classid = parse_classid(_str(d, "classid", where))
        except ValueError as err:
            raise ConfigError(str(err), f"{where}.classid") from None
        direction = _str(d, "direction", where, "transmit")
        if direction not in DIRECTIONS:
            raise ConfigError("must be receive or transmit", f"{where}.direction")
        ifname = _str(d, "ifname", where)
        htb.append(HtbMap(ifname, classid, names.slice(d, where), names.pop(d, where), _str(d, "link", where, ifname),
                          direction, _opt_str(d, "netns", where)))
    maps = KernelMaps(tuple(interfaces), tuple(htb))
    check_unique(maps, field)
    return maps


def parse_ovs_maps(ovs: Mapping[str, Any], names: _Names, topology: Topology | None,
                   read_text: Callable[[str], str] = lambda p: Path(p).read_text(), field: str = "network.ovs") -> OvsMaps:
    default_pop = _opt_str(ovs, "pop", field)
    ports = []
    for i, raw in enumerate(_list(ovs.get("ports"), f"{field}.ports")):
        where = f"{field}.ports[{i}]"
        d = _mapping(raw, where)
        _keys(d, {"port", "iface_id", "slice", "pop", "link", "invert"}, where)
        port, iface_id = _opt_str(d, "port", where), _opt_str(d, "iface_id", where)
        if (port is None) == (iface_id is None):
            raise ConfigError("give exactly one of port or iface_id", where)
        ports.append(OvsPortMap(names.slice(d, where), names.pop(d, where, default=default_pop),
                                _str(d, "link", where, port or iface_id), port, iface_id, _bool(d, "invert", where, False)))
    tunnels = []
    for i, raw in enumerate(_list(ovs.get("tunnels"), f"{field}.tunnels")):
        where = f"{field}.tunnels[{i}]"
        d = _mapping(raw, where)
        _keys(d, {"remote_ip", "port", "peer_pop", "pop", "slice"}, where)
        remote, port = _opt_str(d, "remote_ip", where), _opt_str(d, "port", where)
        if (remote is None) == (port is None):
            raise ConfigError("give exactly one of remote_ip or port", where)
        tunnels.append(TunnelMap(names.pop(d, where, "peer_pop"), names.pop(d, where, default=default_pop),
                                 names.slice(d, where, SHARED_SLICE), remote, port))
    pods_file = _opt_str(ovs, "pods_file", field)
    if pods_file is not None:
        subnets = {str(k): str(v) for k, v in _mapping(ovs.get("subnets"), f"{field}.subnets").items()}
        nodes = {str(k): str(v) for k, v in _mapping(ovs.get("nodes"), f"{field}.nodes").items()}
        tier_subnets = {t.name: str(t.subnet) for t in topology.tiers} if topology is not None else {}
        try:
            pods = pod_items(json.loads(read_text(pods_file)))
            ports.extend(port_maps_from_pods(pods, tier_subnets, subnets, nodes, default_pop))
        except OSError as err:
            raise ConfigError(f"cannot read: {err.strerror or err}", f"{field}.pods_file") from None
        except (json.JSONDecodeError, ParseError) as err:
            raise ConfigError(str(err), f"{field}.pods_file") from None
    return OvsMaps(tuple(ports), tuple(tunnels))


def parse_probe(probe: Mapping[str, Any], names: _Names, field: str = "network.probe") -> RttProber | None:
    _keys(probe, {"interval_s", "timeout_s", "buckets_s", "targets"}, field)
    targets = []
    for i, raw in enumerate(_list(probe.get("targets"), f"{field}.targets")):
        where = f"{field}.targets[{i}]"
        d = _mapping(raw, where)
        _keys(d, {"pop", "peer_pop", "address", "port", "netns"}, where)
        port = d.get("port", 7)
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ConfigError("must be a UDP port number", f"{where}.port")
        targets.append(ProbeTarget(names.pop(d, where), names.pop(d, where, "peer_pop"), _str(d, "address", where), port,
                                   _opt_str(d, "netns", where)))
    if not targets:
        return None
    buckets = _list(probe.get("buckets_s"), f"{field}.buckets_s") or list(DEFAULT_BUCKETS_S)
    if not all(isinstance(b, int | float) and not isinstance(b, bool) and b > 0 for b in buckets) or sorted(buckets) != buckets:
        raise ConfigError("must be increasing positive numbers of seconds", f"{field}.buckets_s")
    interval = _num(probe, "interval_s", field, 1.0)
    timeout = _num(probe, "timeout_s", field, min(0.5, interval))
    return RttProber(targets, interval, timeout, [float(b) for b in buckets])


def collectors_from_config(section: dict[str, Any], topology: Topology | None, registry_path: str | None) -> list[Source]:
    """The network exporter's sources from its config section; ``ConfigError`` names a bad field."""
    section = _mapping(section, "network")
    _keys(section, _TOP_KEYS, "network")
    names = _Names(topology)
    sources: list[Source] = []
    static = parse_kernel_maps(section, names)
    use_registry = _bool(section, "registry", "network", registry_path is not None)
    if use_registry and registry_path is None:
        raise ConfigError("registry: true needs a registry path", "network.registry")
    kernel_maps: Callable[[], KernelMaps] = (
        RegistryMaps(registry_path, static) if use_registry and registry_path is not None else (lambda: static)
    )
    if use_registry or static.interfaces:
        sources.append(KernelLinkSource(kernel_maps))
    if use_registry or static.htb:
        sources.append(HtbSource(kernel_maps))
    if use_registry and registry_path is not None:
        sources.append(WanPathSource(registry_path))  # routes from the registry's own topology file
    if section.get("ovs") is not None:
        ovs = _mapping(section.get("ovs"), "network.ovs")
        _keys(ovs, {"socket", "pop", "ports", "tunnels", "pods_file", "subnets", "nodes"}, "network.ovs")
        ovs_maps = parse_ovs_maps(ovs, names, topology)
        sock = _str(ovs, "socket", "network.ovs", DEFAULT_SOCKET)
        sources.append(OvsSource(lambda: ovs_maps, OvsdbConnection(sock)))
    probe = section.get("probe")
    if probe is None and use_registry and registry_path is not None:
        probe = registry_probe(registry_path)
    if probe is not None:
        prober = parse_probe(_mapping(probe, "network.probe"), names)
        if prober is not None:
            sources.append(prober)
    return sources


def registry_probe(registry_path: str) -> dict[str, Any] | None:
    """Probe targets from the testbed registry: from each PoP, over each WAN link, to the peer's
    echo responder (services ``echo-<pop>`` = ``udp://host:port``). None when there are none."""
    try:
        reg = read_registry(registry_path)
    except InferSliceError:
        return None
    targets = []
    for link in reg.links:
        echo = reg.services.get(f"echo-{link.peer_pop}") if link.kind == "wan" and link.peer_pop else None
        if echo is None or not echo.startswith("udp://"):
            continue
        host, _, port = echo.removeprefix("udp://").rpartition(":")
        target: dict[str, Any] = {"pop": link.pop, "peer_pop": link.peer_pop, "address": host, "port": int(port)}
        if link.netns:  # probe from inside the PoP, so the probe crosses the WAN link
            target["netns"] = link.netns
        targets.append(target)
    return {"targets": targets} if targets else None
