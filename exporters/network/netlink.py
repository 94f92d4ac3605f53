"""Raw rtnetlink: one dump per scrape, parsed by pure functions into frozen dataclasses.

Why raw sockets rather than pyroute2: pyroute2 decodes every attribute of every message into
Python objects (``get_links`` took 13 ms for 51 links here); a raw ``RTM_GETSTATS`` dump with only
``IFLA_STATS_LINK_64`` requested took 0.05 ms. We request exactly what we export and unpack it
with ``struct``.

Sockets are opened *inside* a network namespace by a short-lived helper thread that calls
``setns(2)``: a netlink socket stays bound to the namespace it was created in, so later reads need
no namespace switch and no fork (pyroute2's NetNS forks a helper process). The switch happens on a
throwaway thread so the caller's thread never leaves its own namespace.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator
from typing import NamedTuple

from inferslice.common.netns import in_netns
from inferslice.errors import ParseError, SourceUnavailable

# linux/netlink.h, linux/rtnetlink.h, linux/if_link.h, linux/pkt_sched.h, linux/gen_stats.h
NLMSG_ERROR = 2
NLMSG_DONE = 3
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLM_F_ECHO = 0x8
RTM_NEWLINK = 16
RTM_GETLINK = 18
RTM_NEWTCLASS = 40
RTM_GETTCLASS = 42
RTM_NEWSTATS = 92
RTM_GETSTATS = 94
IFLA_IFNAME = 3
IFLA_EXT_MASK = 29
IFLA_STATS_LINK_64 = 1
TCA_KIND = 1
TCA_OPTIONS = 2
TCA_STATS = 3
TCA_STATS2 = 7
TCA_HTB_PARMS = 1
TCA_HTB_RATE64 = 6
TCA_HTB_CEIL64 = 7
TCA_STATS_BASIC = 1
TCA_STATS_QUEUE = 3
NLA_TYPE_MASK = 0x3FFF  # strips NLA_F_NESTED / NLA_F_NET_BYTEORDER

_NLMSGHDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid
_IF_STATS_MSG = struct.Struct("=BBHII")  # family, pad1, pad2, ifindex, filter_mask
_IFINFOMSG = struct.Struct("=BBHiII")  # family, pad, type, index, flags, change
_TCMSG = struct.Struct("=BBHiIII")  # family, pad1, pad2, ifindex, handle, parent, info
_NLATTR = struct.Struct("=HH")
_STATS64_HEAD = struct.Struct("=8Q")  # rx/tx packets, rx/tx bytes, rx/tx errors, rx/tx dropped
_HTB_OPT = struct.Struct("=BBHhHI BBHhHI IIIII")  # rate spec, ceil spec, buffer, cbuffer, quantum, level, prio
_HTB_RATES = struct.Struct("=8xI8xI")  # only tc_htb_opt's rate.rate and ceil.rate (bytes/s), at offsets 8 and 20
_GNET_BASIC = struct.Struct("=QI")
_GNET_QUEUE = struct.Struct("=IIIII")  # qlen, backlog, drops, requeues, overlimits
_U64 = struct.Struct("=Q")
_TC_STATS = struct.Struct("=QIIIIIII")  # struct tc_stats: bytes, packets, drops, overlimits, bps, pps, qlen, backlog
_CLASS_REPLY_BUF = 64 << 10  # one class reply is < 1 kB; recv() of the 1 MB dump size allocated 1 MB per reply
_SO_RCVBUFFORCE = 33  # asm-generic/socket.h; the socket module does not name it
_REPLY_TRUESIZE = 16 << 10  # what one queued class reply may cost the receive buffer (NLMSG_GOODSIZE skb), high side
_RECV_BYTES = 1 << 20  # a 1,000-link stats dump is ~250 kB; one large buffer keeps recv calls few


class LinkStats(NamedTuple):
    """``struct rtnl_link_stats64``'s first eight counters for one interface.

    Named tuples, not frozen dataclasses: a scrape builds one per interface and class, and a frozen
    dataclass's ``__init__`` (one ``object.__setattr__`` per field) cost more than the parse."""

    ifindex: int
    rx_packets: int
    tx_packets: int
    rx_bytes: int
    tx_bytes: int
    rx_errors: int
    tx_errors: int
    rx_dropped: int
    tx_dropped: int


class HtbClassStats(NamedTuple):
    """One HTB class: its configured rate/ceil and its counters (``tc -s class show``)."""

    ifindex: int
    handle: int  # major << 16 | minor, as tc's "1:11" (hex) means 0x00010011
    parent: int
    kind: str
    rate_bps: float  # bit/s
    ceil_bps: float
    bytes: int
    packets: int
    drops: int
    overlimits: int
    backlog_bytes: int
    backlog_packets: int


def parse_classid(text: str) -> int:
    """tc notation "1:11" (hexadecimal parts) -> 0x00010011; ``ValueError`` if malformed."""
    major, sep, minor = text.partition(":")
    if not sep:
        raise ValueError(f"class id {text!r} is not of the form MAJOR:MINOR")
    hi = int(major or "0", 16)
    lo = int(minor or "0", 16)
    if not (0 <= hi <= 0xFFFF and 0 <= lo <= 0xFFFF):
        raise ValueError(f"class id {text!r} out of range")
    return (hi << 16) | lo


def format_classid(handle: int) -> str:
    return f"{handle >> 16:x}:{handle & 0xFFFF:x}"


# -- pure parsers ---------------------------------------------------------------------------------


def iter_messages(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    """Split a netlink datagram into (type, seq, payload); ``ParseError`` on a truncated header."""
    offset = 0
    end = len(data)
    while offset + _NLMSGHDR.size <= end:
        length, mtype, _flags, seq, _pid = _NLMSGHDR.unpack_from(data, offset)
        if length < _NLMSGHDR.size or offset + length > end:
            raise ParseError(f"netlink: message length {length} at offset {offset} exceeds {end}")
        yield mtype, seq, data[offset + _NLMSGHDR.size : offset + length]
        offset += (length + 3) & ~3
    if offset < end and end - offset >= 4:
        raise ParseError(f"netlink: {end - offset} trailing bytes")


def _message_spans(data: memoryview, end: int) -> list[tuple[int, int, int, int]]:
    """``iter_messages`` over ``data[:end]`` as (type, seq, payload start, payload end), without copies."""
    out: list[tuple[int, int, int, int]] = []
    offset = 0
    while offset + _NLMSGHDR.size <= end:
        length, mtype, _flags, seq, _pid = _NLMSGHDR.unpack_from(data, offset)
        if length < _NLMSGHDR.size or offset + length > end:
            raise ParseError(f"netlink: message length {length} at offset {offset} exceeds {end}")
        out.append((mtype, seq, offset + _NLMSGHDR.size, offset + length))
        offset += (length + 3) & ~3
    return out


def iter_attrs(data: bytes, offset: int = 0) -> Iterator[tuple[int, bytes]]:
    """Attributes (type without flag bits, value) from ``offset``; ``ParseError`` on a bad length."""
    end = len(data)
    while offset + _NLATTR.size <= end:
        length, atype = _NLATTR.unpack_from(data, offset)
        if length < _NLATTR.size or offset + length > end:
            raise ParseError(f"netlink: attribute length {length} at offset {offset} exceeds {end}")
        yield atype & NLA_TYPE_MASK, data[offset + _NLATTR.size : offset + length]
        offset += (length + 3) & ~3


def error_code(payload: bytes) -> int:
    """NLMSG_ERROR payload -> errno (0 is an ACK)."""
    if len(payload) < 4:
        raise ParseError("netlink: short NLMSG_ERROR")
    return -int(struct.unpack_from("=i", payload)[0])


def parse_stats_message(payload: bytes | memoryview) -> LinkStats | None:
    """One RTM_NEWSTATS payload -> LinkStats, or None when it carries no 64-bit link stats."""
    end = len(payload)
    if end < _IF_STATS_MSG.size:
        raise ParseError("netlink: short if_stats_msg")
    ifindex = _IF_STATS_MSG.unpack_from(payload)[3]
    off = _IF_STATS_MSG.size
    unpack = _NLATTR.unpack_from
    while off + 4 <= end:
        length, atype = unpack(payload, off)
        if length < 4 or off + length > end:
            raise ParseError(f"netlink: attribute length {length} at offset {off} exceeds {end}")
        if atype & NLA_TYPE_MASK == IFLA_STATS_LINK_64:
            if length - 4 < _STATS64_HEAD.size:
                raise ParseError(f"netlink: short rtnl_link_stats64 ({length - 4} bytes) for ifindex {ifindex}")
            return LinkStats(ifindex, *_STATS64_HEAD.unpack_from(payload, off + 4))
        off += (length + 3) & ~3
    return None


def parse_link_name(payload: bytes) -> tuple[int, str] | None:
    """One RTM_NEWLINK payload -> (ifindex, ifname)."""
    if len(payload) < _IFINFOMSG.size:
        raise ParseError("netlink: short ifinfomsg")
    ifindex = _IFINFOMSG.unpack_from(payload)[3]
    for atype, value in iter_attrs(payload, _IFINFOMSG.size):
        if atype == IFLA_IFNAME:
            return ifindex, value.split(b"\0", 1)[0].decode("utf-8", "replace")
    return None


def _walk(buf: bytes | memoryview, start: int, end: int) -> list[tuple[int, int, int]]:
    """(type, value start, value end) of the attributes in ``buf[start:end]``, without copying values."""
    out: list[tuple[int, int, int]] = []
    off = start
    unpack = _NLATTR.unpack_from
    while off + 4 <= end:
        length, atype = unpack(buf, off)
        if length < 4 or off + length > end:
            raise ParseError(f"netlink: attribute length {length} at offset {off} exceeds {end}")
        out.append((atype & NLA_TYPE_MASK, off + 4, off + length))
        off += (length + 3) & ~3
    return out


def parse_tclass_message(payload: bytes | memoryview, start: int = 0, end: int | None = None) -> HtbClassStats | None:
    """One RTM_NEWTCLASS payload (``payload[start:end]``) -> HtbClassStats; None for a class that is not HTB.

    One pass over offsets, no lists, no value slices: a 1,000-class scrape parses 1,000 of these,
    and the generic walk (``iter_attrs``, then ``_walk``) cost about as much as the netlink round trips."""
    end = len(payload) if end is None else end
    if end - start < _TCMSG.size:
        raise ParseError("netlink: short tcmsg")
    _f, _p1, _p2, ifindex, handle, parent, _info = _TCMSG.unpack_from(payload, start)
    unpack = _NLATTR.unpack_from
    is_htb = False
    rate = ceil = 0
    rate64 = ceil64 = None
    nbytes = packets = drops = overlimits = backlog = qlen = 0
    stats2: tuple[int, int] | None = None
    flat = False
    off = start + _TCMSG.size
    while off + 4 <= end:
        length, atype = unpack(payload, off)
        if length < 4 or off + length > end:
            raise ParseError(f"netlink: attribute length {length} at offset {off} exceeds {end}")
        atype &= NLA_TYPE_MASK
        vs, ve = off + 4, off + length
        if atype == TCA_KIND:
            is_htb = bytes(payload[vs:ve]).split(b"\0", 1)[0] == b"htb"
        elif atype == TCA_OPTIONS:
            o = vs
            while o + 4 <= ve:
                olen, otype = unpack(payload, o)
                if olen < 4 or o + olen > ve:
                    raise ParseError(f"netlink: attribute length {olen} at offset {o} exceeds {ve}")
                otype &= NLA_TYPE_MASK
                if otype == TCA_HTB_PARMS:
                    if olen - 4 < _HTB_OPT.size:
                        raise ParseError("netlink: short tc_htb_opt")
                    rate, ceil = _HTB_RATES.unpack_from(payload, o + 4)
                elif otype == TCA_HTB_RATE64 and olen - 4 >= 8:
                    rate64 = _U64.unpack_from(payload, o + 4)[0]
                elif otype == TCA_HTB_CEIL64 and olen - 4 >= 8:
                    ceil64 = _U64.unpack_from(payload, o + 4)[0]
                o += (olen + 3) & ~3
        elif atype == TCA_STATS2:
            stats2 = (vs, ve)
        elif atype == TCA_STATS and ve - vs >= _TC_STATS.size:
            # The kernel also writes the flat compat struct: the same counters without a nested walk.
            nbytes, packets, drops, overlimits, _bps, _pps, qlen, backlog = _TC_STATS.unpack_from(payload, vs)
            flat = True
        off += (length + 3) & ~3
    if stats2 is not None and not flat:
        for stype, ss, se in _walk(payload, *stats2):
            if stype == TCA_STATS_BASIC:
                if se - ss < _GNET_BASIC.size:
                    raise ParseError("netlink: short gnet_stats_basic")
                nbytes, packets = _GNET_BASIC.unpack_from(payload, ss)
            elif stype == TCA_STATS_QUEUE:
                if se - ss < _GNET_QUEUE.size:
                    raise ParseError("netlink: short gnet_stats_queue")
                qlen, backlog, drops, _requeues, overlimits = _GNET_QUEUE.unpack_from(payload, ss)
    if not is_htb:
        return None
    # Rates above 2^32-1 bytes/s (34 Gbit/s) only fit the 64-bit attributes; tc_ratespec is bytes/s.
    rate_Bps = rate64 if rate64 is not None else rate
    ceil_Bps = ceil64 if ceil64 is not None else ceil
    return HtbClassStats(ifindex, handle, parent, "htb", rate_Bps * 8.0, ceil_Bps * 8.0, nbytes, packets, drops, overlimits, backlog, qlen)


class ClassLayout:
    """A reader for RTM_NEWTCLASS replies laid out exactly like one already parsed.

    Every HTB class of a kernel answers with the same attributes in the same order and sizes, only
    the values differ. The layout is learned from one reply (``learn``); a later reply of the same
    length is read with one ``struct`` unpack that also fetches every attribute header the full
    walk would visit and the kind string, and is accepted only if those all equal the learned
    ones, which makes the walk's offsets (a function of the lengths alone) the learned offsets.
    Anything else goes through ``parse_tclass_message``. About a third of the per-class cost."""

    def __init__(self, length: int, fields: list[tuple[int, str, str, object]]) -> None:
        fields = sorted(fields)
        fmt, pos = ["="], 0
        for offset, code, _name, _expected in fields:
            if offset > pos:
                fmt.append(f"{offset - pos}x")
            fmt.append(code)
            pos = offset + struct.calcsize("=" + code)
        self.length = length
        self._struct = struct.Struct("".join(fmt))
        self._checks = [i for i, f in enumerate(fields) if f[2] == "check"]
        self._expected = [fields[i][3] for i in self._checks]
        index = {f[2]: i for i, f in enumerate(fields)}
        order = ("ifindex", "handle", "parent", "rate", "ceil", "bytes", "packets", "drops", "overlimits", "backlog", "qlen")
        self._values = [index[name] for name in order]
        self._rate64 = index.get("rate64")
        self._ceil64 = index.get("ceil64")

    @classmethod
    def learn(cls, payload: bytes | memoryview, start: int, end: int) -> ClassLayout | None:
        """The layout of one HTB class reply with flat ``TCA_STATS``; None for any other shape."""
        if end - start < _TCMSG.size:
            return None
        fields: list[tuple[int, str, str, object]] = [(4, "i", "ifindex", None), (8, "I", "handle", None), (12, "I", "parent", None)]
        seen = {"kind": False, "parms": False, "stats": False}
        off = _TCMSG.size

        def header(o: int) -> tuple[int, int]:
            length, atype = _NLATTR.unpack_from(payload, start + o)
            if length < 4 or start + o + length > end:
                raise ParseError("netlink: bad attribute length")
            fields.append((o, "I", "check", struct.unpack_from("=I", payload, start + o)[0]))
            return length, atype & NLA_TYPE_MASK

        try:
            while start + off + 4 <= end:
                length, atype = header(off)
                vs, ve = off + 4, off + length
                if atype == TCA_KIND:
                    value = bytes(payload[start + vs : start + ve])
                    if value.split(b"\0", 1)[0] != b"htb":
                        return None
                    fields.append((vs, f"{len(value)}s", "check", value))
                    seen["kind"] = True
                elif atype == TCA_OPTIONS:
                    o = vs
                    while o + 4 <= ve:
                        olen, otype = header(o)
                        if otype == TCA_HTB_PARMS and olen - 4 >= _HTB_OPT.size:
                            fields += [(o + 12, "I", "rate", None), (o + 24, "I", "ceil", None)]
                            seen["parms"] = True
                        elif otype == TCA_HTB_RATE64 and olen - 4 >= 8:
                            fields.append((o + 4, "Q", "rate64", None))
                        elif otype == TCA_HTB_CEIL64 and olen - 4 >= 8:
                            fields.append((o + 4, "Q", "ceil64", None))
                        o += (olen + 3) & ~3
                elif atype == TCA_STATS and length - 4 >= _TC_STATS.size:
                    names = ("bytes", "packets", "drops", "overlimits", "bps", "pps", "qlen", "backlog")
                    offsets = (0, 8, 12, 16, 20, 24, 28, 32)
                    fields += [(vs + rel, code, name, None) for rel, code, name in zip(offsets, "QIIIIIII", names, strict=True)]
                    seen["stats"] = True
                off += (length + 3) & ~3
        except (ParseError, struct.error):
            return None
        if not all(seen.values()) or start + off != end:
            return None
        return cls(end - start, fields)

    def read(self, payload: bytes | memoryview, start: int, end: int) -> HtbClassStats | None:
        """The reply's stats if it has the learned layout, else None (parse it the long way)."""
        if end - start != self.length:
            return None
        vals = self._struct.unpack_from(payload, start)
        if [vals[i] for i in self._checks] != self._expected:
            return None
        ifindex, handle, parent, rate, ceil, nbytes, packets, drops, overlimits, backlog, qlen = [vals[i] for i in self._values]
        if self._rate64 is not None:
            rate = vals[self._rate64]
        if self._ceil64 is not None:
            ceil = vals[self._ceil64]
        return HtbClassStats(ifindex, handle, parent, "htb", rate * 8.0, ceil * 8.0, nbytes, packets, drops, overlimits, backlog, qlen)


# -- sockets --------------------------------------------------------------------------------------


class NetlinkSocket:
    """A NETLINK_ROUTE socket bound to one namespace, kept open across scrapes.

    Any OSError or protocol error closes it; the next call reopens (the namespace may be back).
    Not thread-safe: one source owns it.
    """

    def __init__(self, netns: str | None = None, timeout_s: float = 2.0) -> None:
        self.netns = netns
        self._timeout_s = timeout_s  # a dump is answered in microseconds; 2 s means the kernel is stuck
        self._sock: socket.socket | None = None
        self._seq = 0
        self._class_buf = bytearray(_CLASS_REPLY_BUF)  # reused by every class reply (recv_into)
        self._class_layout: ClassLayout | None = None  # learned from the first class reply

    def _open(self) -> socket.socket:
        def make() -> socket.socket:
            s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, socket.NETLINK_ROUTE)
            try:
                # Root may exceed net.core.rmem_max: a batch of class GETs queues one reply each.
                s.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, _RECV_BYTES)
            except PermissionError:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RECV_BYTES)
            s.settimeout(self._timeout_s)
            s.bind((0, 0))
            return s

        try:
            return in_netns(self.netns, make)
        except FileNotFoundError:
            raise SourceUnavailable(f"network namespace {self.netns!r} does not exist") from None
        except OSError as err:
            raise SourceUnavailable(f"cannot open netlink socket in {self.netns or 'this namespace'}: {err}") from None

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def dump(self, mtype: int, body: bytes) -> list[tuple[int, bytes]]:
        """Send one dump request; return every (type, payload) of the answer up to NLMSG_DONE."""
        if self._sock is None:
            self._sock = self._open()
        sock = self._sock
        self._seq = (self._seq + 1) & 0xFFFFFFFF
        seq = self._seq
        request = _NLMSGHDR.pack(_NLMSGHDR.size + len(body), mtype, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body
        out: list[tuple[int, bytes]] = []
        try:
            sock.send(request)
            while True:
                data = sock.recv(_RECV_BYTES)
                for rtype, rseq, payload in iter_messages(data):
                    if rseq != seq:
                        continue  # a late answer to an earlier, abandoned request
                    if rtype == NLMSG_DONE:
                        return out
                    if rtype == NLMSG_ERROR:
                        code = error_code(payload)
                        if code:
                            raise OSError(code, os.strerror(code))
                        return out
                    out.append((rtype, payload))
        except (OSError, ParseError) as err:
            self.close()
            if isinstance(err, ParseError):
                raise
            raise SourceUnavailable(f"netlink dump in {self.netns or 'this namespace'}: {err}") from None

    # -- the three requests we make ---------------------------------------------------------------

    def link_stats(self) -> list[LinkStats]:
        body = _IF_STATS_MSG.pack(socket.AF_UNSPEC, 0, 0, 0, 1 << (IFLA_STATS_LINK_64 - 1))
        stats = []
        for rtype, payload in self.dump(RTM_GETSTATS, body):
            if rtype == RTM_NEWSTATS:
                parsed = parse_stats_message(payload)
                if parsed is not None:
                    stats.append(parsed)
        return stats

    def link_names(self) -> dict[int, str]:
        # RTEXT_FILTER_SKIP_STATS (1 << 3) keeps the name dump light; it is only run on a cache miss.
        body = _IFINFOMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0, 0) + _NLATTR.pack(8, IFLA_EXT_MASK) + struct.pack("=I", 1 << 3)
        names: dict[int, str] = {}
        for rtype, payload in self.dump(RTM_GETLINK, body):
            if rtype == RTM_NEWLINK:
                parsed = parse_link_name(payload)
                if parsed is not None:
                    names[parsed[0]] = parsed[1]
        return names

    def htb_classes(self, ifindex: int) -> list[HtbClassStats]:
        body = _TCMSG.pack(socket.AF_UNSPEC, 0, 0, ifindex, 0, 0, 0)
        classes = []
        for rtype, payload in self.dump(RTM_GETTCLASS, body):
            if rtype == RTM_NEWTCLASS:
                parsed = parse_tclass_message(payload)
                if parsed is not None:
                    classes.append(parsed)
        return classes

    def _read_class(self, view: memoryview, start: int, end: int) -> HtbClassStats | None:
        layout = self._class_layout
        if layout is not None:
            fast = layout.read(view, start, end)
            if fast is not None:
                return fast
        parsed = parse_tclass_message(view, start, end)
        if parsed is not None:
            self._class_layout = ClassLayout.learn(view, start, end) or layout
        return parsed

    def htb_class_get(self, wanted: list[tuple[int, int]]) -> dict[tuple[int, int], HtbClassStats | None]:
        """(ifindex, classid) -> that HTB class's stats, or None where the kernel said no (ENOENT, ENODEV).

        A class dump answers for one device only (the kernel has no all-device class dump) and costs
        three syscalls (request, data, NLMSG_DONE); a dump in flight makes a second one on the same
        socket fail with EBUSY. A *get* is not a dump: many fit in one datagram and each is answered
        (NLM_F_ECHO) by one message, so a batch costs one send and one receive per class.
        """
        out: dict[tuple[int, int], HtbClassStats | None] = {}
        if not wanted:
            return out
        if self._sock is None:
            self._sock = self._open()
        sock = self._sock
        buf = self._class_buf
        view = memoryview(buf)
        try:
            rcvbuf = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
            batch = max(8, min(256, rcvbuf // _REPLY_TRUESIZE))  # an overflowing batch loses replies
            for start in range(0, len(wanted), batch):
                chunk = wanted[start : start + batch]
                first = (self._seq + 1) & 0xFFFFFFFF
                self._seq = (first + len(chunk)) & 0xFFFFFFFF
                sock.send(b"".join(_class_get(first + k, ifindex, handle) for k, (ifindex, handle) in enumerate(chunk)))
                pending = len(chunk)
                while pending:
                    n = sock.recv_into(buf)
                    for rtype, rseq, start, end in _message_spans(view, n):
                        k = (rseq - first) & 0xFFFFFFFF
                        if not 0 <= k < len(chunk) or chunk[k] in out:
                            continue  # a late answer to an earlier, abandoned batch
                        if rtype == NLMSG_ERROR:
                            out[chunk[k]] = None
                        elif rtype == RTM_NEWTCLASS:
                            out[chunk[k]] = self._read_class(view, start, end)
                        else:
                            continue
                        pending -= 1
        except (OSError, ParseError) as err:
            self.close()
            if isinstance(err, ParseError):
                raise
            raise SourceUnavailable(f"netlink class get in {self.netns or 'this namespace'}: {err}") from None
        return out


def _class_get(seq: int, ifindex: int, handle: int) -> bytes:
    # tcm_parent 0: the kernel takes the qdisc from the class id's major number.
    return _NLMSGHDR.pack(_NLMSGHDR.size + _TCMSG.size, RTM_GETTCLASS, NLM_F_REQUEST | NLM_F_ECHO, seq & 0xFFFFFFFF, 0) + _TCMSG.pack(
        socket.AF_UNSPEC, 0, 0, ifindex, handle, 0, 0
    )
