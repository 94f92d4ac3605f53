"""Open vSwitch through OVSDB: one JSON-RPC ``transact`` per scrape over a kept-open unix socket.

One transaction selects Interface, Port, QoS and Queue together, so every number of a scrape
comes from the same database snapshot, and no process is forked per scrape (``ovs-vsctl`` or
``ovsdb-client dump`` would fork one). ``parse_transact_result`` is pure: JSON in, frozen
``OvsSnapshot`` out, ``ParseError`` on anything unexpected.

Viewpoint: OVS Interface statistics are the switch's (rx = what the switch received from the
port). A linux-htb QoS on a port shapes what the switch sends into it (``transmit``);
``ingress_policing_rate`` (kbit/s) polices what it receives (``receive``). An entry mapped with
``invert`` (Kube-OVN pods) swaps both, giving the pod's viewpoint, where ``receive`` is Kube-OVN's
``ingress_rate``. OVS refreshes statistics every ``other_config:stats-update-interval`` (5 s).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from inferslice import metric_names as mn
from inferslice.errors import ParseError, SourceUnavailable

from .mapping import OvsMaps, OvsPortMap, TunnelMap

DEFAULT_SOCKET = "/var/run/openvswitch/db.sock"
TUNNEL_TYPES = frozenset({"geneve", "vxlan", "gre", "stt"})
STAT_KEYS = ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "rx_dropped", "tx_dropped", "rx_errors", "tx_errors")
_COLUMNS: dict[str, list[str]] = {
    "Interface": ["_uuid", "name", "type", "statistics", "ingress_policing_rate", "external_ids", "options"],
    "Port": ["_uuid", "name", "interfaces", "qos"],
    "QoS": ["_uuid", "type", "other_config", "queues"],
    "Queue": ["_uuid", "other_config"],
}


@dataclass(frozen=True)
class OvsInterface:
    name: str
    type: str  # "" (system), internal, geneve, vxlan, ...
    statistics: Mapping[str, int]
    ingress_policing_kbps: int
    external_ids: Mapping[str, str]
    options: Mapping[str, str]
    port: str | None  # the Port row holding the interface
    qos_type: str | None
    qos_max_rate_bps: float | None  # min of the QoS max-rate and its queue 0 max-rate, where set

    @property
    def iface_id(self) -> str | None:
        return self.external_ids.get("iface-id")

    @property
    def remote_ip(self) -> str | None:
        return self.options.get("remote_ip")

    @property
    def is_tunnel(self) -> bool:
        return self.type in TUNNEL_TYPES


@dataclass(frozen=True)
class OvsSnapshot:
    interfaces: tuple[OvsInterface, ...]


def transact_request(request_id: int) -> dict[str, Any]:
    ops = [{"op": "select", "table": table, "where": [], "columns": cols} for table, cols in _COLUMNS.items()]
    return {"method": "transact", "params": ["Open_vSwitch", *ops], "id": request_id}


# -- pure parsing of OVSDB's JSON encoding (RFC 7047 5.1) -------------------------------------------


def _uuid(value: Any, what: str) -> str:
    if isinstance(value, list) and len(value) == 2 and value[0] in ("uuid", "named-uuid") and isinstance(value[1], str):
        return value[1]
    raise ParseError(f"ovsdb: {what} is not a uuid: {value!r:.80}")


def _set(value: Any, what: str) -> list[Any]:
    if isinstance(value, list) and len(value) == 2 and value[0] == "set":
        if not isinstance(value[1], list):
            raise ParseError(f"ovsdb: {what} set is not a list")
        return value[1]
    return [value]  # a one-element set is written as the bare atom


def _map(value: Any, what: str) -> dict[Any, Any]:
    if not (isinstance(value, list) and len(value) == 2 and value[0] == "map" and isinstance(value[1], list)):
        raise ParseError(f"ovsdb: {what} is not a map: {value!r:.80}")
    out: dict[Any, Any] = {}
    for pair in value[1]:
        if not (isinstance(pair, list) and len(pair) == 2):
            raise ParseError(f"ovsdb: {what} has a malformed pair")
        out[pair[0]] = pair[1]
    return out


def _str_map(value: Any, what: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in _map(value, what).items()}


def _rate(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        rate = float(text)
    except ValueError:
        return None
    return rate if rate > 0 else None


def _rows(result: Any, i: int, table: str) -> list[dict[str, Any]]:
    try:
        rows = result[i]["rows"]
    except (IndexError, KeyError, TypeError):
        if isinstance(result, list) and i < len(result) and isinstance(result[i], dict) and "error" in result[i]:
            raise ParseError(f"ovsdb: select {table}: {result[i].get('error')}: {result[i].get('details', '')}") from None
        raise ParseError(f"ovsdb: no rows for {table}") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ParseError(f"ovsdb: {table} rows are not objects")
    return rows


def parse_transact_result(result: Any) -> OvsSnapshot:
    """The ``result`` array of our transact (Interface, Port, QoS, Queue selects) -> OvsSnapshot."""
    if not isinstance(result, list):
        raise ParseError("ovsdb: transact result is not an array")
    try:
        queues = {
            _uuid(r["_uuid"], "Queue._uuid"): _rate(_str_map(r["other_config"], "Queue.other_config").get("max-rate"))
            for r in _rows(result, 3, "Queue")
        }
        qos: dict[str, tuple[str, float | None]] = {}
        for r in _rows(result, 2, "QoS"):
            qmap = _map(r["queues"], "QoS.queues")
            rates = [_rate(_str_map(r["other_config"], "QoS.other_config").get("max-rate"))]
            if 0 in qmap:
                rates.append(queues.get(_uuid(qmap[0], "QoS.queues[0]")))
            bound = [x for x in rates if x is not None]
            qos[_uuid(r["_uuid"], "QoS._uuid")] = (str(r["type"]), min(bound) if bound else None)
        port_of: dict[str, tuple[str, str | None]] = {}  # interface uuid -> (port name, qos uuid)
        for r in _rows(result, 1, "Port"):
            qos_ids = [_uuid(q, "Port.qos") for q in _set(r["qos"], "Port.qos")]
            for itf in _set(r["interfaces"], "Port.interfaces"):
                port_of[_uuid(itf, "Port.interfaces")] = (str(r["name"]), qos_ids[0] if qos_ids else None)
        interfaces = []
        for r in _rows(result, 0, "Interface"):
            stats_raw = _map(r["statistics"], "Interface.statistics")
            stats = {str(k): int(v) for k, v in stats_raw.items() if isinstance(v, int) and not isinstance(v, bool)}
            policing = r["ingress_policing_rate"]
            if not isinstance(policing, int) or isinstance(policing, bool):
                raise ParseError("ovsdb: Interface.ingress_policing_rate is not an integer")
            port, qos_id = port_of.get(_uuid(r["_uuid"], "Interface._uuid"), (None, None))
            qos_type, qos_rate = qos.get(qos_id, (None, None)) if qos_id else (None, None)
            interfaces.append(OvsInterface(
                name=str(r["name"]),
                type=str(r["type"]),
                statistics=stats,
                ingress_policing_kbps=policing,
                external_ids=_str_map(r["external_ids"], "Interface.external_ids"),
                options=_str_map(r["options"], "Interface.options"),
                port=port,
                qos_type=qos_type,
                qos_max_rate_bps=qos_rate,
            ))
    except KeyError as err:
        raise ParseError(f"ovsdb: missing column {err}") from None
    except (TypeError, ValueError) as err:
        raise ParseError(f"ovsdb: {err}") from None
    return OvsSnapshot(tuple(interfaces))


def parse_response(message: Any, request_id: int) -> OvsSnapshot:
    if not isinstance(message, dict):
        raise ParseError("ovsdb: response is not an object")
    if message.get("id") != request_id:
        raise ParseError(f"ovsdb: response id {message.get('id')!r} is not {request_id}")
    if message.get("error") is not None:
        raise ParseError(f"ovsdb: {message['error']}")
    return parse_transact_result(message.get("result"))


# -- the connection ---------------------------------------------------------------------------------


class OvsdbConnection:
    """A JSON-RPC session on OVSDB's unix socket, reopened after any error."""

    def __init__(self, path: str = DEFAULT_SOCKET, timeout_s: float = 2.0) -> None:
        self.path = path
        self._timeout_s = timeout_s  # a local select answers in milliseconds; 2 s means ovsdb-server is stuck
        self._sock: socket.socket | None = None
        self._buf = ""
        self._id = 0
        self._decoder = json.JSONDecoder()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._buf = ""

    def _connect(self) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        s.settimeout(self._timeout_s)
        try:
            s.connect(self.path)
        except OSError as err:
            s.close()
            raise SourceUnavailable(f"ovsdb at {self.path}: {err.strerror or err}") from None
        return s

    def _next_message(self, sock: socket.socket) -> Any:
        while True:
            text = self._buf.lstrip()
            if text:
                try:
                    obj, end = self._decoder.raw_decode(text)
                except ValueError:
                    pass  # incomplete: read more
                else:
                    self._buf = text[end:]
                    return obj
            chunk = sock.recv(1 << 18)
            if not chunk:
                raise ConnectionResetError("ovsdb closed the connection")
            self._buf = text + chunk.decode("utf-8")

    def snapshot(self) -> OvsSnapshot:
        if self._sock is None:
            self._sock = self._connect()
        sock = self._sock
        self._id += 1
        rid = self._id
        try:
            sock.sendall(json.dumps(transact_request(rid)).encode())
            while True:
                msg = self._next_message(sock)
                if isinstance(msg, dict) and msg.get("method") == "echo":
                    # ovsdb-server's inactivity probe: answer or it drops the session.
                    sock.sendall(json.dumps({"id": msg.get("id"), "result": msg.get("params", []), "error": None}).encode())
                    continue
                if isinstance(msg, dict) and msg.get("id") != rid:
                    continue  # a notification or a late answer to an abandoned request
                return parse_response(msg, rid)
        except (OSError, UnicodeDecodeError) as err:
            self.close()
            raise SourceUnavailable(f"ovsdb at {self.path}: {err}") from None
        except ParseError:
            self.close()
            raise


# -- the source -------------------------------------------------------------------------------------


def _match(itf: OvsInterface, m: OvsPortMap) -> bool:
    return (m.port is not None and m.port == itf.name) or (m.iface_id is not None and m.iface_id == itf.iface_id)


class OvsSource:
    """Per-port counters and caps, and per-peer tunnel bytes, from one OVSDB transaction."""

    def __init__(self, maps: Callable[[], OvsMaps], connection: OvsdbConnection, name: str = "network_ovs") -> None:
        self.name = name
        self._maps = maps
        self._conn = connection
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def collect(self) -> Iterator[Metric]:
        maps = self._maps()
        with self._lock:
            snap = self._conn.snapshot()
        return iter(families_from_snapshot(snap, maps))


def families_from_snapshot(snap: OvsSnapshot, maps: OvsMaps) -> list[Metric]:
    """Pure: a snapshot and the mapping -> metric families (only mapped interfaces appear)."""
    link_labels = ["slice", "pop", "link"]
    cap_labels = [*link_labels, "direction"]

    def counter(name: str, doc: str, labels: list[str]) -> CounterMetricFamily:
        return CounterMetricFamily(name.removesuffix("_total"), doc, labels=labels)

    fams = {
        "rx_bytes": counter(mn.LINK_RECEIVE_BYTES, "Bytes received on the link (mapped viewpoint)", link_labels),
        "tx_bytes": counter(mn.LINK_TRANSMIT_BYTES, "Bytes transmitted on the link (mapped viewpoint)", link_labels),
        "rx_packets": counter(mn.LINK_RECEIVE_PACKETS, "Packets received on the link", link_labels),
        "tx_packets": counter(mn.LINK_TRANSMIT_PACKETS, "Packets transmitted on the link", link_labels),
        "rx_dropped": counter(mn.LINK_RECEIVE_DROPS, "Received packets dropped", link_labels),
        "tx_dropped": counter(mn.LINK_TRANSMIT_DROPS, "Transmitted packets dropped", link_labels),
        "rx_errors": counter(mn.LINK_RECEIVE_ERRORS, "Receive errors", link_labels),
        "tx_errors": counter(mn.LINK_TRANSMIT_ERRORS, "Transmit errors", link_labels),
    }
    cap = GaugeMetricFamily(mn.LINK_CAP_BPS, "Bandwidth cap in bit/s (OVS QoS max-rate, ingress policing)", labels=cap_labels)
    tun_rx = counter(mn.TUNNEL_RECEIVE_BYTES, "Bytes received from the peer PoP over the tunnel", ["slice", "pop", "peer_pop"])
    tun_tx = counter(mn.TUNNEL_TRANSMIT_BYTES, "Bytes sent to the peer PoP over the tunnel", ["slice", "pop", "peer_pop"])
    swap = {"rx": "tx", "tx": "rx"}
    for itf in snap.interfaces:
        if itf.is_tunnel:
            tunnel = _tunnel_for(itf, maps.tunnels)
            if tunnel is not None:
                labels = [tunnel.slice, tunnel.pop, tunnel.peer_pop]
                tun_rx.add_metric(labels, itf.statistics.get("rx_bytes", 0))
                tun_tx.add_metric(labels, itf.statistics.get("tx_bytes", 0))
            continue
        entry = next((m for m in maps.ports if _match(itf, m)), None)
        if entry is None:
            continue
        labels = [entry.slice, entry.pop, entry.link]
        for key in STAT_KEYS:
            if key in itf.statistics:
                side, rest = key.split("_", 1)
                out_key = f"{swap[side]}_{rest}" if entry.invert else key
                fams[out_key].add_metric(labels, itf.statistics[key])
        # Switch viewpoint: QoS shapes transmit, policing polices receive; invert swaps them.
        shaped = itf.qos_max_rate_bps if itf.qos_type == "linux-htb" else None
        policed = itf.ingress_policing_kbps * 1000.0 if itf.ingress_policing_kbps > 0 else None
        tx_cap, rx_cap = (policed, shaped) if entry.invert else (shaped, policed)
        rx_cap = rx_cap if rx_cap is not None else entry.cap_receive_bps
        tx_cap = tx_cap if tx_cap is not None else entry.cap_transmit_bps
        if rx_cap is not None:
            cap.add_metric([*labels, "receive"], rx_cap)
        if tx_cap is not None:
            cap.add_metric([*labels, "transmit"], tx_cap)
    return [*fams.values(), cap, tun_rx, tun_tx]


def _tunnel_for(itf: OvsInterface, tunnels: tuple[TunnelMap, ...]) -> TunnelMap | None:
    for t in tunnels:
        if (t.remote_ip is not None and t.remote_ip == itf.remote_ip) or (t.port is not None and t.port == itf.name):
            return t
    return None
