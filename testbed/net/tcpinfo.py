"""What TCP does on the client edge: per-namespace loss-recovery counters and per-flow ``ss -ti`` state.

A capped tier's streams leave the gateway namespace (the serving fronts send them), so the sender's
view there says whether the bottleneck queue drops and how TCP recovers: retransmitted segments,
RTO expiries (``TCPTimeouts``), tail-loss probes, and per flow the RTO, backoff and RTT ``ss`` shows.

Parsers are pure (``parse_snmp``, ``parse_ss``, ``summarise``); ``read_counters`` and ``sample_flows``
read one namespace; ``main`` samples a namespace for a while and writes a JSON summary:

    python -m inferslice.testbed.net.tcpinfo --netns isl-bristol --src 10.202.0.1 --duration-s 20 --out tcp.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# /proc/net/snmp (Tcp:) and /proc/net/netstat (TcpExt:) counters that tell loss recovery apart.
COUNTERS = (
    "Tcp:OutSegs",
    "Tcp:RetransSegs",
    "TcpExt:TCPTimeouts",  # RTO expiries
    "TcpExt:TCPLossProbes",  # tail-loss probes sent (PTO ~ 2 x SRTT, not the RTO)
    "TcpExt:TCPLossProbeRecovery",
    "TcpExt:TCPFastRetrans",
    "TcpExt:TCPSlowStartRetrans",
    "TcpExt:TCPSpuriousRTOs",
    "TcpExt:TCPSackRecovery",
)


def parse_snmp(text: str) -> dict[str, int]:
    """``/proc/net/snmp`` or ``/proc/net/netstat`` text -> {"Proto:Name": value}: header and value
    lines come in pairs that start with the same ``Proto:``."""
    out: dict[str, int] = {}
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    for head, values in zip(lines[::2], lines[1::2], strict=False):
        if not head or head[0] != values[0]:
            continue
        proto = head[0].rstrip(":")
        for name, value in zip(head[1:], values[1:], strict=False):
            try:
                out[f"{proto}:{name}"] = int(value)
            except ValueError:
                continue
    return out


@dataclass(frozen=True)
class TcpFlow:
    """One established connection as ``ss -tinO`` shows it (times in ms, as ss prints them)."""

    local: str
    peer: str
    rto_ms: float | None
    rtt_ms: float | None
    cwnd: int | None
    backoff: int
    retrans_total: int  # the second figure of ``retrans:a/b``
    lost: int
    unacked: int
    send_q_bytes: int


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_ss(text: str) -> list[TcpFlow]:
    """``ss -tinOH`` output (one flow per line) -> flows; lines that are not a flow are skipped. ss
    drops the State column when the query names one state, so a line starts with it or with Recv-Q."""
    flows: list[TcpFlow] = []
    for line in text.splitlines():
        parts = line.split()
        if parts and not parts[0].isdigit():
            parts = parts[1:]  # the State column
        if len(parts) < 4 or not parts[0].isdigit() or not parts[1].isdigit():
            continue
        fields: dict[str, str] = {}
        for token in parts[4:]:
            key, sep, value = token.partition(":")
            if sep:
                fields[key] = value
        rtt = fields.get("rtt", "").split("/")[0]
        retrans = fields.get("retrans", "0/0").split("/")
        cwnd = _num(fields.get("cwnd", ""))
        flows.append(
            TcpFlow(
                local=parts[2],
                peer=parts[3],
                rto_ms=_num(fields.get("rto", "")),
                rtt_ms=_num(rtt) if rtt else None,
                cwnd=int(cwnd) if cwnd is not None else None,
                backoff=int(_num(fields.get("backoff", "0")) or 0),
                retrans_total=int(_num(retrans[-1]) or 0),
                lost=int(_num(fields.get("lost", "0")) or 0),
                unacked=int(_num(fields.get("unacked", "0")) or 0),
                send_q_bytes=int(parts[1]),
            )
        )
    return flows


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarise(before: dict[str, int], after: dict[str, int], samples: list[list[TcpFlow]], elapsed_s: float) -> dict[str, Any]:
    """Counter deltas over the run, and over the sampled flows: RTO and RTT spread, how often a flow
    sat in RTO backoff, and how many flows retransmitted at all (each flow's largest total)."""
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in COUNTERS}
    per_flow: dict[tuple[str, str], int] = {}
    rtos: list[float] = []
    rtts: list[float] = []
    backed_off = seen = 0
    for flows in samples:
        for f in flows:
            key = (f.local, f.peer)
            per_flow[key] = max(per_flow.get(key, 0), f.retrans_total)
            seen += 1
            backed_off += f.backoff > 0
            if f.rto_ms is not None:
                rtos.append(f.rto_ms)
            if f.rtt_ms is not None:
                rtts.append(f.rtt_ms)
    out_segs = delta["Tcp:OutSegs"]
    return {
        "elapsed_s": round(elapsed_s, 2),
        "counters": delta,
        "retrans_per_100_segs": round(100.0 * delta["Tcp:RetransSegs"] / out_segs, 3) if out_segs else None,
        "flows": len(per_flow),
        "flows_that_retransmitted": sum(1 for v in per_flow.values() if v > 0),
        "flow_samples": seen,
        "samples_in_rto_backoff": backed_off,
        "rto_ms": {"min": min(rtos, default=None), "median": statistics.median(rtos) if rtos else None, "max": max(rtos, default=None)},
        "srtt_ms": {"median": statistics.median(rtts) if rtts else None, "p90": _pct(rtts, 0.9), "max": max(rtts, default=None)},
    }


# -- I/O -------------------------------------------------------------------------------------------
def _in_netns(netns: str, argv: list[str]) -> str:
    return subprocess.run(["ip", "netns", "exec", netns, *argv], check=True, capture_output=True, text=True).stdout


def read_counters(netns: str) -> dict[str, int]:
    """The namespace's TCP counters (``/proc/net`` is per namespace of the reader: read it from inside)."""
    return parse_snmp(_in_netns(netns, ["cat", "/proc/net/snmp", "/proc/net/netstat"]))


def sample_flows(netns: str, src: str | None = None) -> list[TcpFlow]:
    """Established flows in ``netns`` (from local address ``src`` when given)."""
    argv = ["ss", "-tinOH", "state", "established"]
    if src:
        argv += ["src", src]
    return parse_ss(_in_netns(netns, argv))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="inferslice.testbed.net.tcpinfo", description=__doc__.splitlines()[0])
    p.add_argument("--netns", required=True, help="namespace of the senders (the gateway: the fronts stream from there)")
    p.add_argument("--src", default=None, help="only flows from this local address (a tier's front)")
    p.add_argument("--duration-s", type=float, default=20.0)
    p.add_argument("--interval-s", type=float, default=0.5, help="ss sampling period")
    p.add_argument("--out", type=Path, default=None, help="JSON summary (stdout when absent)")
    args = p.parse_args(argv)
    start = time.monotonic()
    before = read_counters(args.netns)
    samples: list[list[TcpFlow]] = []
    while time.monotonic() - start < args.duration_s:
        samples.append(sample_flows(args.netns, args.src))
        time.sleep(args.interval_s)
    summary = summarise(before, read_counters(args.netns), samples, time.monotonic() - start)
    summary["last_sample"] = [asdict(f) for f in samples[-1]] if samples else []
    text = json.dumps(summary, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
