"""Config section -> sources, the registry and Kubernetes mappings, and ConfigError naming fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inferslice import metric_names as mn
from inferslice.common.registry import LinkEntry, Registry, write_registry
from inferslice.errors import ConfigError
from inferslice.exporters.network import collectors_from_config
from inferslice.exporters.network.kube import pod_items, port_maps_from_pods
from inferslice.exporters.network.mapping import HtbMap, InterfaceMap, maps_from_links
from inferslice.topology import load_topology

from .conftest import Namespaces, needs_root, registry_with, sh

PODS = Path(__file__).parent / "fixtures" / "pods-kube-ovn-runai.json"
TOPO = load_topology()


def test_kube_ovn_pods_map_to_ovs_ports_by_iface_id() -> None:
    pods = pod_items(json.loads(PODS.read_text()))
    tiers = {t.name: str(t.subnet) for t in TOPO.tiers}
    maps = port_maps_from_pods(pods, tiers, {"premium-subnet": "premium"}, {"gpu-node-bristol-1": "bristol", "gpu-node-london-1": "london"})
    by_id = {m.iface_id: m for m in maps}
    assert set(by_id) == {"vllm-premium-0.inference", "vllm-free-0.inference"}  # host-network pod skipped
    premium = by_id["vllm-premium-0.inference"]
    assert (premium.slice, premium.pop, premium.invert) == ("premium", "bristol", True)
    assert (premium.cap_receive_bps, premium.cap_transmit_bps) == (200e6, 50e6)
    free = by_id["vllm-free-0.inference"]
    assert (free.slice, free.pop) == ("free", "london")  # slice from the pod IP inside the tier's CIDR


def test_registry_links_become_interfaces_and_htb_classes() -> None:
    links = [
        LinkEntry("client-edge", "access", "isx-gw", "edge0", "bristol", tier="premium", direction="receive", htb_classid="1:13"),
        LinkEntry("wan-bristol-london", "wan", "isx-br", "wan1", "bristol", peer_pop="london"),
    ]
    maps = maps_from_links(links)
    assert maps.htb == (HtbMap("edge0", 0x10013, "premium", "bristol", "client-edge", "receive", "isx-gw"),)
    assert maps.interfaces == (InterfaceMap("wan1", "shared", "bristol", "wan-bristol-london", "isx-br", "london"),)


@pytest.mark.parametrize(("section", "field"), [
    ({"interfaces": [{"ifname": "a-very-long-ifname", "slice": "premium", "pop": "bristol"}]}, "network.interfaces[0].ifname"),
    ({"interfaces": [{"ifname": "v0", "slice": "gold", "pop": "bristol"}]}, "network.interfaces[0].slice"),
    ({"htb": [{"ifname": "v0", "classid": "zz", "slice": "free", "pop": "bristol"}]}, "network.htb[0].classid"),
    ({"htb": [{"ifname": "v0", "classid": "1:1", "slice": "free", "pop": "paris"}]}, "network.htb[0].pop"),
    ({"htb": [{"ifname": "v0", "classid": "1:1", "slice": "free", "pop": "bristol", "direction": "up"}]}, "network.htb[0].direction"),
    ({"ovs": {"ports": [{"slice": "free", "pop": "bristol"}]}}, "network.ovs.ports[0]"),
    ({"probe": {"targets": [{"pop": "bristol", "peer_pop": "london", "address": "10.0.0.1", "port": 0}]}}, "network.probe.targets[0].port"),
    ({"probe": {"interval_s": -1, "targets": [{"pop": "bristol", "peer_pop": "london", "address": "10.0.0.1"}]}},
     "network.probe.interval_s"),
    ({"bogus": 1}, "network.bogus"),
    ({"interfaces": [{"ifname": "v0", "slice": "free", "pop": "bristol", "link": "x"},
                     {"ifname": "v1", "slice": "free", "pop": "bristol", "link": "x"}]}, "network.interfaces[1]"),
])
def test_bad_config_names_the_field(section: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        collectors_from_config(section, TOPO, None)
    assert info.value.field == field


def test_config_builds_each_kind_of_source(tmp_path: Path) -> None:
    section = {
        "interfaces": [{"ifname": "v0", "slice": "free", "pop": "bristol"}],
        "htb": [{"ifname": "v0", "classid": "1:11", "slice": "premium", "pop": "bristol", "direction": "receive"}],
        "ovs": {"socket": str(tmp_path / "none.sock"), "pop": "bristol", "pods_file": str(PODS),
                "nodes": {"gpu-node-bristol-1": "bristol"}},
        "probe": {"targets": [{"pop": "bristol", "peer_pop": "london", "address": "127.0.0.1", "port": 9}]},
    }
    sources = collectors_from_config(section, TOPO, None)
    assert [s.name for s in sources] == ["network_kernel", "network_htb", "network_ovs", "network_probe"]
    reg, _ = registry_with(sources[2])
    assert reg.get_sample_value(mn.SOURCE_UP, {"source": "network_ovs"}) == 0.0  # no ovsdb-server at that socket


@needs_root
def test_registry_driven_sources_follow_the_registry_file(tmp_path: Path, netns: Namespaces) -> None:
    ns = netns.add("r")
    sh("ip", "-n", ns, "link", "add", "edge0", "type", "veth", "peer", "name", "edge1")
    sh("tc", "-n", ns, "qdisc", "add", "dev", "edge0", "root", "handle", "1:", "htb")
    sh("tc", "-n", ns, "class", "add", "dev", "edge0", "parent", "1:", "classid", "1:13", "htb", "rate", "8mbit", "ceil", "8mbit")
    path = tmp_path / "registry.json"
    sources = collectors_from_config({}, TOPO, str(path))
    reg, _guarded = registry_with(*sources)
    assert reg.get_sample_value(mn.SOURCE_UP, {"source": "network_kernel"}) == 0.0  # testbed not up yet
    links = (LinkEntry("client-edge", "access", ns, "edge0", "bristol", tier="premium", direction="receive", htb_classid="1:13"),
             LinkEntry("wan-bristol-london", "wan", ns, "edge1", "bristol", peer_pop="london"))
    write_registry(Registry(str(tmp_path / "topology.yaml"), str(tmp_path), links=links), path)
    cap = {"slice": "premium", "pop": "bristol", "link": "client-edge", "direction": "receive"}
    assert reg.get_sample_value(mn.LINK_CAP_BPS, cap) == 8e6
    assert reg.get_sample_value(mn.TUNNEL_RECEIVE_BYTES, {"slice": "shared", "pop": "bristol", "peer_pop": "london"}) is not None
    assert reg.get_sample_value(mn.SOURCE_UP, {"source": "network_kernel"}) == 1.0
