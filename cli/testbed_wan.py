"""``inferslice testbed wan ACTION``: network causes on the WAN that are not a slice cap.

- ``status [--json]``: every link's physical rate, RTT and cross-traffic in force, and per
  direction what the link forwarded and dropped;
- ``rate LINK RATE``: the link's physical rate (``10M``, ``2.5Mbit``, ``none`` = the topology's);
- ``delay LINK RTT``: its round trip (``30ms``, ``0.03s``, ``30`` = ms, ``none`` = the topology's);
- ``cross LINK RATE [--toward POP] [--protocol udp|tcp] [--duration-s S]``: start iperf3
  cross-traffic over the link (default toward the gateway's end, UDP); ``cross LINK none`` stops the
  link's flows, ``cross all none`` every link's.

LINK is ``a-b`` in either order, or the registry's ``wan-a-b``.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import asdict
from pathlib import Path

from inferslice.common.registry import DEFAULT_STATE_DIR
from inferslice.errors import InputError

_RTT_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s)?\s*$", re.IGNORECASE)


def parse_rtt(text: str) -> float | None:
    """'30ms', '30' (ms), '0.03s' -> seconds; 'none' -> None (the topology's)."""
    if text.strip().lower() in ("none", "off", "default", "nominal"):
        return None
    m = _RTT_RE.match(text)
    if not m:
        raise InputError(f"cannot read RTT {text!r} (e.g. 30ms, 0.03s, 30, none)", "rtt")
    value = float(m.group(1))
    return value if (m.group(2) or "ms").lower() == "s" else value / 1000.0


def _fmt_rate(bps: float | None) -> str:
    return "unshaped (10 Gbit/s line rate)" if bps is None else f"{bps / 1e6:g} Mbit/s"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="wan_command", metavar="ACTION")
    st = sub.add_parser("status", help="rate, RTT and cross-traffic of every WAN link, with what each direction forwarded and dropped")
    st.add_argument("--json", action="store_true", help="one JSON object")
    rate = sub.add_parser("rate", help="set a WAN link's physical rate live (both ends)")
    rate.add_argument("link", help="a-b (either order) or wan-a-b")
    rate.add_argument("rate", help="e.g. 10M, 2.5Mbit, 500k (bit/s), or none: the topology's")
    delay = sub.add_parser("delay", help="set a WAN link's round trip live (the delay line)")
    delay.add_argument("link")
    delay.add_argument("rtt", help="e.g. 30ms, 0.03s, 30 (ms), or none: the topology's")
    cross = sub.add_parser("cross", help="start (or with rate 'none' stop) iperf3 cross-traffic over a WAN link")
    cross.add_argument("link", help="a-b, wan-a-b, or 'all' with rate none")
    cross.add_argument("rate", help="e.g. 8M (bit/s on the wire), or none: stop the link's flows")
    cross.add_argument("--toward", default=None, help="the end the traffic flows to (default: the gateway's end)")
    cross.add_argument("--protocol", choices=("udp", "tcp"), default="udp", help="udp: a fixed rate (default); tcp: elastic")
    cross.add_argument("--duration-s", type=float, default=None, help="end by itself after S s (default: until stopped)")
    for q in (st, rate, delay, cross):
        q.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR, help=f"state directory (default {DEFAULT_STATE_DIR})")


def _status(args: argparse.Namespace) -> int:
    from inferslice.testbed.net.wan import wan_status

    links = wan_status(args.state_dir)
    if args.json:
        print(json.dumps([asdict(w) for w in links], sort_keys=True))
        return 0
    for w in links:
        rtt = f"RTT {w.rtt_s * 1e3:g} ms" + ("" if w.rtt_s == w.nominal_rtt_s else f" (topology {w.nominal_rtt_s * 1e3:g})")
        rate = _fmt_rate(w.capacity_bps)
        if w.capacity_bps != w.nominal_capacity_bps:
            rate += f" (topology {_fmt_rate(w.nominal_capacity_bps)})"
        print(f"{w.name}: {rate}, {rtt}, buffer {w.buffer_s * 1e3:g} ms")
        for d in w.directions:
            print(
                f"  {d.sender:>8} -> {d.receiver:<8} {d.forwarded_bytes / 1e6:9.2f} MB  dropped {d.dropped} "
                f"({d.dropped_full} buffer full)  in flight {d.queued_bytes} B"
            )
        for c in w.cross:
            print(f"  cross {c.id}: {c.protocol} {c.rate_bps / 1e6:g} Mbit/s {c.sender} -> {c.receiver} (port {c.port})")
    return 0


def run(args: argparse.Namespace) -> int:
    from inferslice.testbed.net import parse_rate
    from inferslice.testbed.net.wan import set_wan_delay, set_wan_rate, start_cross_traffic, stop_cross_traffic

    action = getattr(args, "wan_command", None)
    if action == "status":
        return _status(args)
    if action == "rate":
        w = set_wan_rate(args.link, parse_rate(args.rate), args.state_dir)
        print(f"{w.name}: {_fmt_rate(w.capacity_bps)}")
        return 0
    if action == "delay":
        w = set_wan_delay(args.link, parse_rtt(args.rtt), args.state_dir)
        print(f"{w.name}: RTT {w.rtt_s * 1e3:g} ms")
        return 0
    if action == "cross":
        rate = parse_rate(args.rate)
        if rate is None:
            stopped = stop_cross_traffic(None if args.link == "all" else args.link, args.state_dir)
            print(f"stopped {len(stopped)} flows" + (f": {', '.join(stopped)}" if stopped else ""))
            return 0
        if args.link == "all":
            raise InputError("'all' only stops flows (rate none)", "link")
        flow = start_cross_traffic(args.link, rate, args.toward, args.protocol, args.state_dir, args.duration_s)
        print(f"{flow.id}: {flow.protocol} {flow.rate_bps / 1e6:g} Mbit/s {flow.sender} -> {flow.receiver} over {flow.link}")
        return 0
    print("inferslice testbed wan: choose one of status, rate, delay, cross")
    return 2
