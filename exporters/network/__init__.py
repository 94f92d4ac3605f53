"""Network exporter: per-slice link counters, caps, HTB queueing, tunnel bytes and PoP RTT.

Sources (each reports ``inferslice_source_up{source}`` through ``GuardedCollector``):
- ``network_kernel``: kernel interfaces in any namespace, one raw netlink RTM_GETSTATS dump per
  namespace per scrape (``kernel.py``, ``netlink.py``);
- ``network_htb``: HTB classes, batched RTM_GETTCLASS gets (one datagram per ~128 classes); the cap is the
  class's ceil (the rate it can never exceed; ``rate`` is only its guarantee);
- ``network_ovs``: Open vSwitch, one OVSDB JSON-RPC transact per scrape (``ovs.py``);
- ``network_probe``: active UDP RTT probes between PoPs on a background thread (``prober.py``);
- ``network_path``: with a registry, which WAN links each slice's replicas reach the gateway over
  (``inferslice_slice_wan_path_rtt_seconds``, ``path.py``).

Config section (``collectors_from_config(section, topology, registry_path)``), every key optional::

    registry: true            # add the testbed registry's links (default: true when a registry path is given)
    interfaces:               # kernel interfaces
      - ifname: veth-edge     # <= 15 characters
        netns: isx-gw         # /run/netns name or absolute path; absent = the exporter's namespace
        slice: premium        # a tier of the topology, or "shared"
        pop: bristol
        link: client-edge     # default: ifname
        peer_pop: london      # makes it a tunnel: also feeds inferslice_tunnel_*_bytes_total
        invert: false         # swap rx/tx (count from the far end of the wire)
    htb:                      # HTB classes
      - {ifname: veth-edge, netns: isx-gw, classid: "1:11", slice: premium, pop: bristol,
         link: client-edge, direction: receive}   # direction default: transmit (HTB shapes egress)
    ovs:
      socket: /var/run/openvswitch/db.sock        # default
      pop: bristol            # default PoP of this switch's ports and tunnels
      ports:                  # exactly one of port / iface_id each
        - {port: p0, slice: premium, link: edge, invert: false}
        - {iface_id: vllm-0.premium, slice: premium}
      tunnels:                # exactly one of remote_ip / port each
        - {remote_ip: 10.252.0.2, peer_pop: london, slice: shared}
      pods_file: pods.json    # `kubectl get pods -A -o json`: Kube-OVN pods -> ports by iface-id
      subnets: {premium-subnet: premium}   # Kube-OVN logical_switch -> slice (else same-named tier, else CIDR)
      nodes: {node-a: bristol}             # spec.nodeName -> PoP (else ovs.pop)
    probe:
      interval_s: 1.0
      timeout_s: 0.5
      buckets_s: [0.001, 0.005, 0.01, 0.015, 0.02]
      targets:
        - {pop: bristol, peer_pop: london, address: 10.251.0.2, port: 7, netns: isx-bristol}

The registry's links map as: an entry with ``htb_classid`` is that HTB class (slice = tier,
``direction`` as written, default transmit); any other entry is its interface, with ``peer_pop``
making it a tunnel. A link with no tier carries every tier: slice label ``shared``.
"""

from __future__ import annotations

from .config import collectors_from_config
from .kernel import HtbSource, KernelLinkSource
from .mapping import SHARED_SLICE, HtbMap, InterfaceMap, KernelMaps, OvsMaps, OvsPortMap, RegistryMaps, TunnelMap
from .ovs import OvsdbConnection, OvsSource
from .prober import ProbeTarget, RttProber, UdpEchoResponder

__all__ = [
    "SHARED_SLICE",
    "HtbMap",
    "HtbSource",
    "InterfaceMap",
    "KernelLinkSource",
    "KernelMaps",
    "OvsMaps",
    "OvsPortMap",
    "OvsSource",
    "OvsdbConnection",
    "ProbeTarget",
    "RegistryMaps",
    "RttProber",
    "TunnelMap",
    "UdpEchoResponder",
    "collectors_from_config",
]
