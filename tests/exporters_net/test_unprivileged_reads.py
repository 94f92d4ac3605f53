"""What the exporter reads through netlink needs no privilege: as uid 65534 with every capability
dropped, inside a namespace the test made, it reads link counters and HTB classes (the kernel
checks CAP_NET_ADMIN only for rtnetlink requests that change something). This is why the exporter
container runs as a non-root user with no capability (deploy/platform.py, EXPORTER_NEEDS)."""

from __future__ import annotations

import ast
import sys

from .conftest import Namespaces, needs_root, sh

CODE = """
import socket
from inferslice.exporters.network.netlink import NetlinkSocket
status = open("/proc/self/status").read()
print("uid", status.split("Uid:")[1].split()[0], "CapEff", status.split("CapEff:")[1].split()[0])
nl = NetlinkSocket()
print("links", sorted(s.ifindex for s in nl.link_stats()))
print("htb", [(c.handle, c.rate_bps) for c in nl.htb_classes(socket.if_nametoindex("v0"))])
"""


@needs_root
def test_netlink_counters_and_htb_classes_read_without_privilege(netns: Namespaces, unprivileged_argv: list[str]) -> None:
    ns = netns.add("u")
    sh("ip", "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1")
    for dev in ("v0", "v1"):
        sh("ip", "-n", ns, "link", "set", dev, "up")
    sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "v0", "root", "handle", "1:", "htb", "default", "10")
    sh("ip", "netns", "exec", ns, "tc", "class", "add", "dev", "v0", "parent", "1:", "classid", "1:10", "htb", "rate", "5mbit")
    out = sh("ip", "netns", "exec", ns, *unprivileged_argv, sys.executable, "-c", CODE, check=False)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    assert lines["uid"] == "65534 CapEff 0000000000000000"
    assert len(ast.literal_eval(lines["links"])) == 3  # lo, v0, v1
    assert ast.literal_eval(lines["htb"]) == [(0x10010, 5e6)]
