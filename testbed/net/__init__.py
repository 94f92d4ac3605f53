"""The local testbed's real kernel networking and process lifecycle (network namespaces, a TUN
delay line for WAN RTTs, a VXLAN overlay per tier, HTB caps on the client edge).

Design note: docs/testbed-network.md.
"""

from inferslice.testbed.net.htb import HtbClassStats, parse_htb_class, parse_rate
from inferslice.testbed.net.lifecycle import (
    EdgeCounters,
    ServiceSpec,
    ServiceStartError,
    default_services,
    down,
    edge_counters,
    set_cap,
    status,
    up,
)
from inferslice.testbed.net.plan import DEFAULT_PREFIX, NetPlan, net_plan

__all__ = [
    "DEFAULT_PREFIX",
    "EdgeCounters",
    "HtbClassStats",
    "NetPlan",
    "ServiceSpec",
    "ServiceStartError",
    "default_services",
    "down",
    "edge_counters",
    "net_plan",
    "parse_htb_class",
    "parse_rate",
    "set_cap",
    "status",
    "up",
]
