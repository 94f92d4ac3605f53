"""RTT probe targets come from the testbed registry (WAN links + each PoP's echo responder)."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path

from inferslice.common.registry import LinkEntry, Registry, write_registry
from inferslice.exporters.network.config import collectors_from_config, registry_probe
from inferslice.exporters.network.prober import RttProber
from inferslice.testbed.engine.host import UdpEcho


def _registry(tmp_path: Path, echo_port: int, netns: str) -> Path:
    links = (
        LinkEntry(name="wan-bristol-london", kind="wan", netns=netns, ifname="isl-w0", pop="bristol", peer_pop="london", rtt_s=0.009),
        LinkEntry(name="wan-london-bristol", kind="wan", netns=netns, ifname="isl-w0", pop="london", peer_pop="bristol", rtt_s=0.009),
        LinkEntry(name="client-edge", kind="access", netns=netns, ifname="isl-edge", pop="bristol", tier="free", direction="receive"),
    )
    services = {"echo-london": f"udp://127.0.0.1:{echo_port}", "echo-bristol": f"udp://127.0.0.1:{echo_port}"}
    write_registry(Registry(topology_path="", state_dir=str(tmp_path), links=links, services=services), tmp_path)
    return tmp_path


def test_targets_follow_wan_links_and_echo_services(tmp_path: Path) -> None:
    probe = registry_probe(str(_registry(tmp_path, 9101, "isl-bristol")))
    assert probe is not None
    assert sorted((t["pop"], t["peer_pop"], t["port"], t["netns"]) for t in probe["targets"]) == [
        ("bristol", "london", 9101, "isl-bristol"),
        ("london", "bristol", 9101, "isl-bristol"),
    ]
    assert registry_probe(str(tmp_path / "missing")) is None


def test_prober_from_registry_measures_rtt_against_an_echo_responder(tmp_path: Path) -> None:
    loop = asyncio.new_event_loop()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    transport, _ = loop.run_until_complete(loop.create_datagram_endpoint(UdpEcho, local_addr=("127.0.0.1", port)))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        reg = _registry(tmp_path, port, "")  # no namespace: probe from here over loopback
        probers = [s for s in collectors_from_config({}, None, str(reg)) if isinstance(s, RttProber)]
        assert len(probers) == 1
        prober = probers[0]
        prober.probe_round()
        prober.probe_round()
        assert prober.answered == prober.sent == 4
        # ``family``, not ``collect``: collect starts the probe thread, whose first round could land
        # before the histograms are read (CI, under load: 3 probes a pair where this test sent 2).
        counts = [s for s in prober.family().samples if s.name.endswith("_count")]
        assert {(s.labels["pop"], s.labels["peer_pop"]): s.value for s in counts} == {("bristol", "london"): 2, ("london", "bristol"): 2}
        prober.close()
    finally:
        loop.call_soon_threadsafe(transport.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()
