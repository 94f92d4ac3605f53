"""Network causes on the WAN that are not a slice cap: a link's physical rate, its delay, and
cross-traffic filling it. All change live on a running testbed.

- **Rate** (``set_wan_rate``): each WAN link carries at most its physical rate (topology
  ``capacity_bps``): the delay line serialises each direction at it through a drop-tail buffer of
  ``buffer_ms`` at the rate, away from every sender (delayline.py says why not a local qdisc).
  Lowering it is a degraded or re-routed link; traffic over it then saturates it at its physical
  rate with no slice cap binding.
- **Delay** (``set_wan_delay``): the delay line's RTT for the link, changed through its control
  socket; packets in flight keep their release time and the wire never reorders.
- **Cross-traffic** (``start_cross_traffic``): iperf3 between the link's two PoP namespaces, bound
  to the link's own underlay addresses so it crosses that link only, toward one end (by default
  the gateway's, the direction the tiers' response streams take). UDP at a fixed wire rate leaves
  the link ``rate - cross`` for everyone else (inelastic traffic, the controllable case); TCP
  competes for a fair share.

Every change is recorded in the testbed's state file and in the registry (a wan link entry's
``capacity_bps`` and ``rtt_s``), so the exporter and the status report say what is in force. The
iperf3 processes are PID-file processes of the testbed: ``down`` stops them too.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from inferslice.common.registry import DEFAULT_STATE_DIR
from inferslice.errors import InputError, PermanentError
from inferslice.testbed.net import delayline, procs
from inferslice.testbed.net.lifecycle import (
    delayline_socket,
    plan_from_state,
    require_root,
    update_registry_links,
    write_state,
)
from inferslice.testbed.net.plan import NetPlan, WanLink

PROTOCOLS = ("udp", "tcp")
CROSS_PORT_BASE = 5300  # iperf3 ports: 5300 + 10 x link index + flow number (iperf3's own default is 5201)
MAX_FLOWS_PER_LINK = 10
UDP_PAYLOAD_BYTES = 1400  # + 8 UDP + 20 IP = 1428 B on the TUN, under its 1500 MTU
UDP_WIRE_BYTES = UDP_PAYLOAD_BYTES + 28
FOREVER_S = 86_400  # iperf3 needs a duration; a day outlives any run (stop_cross_traffic ends it)
SERVER_READY_S = 5.0  # iperf3 -s listens within milliseconds; allow for a loaded machine
IPERF3 = "iperf3"


@dataclass(frozen=True)
class CrossTraffic:
    """One iperf3 flow across a WAN link, from ``sender`` to ``receiver`` (the link's two ends)."""

    id: str  # "cross-bristol-london-0": the PID-file names are <id>-server / <id>-client
    link: str  # "wan-bristol-london"
    sender: str
    receiver: str
    rate_bps: float  # on the wire (UDP: IP packets; TCP: iperf3's -b pacing of payload)
    protocol: str
    port: int
    server_pid: int
    client_pid: int
    started_s: float


@dataclass(frozen=True)
class WanDirection:
    """One direction of a link as the delay line saw it since the testbed came up."""

    sender: str
    receiver: str
    forwarded_packets: int
    forwarded_bytes: int
    dropped: int  # every packet lost on the link
    dropped_full: int  # of which the buffer was full (congestion)
    queued_bytes: int  # in flight or waiting for the wire now


@dataclass(frozen=True)
class WanLinkState:
    name: str  # "wan-bristol-london"
    a: str
    b: str
    rtt_s: float  # in force now
    nominal_rtt_s: float  # the topology's
    capacity_bps: float | None  # the physical rate in force (None: unshaped, the 10 Gbit/s line rate)
    nominal_capacity_bps: float | None
    buffer_s: float
    cross: tuple[CrossTraffic, ...]
    directions: tuple[WanDirection, ...] = ()  # a -> b, then b -> a


# -- state -----------------------------------------------------------------------------------------
def _link_state(state: dict[str, Any], w: WanLink) -> dict[str, Any]:
    wan = state.setdefault("wan", {})
    entry: dict[str, Any] = wan.setdefault(w.name, {})
    entry.setdefault("rtt_s", w.rtt_s)
    entry.setdefault("capacity_bps", w.rate_bps)
    entry.setdefault("cross", [])
    return entry


def _resolve(link: str, state_dir: Path) -> tuple[NetPlan, dict[str, Any], WanLink]:
    plan, state = plan_from_state(Path(state_dir))
    try:
        w = plan.wan_link(link)
    except KeyError as err:
        raise InputError(str(err.args[0]), "link") from None
    return plan, state, w


# -- rate and delay --------------------------------------------------------------------------------
def set_wan_rate(link: str, rate_bps: float | None, state_dir: Path = DEFAULT_STATE_DIR) -> WanLinkState:
    """Set a WAN link's physical rate on both ends (None: back to the topology's, or unshaped)."""
    require_root()
    if rate_bps is not None and not (math.isfinite(rate_bps) and rate_bps > 0):
        raise InputError("a link rate must be positive (use 'none' for the topology's)", "rate")
    state_dir = Path(state_dir)
    _, state, w = _resolve(link, state_dir)
    capacity = rate_bps if rate_bps is not None else w.rate_bps
    _control(state_dir, {"op": "set_rate", "ifname": w.ifname, "rate_bps": capacity})
    _link_state(state, w)["capacity_bps"] = capacity
    write_state(state_dir, state)
    _update_registry(state_dir, w, capacity_bps=capacity)
    return wan_link_state(link, state_dir)


def set_wan_delay(link: str, rtt_s: float | None, state_dir: Path = DEFAULT_STATE_DIR) -> WanLinkState:
    """Set a WAN link's round trip live in the delay line (None: back to the topology's)."""
    require_root()
    if rtt_s is not None and not (math.isfinite(rtt_s) and 0 <= rtt_s <= delayline.MAX_RTT_S):
        raise InputError(f"an RTT must be in [0, {delayline.MAX_RTT_S:g}] s", "rtt")
    state_dir = Path(state_dir)
    _, state, w = _resolve(link, state_dir)
    rtt = w.rtt_s if rtt_s is None else rtt_s
    _control(state_dir, {"op": "set_rtt", "ifname": w.ifname, "rtt_s": rtt})
    _link_state(state, w)["rtt_s"] = rtt
    write_state(state_dir, state)
    _update_registry(state_dir, w, rtt_s=rtt)
    return wan_link_state(link, state_dir)


def _control(state_dir: Path, message: dict[str, Any]) -> dict[str, Any]:
    try:
        reply = delayline.request(str(delayline_socket(state_dir)), message)
    except (OSError, ValueError) as err:
        raise PermanentError(f"the delay line's control socket did not answer ({err}): is the testbed up?") from None
    if not reply.get("ok"):
        raise PermanentError(f"the delay line refused {message.get('op')}: {reply.get('error')}")
    return reply


def _update_registry(state_dir: Path, w: WanLink, **changes: Any) -> None:
    names = {f"wan-{w.a}-{w.b}", f"wan-{w.b}-{w.a}"}
    update_registry_links(state_dir, lambda lk: dataclasses.replace(lk, **changes) if lk.kind == "wan" and lk.name in names else lk)


# -- cross-traffic ---------------------------------------------------------------------------------
def _wait_listening(state_dir: Path, name: str, pid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    log = procs.log_path(state_dir, name)
    while time.monotonic() < deadline:
        try:
            if "Server listening" in log.read_text(errors="replace"):
                return
        except OSError:
            pass
        if not procs.is_running(procs.PidFile(name, pid, None)):
            break
        time.sleep(0.02)
    raise PermanentError(f"iperf3 server {name} did not start listening; see {log}")


def start_cross_traffic(
    link: str,
    rate_bps: float,
    toward: str | None = None,
    protocol: str = "udp",
    state_dir: Path = DEFAULT_STATE_DIR,
    duration_s: float | None = None,
) -> CrossTraffic:
    """Start one iperf3 flow across ``link`` toward PoP ``toward`` (default: the gateway's end).

    UDP sends ``rate_bps`` of IP packets whatever the link does (iperf3 -b counts payload: it is
    scaled by payload/wire bytes); TCP paces its payload at ``rate_bps`` and backs off when the link
    is full. Returns once the flow's sender runs; ``stop_cross_traffic`` ends it."""
    require_root()
    if protocol not in PROTOCOLS:
        raise InputError(f"protocol must be one of {', '.join(PROTOCOLS)}", "protocol")
    if not (math.isfinite(rate_bps) and rate_bps > 0):
        raise InputError("a cross-traffic rate must be positive", "rate")
    if duration_s is not None and not duration_s > 0:
        raise InputError("a duration must be positive", "duration")
    state_dir = Path(state_dir)
    plan, state, w = _resolve(link, state_dir)
    receiver = toward if toward is not None else (plan.gateway if plan.gateway in (w.a, w.b) else None)
    if receiver is None:
        raise InputError(f"{w.name} does not touch the gateway: say which end the traffic goes toward", "toward")
    if receiver not in (w.a, w.b):
        raise InputError(f"{receiver!r} is not an end of {w.name} ({w.a}, {w.b})", "toward")
    sender = w.other(receiver)
    entry = _link_state(state, w)
    used = {int(c["port"]) for c in entry["cross"]}
    k = next((i for i in range(MAX_FLOWS_PER_LINK) if CROSS_PORT_BASE + 10 * w.index + i not in used), None)
    if k is None:
        raise PermanentError(f"{w.name} already carries {MAX_FLOWS_PER_LINK} cross-traffic flows")
    port = CROSS_PORT_BASE + 10 * w.index + k
    flow_id = f"cross-{w.a}-{w.b}-{k}"
    rx_ns, rx_ip = w.end(receiver)
    tx_ns, tx_ip = w.end(sender)
    server = f"{flow_id}-server"
    client = f"{flow_id}-client"
    # A log of an earlier flow under the same name would satisfy the readiness check at once.
    procs.log_path(state_dir, server).unlink(missing_ok=True)
    server_pid = procs.spawn(server, [IPERF3, "-s", "-B", rx_ip, "-p", str(port), "--forceflush"], state_dir, netns=rx_ns)
    try:
        _wait_listening(state_dir, server, server_pid, SERVER_READY_S)
        payload_bps = rate_bps * UDP_PAYLOAD_BYTES / UDP_WIRE_BYTES if protocol == "udp" else rate_bps
        argv = [IPERF3, "-c", rx_ip, "-B", tx_ip, "-p", str(port), "-b", f"{payload_bps:.0f}",
                "-t", str(math.ceil(duration_s) if duration_s else FOREVER_S), "--forceflush"]  # fmt: skip
        if protocol == "udp":
            argv += ["-u", "-l", str(UDP_PAYLOAD_BYTES)]
        client_pid = procs.spawn(client, argv, state_dir, netns=tx_ns)
    except BaseException:
        procs.stop(state_dir, server)
        raise
    flow = CrossTraffic(flow_id, w.name, sender, receiver, float(rate_bps), protocol, port, server_pid, client_pid, time.time())
    entry["cross"].append(asdict(flow))
    write_state(state_dir, state)
    return flow


def stop_cross_traffic(link: str | None = None, state_dir: Path = DEFAULT_STATE_DIR) -> list[str]:
    """Stop every cross-traffic flow on ``link`` (None: on every link); returns the flows' ids."""
    require_root()
    state_dir = Path(state_dir)
    plan, state = plan_from_state(state_dir)
    links = [plan.wan_link(link)] if link is not None else list(plan.wan)
    stopped: list[str] = []
    for w in links:
        entry = _link_state(state, w)
        for flow in entry["cross"]:
            procs.stop(state_dir, f"{flow['id']}-client")
            procs.stop(state_dir, f"{flow['id']}-server")
            stopped.append(str(flow["id"]))
        entry["cross"] = []
    write_state(state_dir, state)
    return stopped


# -- status ----------------------------------------------------------------------------------------
def wan_link_state(link: str, state_dir: Path = DEFAULT_STATE_DIR, *, counters: bool = True) -> WanLinkState:
    _, state, w = _resolve(link, Path(state_dir))
    entry = _link_state(state, w)
    directions: tuple[WanDirection, ...] = ()
    if counters:
        seen = _control(Path(state_dir), {"op": "status"})["links"][w.ifname]["directions"]
        directions = tuple(
            WanDirection(src, dst, *(int(c[k]) for k in ("forwarded", "forwarded_bytes", "dropped", "dropped_full", "queued_bytes")))
            for (src, dst), c in zip(((w.a, w.b), (w.b, w.a)), seen, strict=True)
        )
    return WanLinkState(
        name=w.name,
        a=w.a,
        b=w.b,
        rtt_s=float(entry["rtt_s"]),
        nominal_rtt_s=w.rtt_s,
        capacity_bps=None if entry["capacity_bps"] is None else float(entry["capacity_bps"]),
        nominal_capacity_bps=w.rate_bps,
        buffer_s=w.buffer_s,
        cross=tuple(CrossTraffic(**c) for c in entry["cross"]),
        directions=directions,
    )


def wan_status(state_dir: Path = DEFAULT_STATE_DIR, *, counters: bool = True) -> list[WanLinkState]:
    """Every WAN link's rate, delay and cross-traffic in force (and, with ``counters``, what the delay line forwarded and dropped)."""
    plan, _ = plan_from_state(Path(state_dir))
    return [wan_link_state(w.name, state_dir, counters=counters) for w in plan.wan]


def iperf3_available() -> bool:
    try:
        return subprocess.run([IPERF3, "--version"], capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
