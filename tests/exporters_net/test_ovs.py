"""The OVS source against a private ovsdb-server + ovs-vswitchd (userspace datapath) in a namespace."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from inferslice import metric_names as mn
from inferslice.common.netns import in_netns
from inferslice.exporters.network import OvsdbConnection, OvsMaps, OvsPortMap, OvsSource, TunnelMap

from .conftest import Namespaces, needs_root, registry_with, sh

SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")


class PrivateOvs:
    def __init__(self, rundir: Path, ns: str) -> None:
        self.rundir, self.ns = rundir, ns
        self.db_sock = str(rundir / "db.sock")
        self.env = {**os.environ, **{k: str(rundir) for k in ("OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR")}}

    def run(self, *args: str) -> None:
        subprocess.run(list(args), check=True, capture_output=True, text=True, timeout=20, env=self.env)

    def vsctl(self, *args: str) -> None:
        self.run("ovs-vsctl", f"--db=unix:{self.db_sock}", "--timeout=10", *args)

    def start(self) -> None:
        d = self.rundir
        self.run("ovsdb-tool", "create", str(d / "conf.db"), str(SCHEMA))
        self.run("ip", "netns", "exec", self.ns, "ovsdb-server", str(d / "conf.db"), f"--remote=punix:{self.db_sock}",
                 f"--unixctl={d}/ovsdb.ctl", f"--pidfile={d}/ovsdb.pid", f"--log-file={d}/ovsdb.log", "--detach")
        self.vsctl("--no-wait", "init")
        self.run("ip", "netns", "exec", self.ns, "ovs-vswitchd", f"unix:{self.db_sock}", f"--unixctl={d}/vswitchd.ctl",
                 f"--pidfile={d}/vswitchd.pid", f"--log-file={d}/vswitchd.log", "--detach")

    def stop(self) -> None:
        for name in ("vswitchd.pid", "ovsdb.pid"):
            pidfile = self.rundir / name
            try:
                pid = int(pidfile.read_text().strip())
            except (OSError, ValueError):
                continue
            try:
                os.kill(pid, signal.SIGTERM)
                for _ in range(50):
                    os.kill(pid, 0)
                    time.sleep(0.05)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def ovs(netns: Namespaces, tmp_path: Path) -> Iterator[PrivateOvs]:
    if not all(shutil.which(b) for b in ("ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovsdb-tool")) or not SCHEMA.exists():
        pytest.skip("Open vSwitch binaries or schema not installed")
    ns = netns.add("o")
    short = Path(f"/tmp/isxovs{os.getpid()}")  # unix socket paths must stay under 108 bytes
    short.mkdir(exist_ok=True)
    private = PrivateOvs(short, ns)
    try:
        try:
            private.start()
            private.vsctl("add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev")
        except subprocess.CalledProcessError as err:
            pytest.skip(f"cannot start a private OVS: {err.stderr.strip()[:200]}")
        yield private
    finally:
        private.stop()
        shutil.rmtree(short, ignore_errors=True)


@needs_root
def test_ovs_source_reads_ports_qos_policing_and_tunnels(ovs: PrivateOvs, netns: Namespaces) -> None:
    ns = ovs.ns
    pod = netns.add("p")
    sh("ip", "netns", "exec", pod, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1")
    sh("ip", "-n", ns, "link", "add", "p0", "type", "veth", "peer", "name", "eth0", "netns", pod)
    sh("ip", "-n", ns, "link", "set", "p0", "up")
    sh("ip", "-n", pod, "addr", "add", "10.203.0.5/24", "dev", "eth0")
    sh("ip", "-n", pod, "link", "set", "eth0", "up")
    ovs.vsctl("add-port", "br0", "p0", "--", "set", "interface", "p0", "external_ids:iface-id=vllm-0.premium")
    ovs.vsctl("add-port", "br0", "tun0", "--", "set", "interface", "tun0", "type=geneve", "options:remote_ip=10.252.0.2")
    ovs.vsctl("set", "port", "p0", "qos=@q", "--", "--id=@q", "create", "qos", "type=linux-htb", "other-config:max-rate=10000000",
              "queues:0=@q0", "--", "--id=@q0", "create", "queue", "other-config:max-rate=5000000")
    ovs.vsctl("set", "interface", "p0", "ingress_policing_rate=2000")
    maps = OvsMaps((OvsPortMap("premium", "bristol", "vllm-0", iface_id="vllm-0.premium", invert=True),),
                   (TunnelMap("london", "bristol", remote_ip="10.252.0.2"),))
    source = OvsSource(lambda: maps, OvsdbConnection(ovs.db_sock))
    reg, guarded = registry_with(source)
    link = {"slice": "premium", "pop": "bristol", "link": "vllm-0"}
    # Pod viewpoint: receive is capped by the HTB QoS (the queue's 5 Mbit/s binds), transmit by policing.
    assert reg.get_sample_value(mn.LINK_CAP_BPS, {**link, "direction": "receive"}) == 5e6
    assert reg.get_sample_value(mn.LINK_CAP_BPS, {**link, "direction": "transmit"}) == 2e6
    assert reg.get_sample_value(mn.TUNNEL_TRANSMIT_BYTES, {"slice": "shared", "pop": "bristol", "peer_pop": "london"}) is not None
    # Traffic from the pod into the switch: the pod transmits. OVS refreshes statistics every 5 s.
    sender = in_netns(pod, lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    sh("ip", "-n", pod, "neigh", "add", "10.203.0.9", "lladdr", "02:00:00:00:00:99", "dev", "eth0", "nud", "permanent")
    for _ in range(30):
        sender.sendto(b"y" * 500, ("10.203.0.9", 9))
    sender.close()
    deadline = time.monotonic() + 12
    tx = 0.0
    while time.monotonic() < deadline:
        tx = reg.get_sample_value(mn.LINK_TRANSMIT_BYTES, link) or 0.0
        if tx >= 30 * 542:
            break
        time.sleep(0.5)
    assert tx >= 30 * 542
    assert reg.get_sample_value(mn.SOURCE_UP, {"source": "network_ovs"}) == 1.0
    # ovsdb-server gone: the source is down, then back after a restart would reconnect.
    ovs.stop()
    assert reg.get_sample_value(mn.SOURCE_UP, {"source": "network_ovs"}) == 0.0
    assert "ovsdb" in guarded.last_errors["network_ovs"]
