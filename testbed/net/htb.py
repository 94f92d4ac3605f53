"""Client-edge bandwidth caps: one HTB class per tier on each end of the edge veth.

The gateway end's egress is what a tier's clients *receive* (the response stream), classified by
the tier subnet as source address; the client end's egress is what they *transmit*, classified by
destination. Unclassified traffic takes an uncapped default class. Caps change live with
``tc class change`` (no teardown), so a running transfer follows the new rate at once.

Parameters that matter at 0.5 Mbit/s: the quantum is set explicitly to one full frame (the r2q
default would be far too small at low rates and too large at 10 Gbit/s), and burst/cburst are
``max(2 frames, 2 ms at the rate)``: small enough that a burst is a negligible part of a few
seconds at 0.3 Mbit/s, large enough for the timer to keep up at 100 Mbit/s and above. GSO is cut
on the edge devices (gso_max_size) so HTB meters real frames, not 64 KB super-packets.

The bottleneck queue: with a buffer time configured (topology ``client.edge_buffer_ms``), each tier
class gets a drop-tail ``bfifo`` leaf holding that many seconds at the class's rate, resized with
the rate, as a real access link's buffer is sized in time at its line rate. Without one, the
kernel's default leaf (pfifo of ``txqueuelen`` packets) stays.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from inferslice.errors import InputError

ETH_P_IP = 0x0800
FRAME_BYTES = 1514  # one Ethernet frame at MTU 1500: the HTB quantum
MIN_BURST_BYTES = 2 * FRAME_BYTES  # two frames: always lets one full frame through
BURST_TIME_S = 0.002  # 2 ms at the rate: covers timer granularity at 100 Mbit/s and above
FILTER_PRIO = 10
# An uncapped class's time-sized buffer would be gigabytes at 10 Gbit/s: nothing at the testbed's
# rates fills 64 MB, and the kernel must not be asked to account for more.
MAX_LEAF_BYTES = 64 * 1024 * 1024

DIRECTIONS = ("receive", "transmit")

_RATE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)(bit|bps|b)?(?:/s)?\s*$", re.IGNORECASE)
_MULT = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


def parse_rate(text: str) -> float | None:
    """'500k', '0.5M', '2Mbit', '1000000' -> bits/s; 'none' / 'off' / 'uncapped' -> None."""
    if text.strip().lower() in ("none", "off", "uncapped", "null"):
        return None
    m = _RATE_RE.match(text)
    if not m:
        raise InputError(f"cannot read rate {text!r} (e.g. 500k, 0.5M, 2Mbit, 1000000, none)", "rate")
    value = float(m.group(1)) * _MULT[m.group(2).lower()]
    if value <= 0:
        raise InputError("a cap must be positive (use 'none' to uncap)", "rate")
    return value


def burst_bytes(rate_bps: float, burst_s: float | None = None) -> int:
    """The class's token bucket: ``burst_s`` at the rate (a policer's), else ``max(2 frames, 2 ms)``."""
    return max(MIN_BURST_BYTES, int(rate_bps / 8 * (BURST_TIME_S if burst_s is None else burst_s)))


def class_kwargs(rate_bps: float, burst_s: float | None = None) -> dict[str, Any]:
    """pyroute2 ``tc('add-class'|'change-class', 'htb', ...)`` arguments for a flat class at a rate."""
    rate_Bps = max(1, int(rate_bps / 8))
    burst = burst_bytes(rate_bps, burst_s)
    return {
        "parent": 0x10000,
        "rate": rate_Bps,
        "ceil": rate_Bps,
        "burst": burst,
        "cburst": burst,
        "quantum": FRAME_BYTES,
        "mtu": FRAME_BYTES,
    }


def leaf_limit_bytes(rate_bps: float, buffer_s: float) -> int:
    """Drop-tail limit of a class's queue: ``buffer_s`` at the rate, never under two full frames (a
    queue that cannot hold the frame in service and one more drops every burst)."""
    return min(MAX_LEAF_BYTES, max(MIN_BURST_BYTES, int(rate_bps / 8 * buffer_s)))


def leaf_handle(classid: int) -> int:
    """The leaf qdisc of class ``1:N`` is ``N:`` (tc's usual convention)."""
    return (classid & 0xFFFF) << 16


def u32_key(subnet_network: int, prefixlen: int, offset: int) -> str:
    mask = (0xFFFFFFFF << (32 - prefixlen)) & 0xFFFFFFFF if prefixlen else 0
    return f"0x{subnet_network & mask:08x}/0x{mask:08x}+{offset}"


class _TcSocket(Protocol):
    def tc(self, command: str, kind: str = ..., index: int = ..., handle: Any = ..., **kwarg: Any) -> Any: ...


Shape = Callable[[float], tuple[float | None, float | None]]  # rate -> (burst_s, buffer_s)


def install(
    ipr: Any,
    ifindex: int,
    classes: list[tuple[int, float, int, int, int]],
    default_minor: int,
    line_rate_bps: float,
    buffer_s: float | None = None,
    shape: Shape | None = None,
) -> None:
    """Root HTB 1: with default class ``1:default_minor`` at the line rate, plus one class per entry
    ``(classid, rate_bps, subnet_int, prefixlen, u32_offset)`` with a u32 filter on the address at
    ``u32_offset`` (12: source, 16: destination) and, with ``buffer_s``, a drop-tail leaf queue of
    that many seconds at the class's rate. ``shape(rate)`` gives each class its (burst_s, buffer_s)
    instead (a policer's bucket and its two-frame leaf)."""
    ipr.tc("add", "htb", ifindex, 0x10000, default=default_minor)
    ipr.tc("add-class", "htb", ifindex, 0x10000 | default_minor, **class_kwargs(line_rate_bps))
    for classid, rate_bps, net, plen, offset in classes:
        burst_s, buffer_s = shape(rate_bps) if shape is not None else (None, buffer_s)
        ipr.tc("add-class", "htb", ifindex, classid, **class_kwargs(rate_bps, burst_s))
        if buffer_s is not None:
            ipr.tc("add", "bfifo", ifindex, leaf_handle(classid), parent=classid, limit=leaf_limit_bytes(rate_bps, buffer_s))
        ipr.tc(
            "add-filter",
            "u32",
            ifindex,
            parent=0x10000,
            prio=FILTER_PRIO,
            protocol=ETH_P_IP,  # pyroute2 converts to network order itself
            target=classid,
            keys=[u32_key(net, plen, offset)],
        )


def change_rate(ipr: Any, ifindex: int, classid: int, rate_bps: float, buffer_s: float | None = None, burst_s: float | None = None) -> None:
    """A new rate for a class; its time-sized leaf queue (if any) follows, so the buffer stays ``buffer_s`` long,
    and so does its bucket (``burst_s`` at the rate, where given)."""
    ipr.tc("change-class", "htb", ifindex, classid, **class_kwargs(rate_bps, burst_s))
    if buffer_s is not None:
        ipr.tc("change", "bfifo", ifindex, leaf_handle(classid), parent=classid, limit=leaf_limit_bytes(rate_bps, buffer_s))


@dataclass(frozen=True)
class HtbClassStats:
    classid: str  # "1:11"
    bytes: int
    packets: int
    drops: int
    overlimits: int
    backlog_bytes: int
    qlen: int
    rate_bps: float  # configured rate
    ceil_bps: float  # configured ceil


def _classid_str(handle: int) -> str:
    return f"{handle >> 16:x}:{handle & 0xFFFF:x}"


def _get(msg: Any, name: str) -> Any:
    """Attribute lookup on a pyroute2 message or on its ``dict`` form (``{'attrs': [(k, v), ...]}``)."""
    if hasattr(msg, "get_attr"):
        return msg.get_attr(name)
    for key, value in msg.get("attrs", []):
        if key == name:
            return value
    return None


def _field(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    try:
        return obj[name]
    except (KeyError, TypeError):
        return None


def parse_htb_class(msg: Any) -> HtbClassStats | None:
    """One RTM_NEWTCLASS message (pyroute2 object or its dict form) -> stats; None if not HTB."""
    if _get(msg, "TCA_KIND") != "htb":
        return None
    handle = int(_field(msg, "handle") or 0)
    stats2 = _get(msg, "TCA_STATS2")
    basic = _get(stats2, "TCA_STATS_BASIC") if stats2 is not None else None
    queue = _get(stats2, "TCA_STATS_QUEUE") if stats2 is not None else None
    legacy = _get(msg, "TCA_STATS")  # struct tc_stats: present on every kernel
    opts = _get(msg, "TCA_OPTIONS")
    parms = _get(opts, "TCA_HTB_PARMS") if opts is not None else None
    rate64 = _get(opts, "TCA_HTB_RATE64") if opts is not None else None
    ceil64 = _get(opts, "TCA_HTB_CEIL64") if opts is not None else None

    def num(*sources: tuple[Any, str]) -> int:
        for obj, key in sources:
            v = _field(obj, key)
            if v is not None:
                return int(v)
        return 0

    rate_Bps = int(rate64) if rate64 else num((parms, "rate"))
    ceil_Bps = int(ceil64) if ceil64 else num((parms, "ceil"))
    return HtbClassStats(
        classid=_classid_str(handle),
        bytes=num((basic, "bytes"), (legacy, "bytes")),
        packets=num((basic, "packets"), (legacy, "packets")),
        drops=num((queue, "drops"), (legacy, "drops")),
        overlimits=num((queue, "overlimits"), (legacy, "overlimits")),
        backlog_bytes=num((queue, "backlog"), (legacy, "backlog")),
        qlen=num((queue, "qlen"), (legacy, "qlen")),
        rate_bps=rate_Bps * 8.0,
        ceil_bps=ceil_Bps * 8.0,
    )


def read_classes(ipr: Any, ifindex: int) -> dict[str, HtbClassStats]:
    out: dict[str, HtbClassStats] = {}
    for msg in ipr.get_classes(ifindex):
        st = parse_htb_class(msg)
        if st is not None:
            out[st.classid] = st
    return out
