"""The RTT prober against a UDP echo responder on 127.0.0.1 and in a namespace we create."""

from __future__ import annotations

import socket
import time

from inferslice import metric_names as mn
from inferslice.exporters.network import ProbeTarget, RttProber, UdpEchoResponder

from .conftest import Namespaces, needs_root, registry_with, sh

PAIR = {"pop": "bristol", "peer_pop": "london"}


def test_probes_an_echo_responder_and_fills_the_histogram() -> None:
    echo = UdpEchoResponder("127.0.0.1")
    prober = RttProber([ProbeTarget("bristol", "london", "127.0.0.1", echo.port)], interval_s=0.05, timeout_s=0.5)
    try:
        assert prober.probe_round() == 1
        reg, _ = registry_with(prober)  # the first collect starts the background thread
        deadline = time.monotonic() + 3
        while (reg.get_sample_value(mn.POP_RTT + "_count", PAIR) or 0) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        count = reg.get_sample_value(mn.POP_RTT + "_count", PAIR)
        assert count is not None and count >= 4
        assert reg.get_sample_value(mn.POP_RTT + "_bucket", {**PAIR, "le": "+Inf"}) == count
        assert 0 < reg.get_sample_value(mn.POP_RTT + "_sum", PAIR) < count * 0.5
    finally:
        prober.close()
        echo.close()
    assert prober._thread is None


def test_injected_clock_places_the_rtt_in_its_bucket() -> None:
    echo = UdpEchoResponder("127.0.0.1")
    ticks = iter([100.0, 100.0, 100.0, 100.012] + [200.0] * 10)  # sent, deadline, wait, answer read
    prober = RttProber([ProbeTarget("bristol", "dublin", "127.0.0.1", echo.port)], timeout_s=10.0, clock=lambda: next(ticks))
    try:
        assert prober.probe_round() == 1
    finally:
        echo.close()
    hist = prober._hist[("bristol", "dublin")]
    assert abs(hist.total - 0.012) < 1e-9
    cumulative = dict(hist.cumulative())
    assert cumulative["0.01"] == 0 and cumulative["0.0125"] == 1
    prober.close()


def test_unanswered_probes_are_not_observed() -> None:
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))  # receives, never answers
    prober = RttProber([ProbeTarget("bristol", "london", "127.0.0.1", silent.getsockname()[1])], timeout_s=0.05)
    try:
        assert prober.probe_round() == 0
        assert prober._hist[("bristol", "london")].cumulative()[-1] == ("+Inf", 0.0)
    finally:
        prober.close()
        silent.close()


@needs_root
def test_probes_from_inside_a_namespace(netns: Namespaces) -> None:
    a, b = netns.add("a"), netns.add("b")
    sh("ip", "-n", a, "link", "add", "pa", "type", "veth", "peer", "name", "pb", "netns", b)
    sh("ip", "-n", a, "addr", "add", "10.78.0.1/30", "dev", "pa")
    sh("ip", "-n", b, "addr", "add", "10.78.0.2/30", "dev", "pb")
    sh("ip", "-n", a, "link", "set", "pa", "up")
    sh("ip", "-n", b, "link", "set", "pb", "up")
    echo = UdpEchoResponder("10.78.0.2", 7007, netns=b)
    prober = RttProber([ProbeTarget("bristol", "london", "10.78.0.2", 7007, netns=a)], timeout_s=1.0)
    try:
        assert prober.probe_round() == 1
    finally:
        prober.close()
        echo.close()
