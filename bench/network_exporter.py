"""Scrape cost: inferslice's network exporter vs prometheus-node-exporter's netdev collector.

For each size N a namespace made for the benchmark holds N veth interfaces (peers in a second
namespace), each with an HTB qdisc and one class. node_exporter runs inside that namespace with
only the netdev collector; our exporter serves from the root namespace, reading the benchmark
namespace over netlink, through the same HTTP handler ``inferslice exporter`` uses. Both are
scraped over HTTP by the same client (socket opened in the right namespace), median of repeated
scrapes. Paired runs: each run scrapes node_exporter and then every variant of ours back to back,
so a load change on the shared machine hits both sides of a pair alike; the figure is the median
over the runs of each pair's ratio to node_exporter's scrape time (``--repeat`` runs, at least 9),
with the median times beside it: ours with counters only (like with like: netdev) and ours with
counters + HTB classes; for reference, the same full registry served by prometheus_client's own
``generate_latest`` handler.

Needs root, ``ip``, ``tc`` and prometheus-node-exporter. Everything created is removed at the end
(namespaces by name, node_exporter and the HTTP servers by handle). Namespace names start with
``isb``.
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest, start_http_server

from inferslice.common.netns import in_netns
from inferslice.common.ports import free_port
from inferslice.common.processes import terminate
from inferslice.exporters.base import GuardedCollector
from inferslice.exporters.http import metrics_handler
from inferslice.exporters.network import HtbMap, HtbSource, InterfaceMap, KernelLinkSource, KernelMaps
from inferslice.exporters.text import render_registry

VARIANTS = ("node_exporter", "ours_counters", "ours_counters_htb", "prometheus_client_counters_htb")


class Unavailable(RuntimeError):
    """The benchmark cannot run here (not root, no node_exporter)."""


def _sh(*args: str, stdin: str | None = None) -> None:
    subprocess.run(list(args), check=True, input=stdin, capture_output=True, text=True, timeout=600)


def http_get(port: int, netns: str | None) -> bytes:
    sock = in_netns(netns, lambda: socket.create_connection(("127.0.0.1", port), timeout=10))
    with sock:
        sock.sendall(f"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        chunks = []
        while True:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    body = b"".join(chunks)
    if not body.startswith(b"HTTP/1.") or b" 200 " not in body.split(b"\r\n", 1)[0]:
        raise RuntimeError(f"scrape of :{port} failed: {body[:120]!r}")
    return body


MIN_RUNS = 9  # the fewest paired runs whose median a ratio is reported from


def paired_runs(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, list[float]]:
    """Seconds of each function per run: ``repeat`` runs, each calling every function once in turn,
    after one warm-up each (sockets, name and label caches, allocator)."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for key, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - t0)
    return times


def interleaved_medians(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median seconds of each function over ``paired_runs``."""
    return {k: statistics.median(v) for k, v in paired_runs(fns, repeat).items()}


def paired_ratios(times: dict[str, list[float]], baseline: str) -> dict[str, dict[str, float]]:
    """Per variant: the median, lowest and highest over the runs of (its time / the baseline's time in the same run)."""
    out: dict[str, dict[str, float]] = {}
    for key, values in times.items():
        if key == baseline:
            continue
        ratios = [v / b for v, b in zip(values, times[baseline], strict=True)]
        out[key] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
    return out


def _build(ns: str, peer: str, n: int) -> None:
    _sh("ip", "netns", "add", ns)
    _sh("ip", "netns", "add", peer)
    _sh("ip", "-n", ns, "link", "set", "lo", "up")  # node_exporter listens on the namespace's loopback
    links = "".join(f"link add vb{i} type veth peer name vp{i} netns {peer}\nlink set vb{i} up\n" for i in range(n))
    _sh("ip", "-n", ns, "-batch", "-", stdin=links)
    qdiscs = "".join(
        f"qdisc add dev vb{i} root handle 1: htb default 1 r2q 1000\n"
        f"class add dev vb{i} parent 1: classid 1:1 htb rate 100mbit ceil 100mbit\n"
        for i in range(n)
    )
    _sh("tc", "-n", ns, "-batch", "-", stdin=qdiscs)


def _serve(registry: CollectorRegistry) -> tuple[ThreadingHTTPServer, int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), metrics_handler(registry))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="bench-exporter", daemon=True).start()
    return server, int(server.server_address[1])


def _start_node_exporter(binary: str, ns: str, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        ["ip", "netns", "exec", ns, binary, "--collector.disable-defaults", "--collector.netdev",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=error"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 15
    while True:
        try:
            http_get(port, ns)
            return proc
        except (OSError, RuntimeError):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("node_exporter did not come up") from None
            time.sleep(0.1)


def _series(body: bytes, prefix: bytes) -> int:
    return sum(1 for line in body.split(b"\n") if line.startswith(prefix) and b"source_" not in line)


def run_size(n: int, repeat: int, node_exporter: str) -> dict[str, Any]:
    tag = f"isb{os.getpid() % 10000}"
    ns, peer = f"{tag}n{n}", f"{tag}p{n}"
    proc: subprocess.Popen[bytes] | None = None
    servers: list[Any] = []
    sources: list[KernelLinkSource | HtbSource] = []
    try:
        _build(ns, peer, n)
        maps = KernelMaps(
            tuple(InterfaceMap(f"vb{i}", "premium", "bristol", f"l{i}", ns) for i in range(n)),
            tuple(HtbMap(f"vb{i}", 0x10001, "premium", "bristol", f"l{i}", "transmit", ns) for i in range(n)),
        )
        counters_only = KernelMaps(maps.interfaces)
        sources = [KernelLinkSource(lambda: counters_only), KernelLinkSource(lambda: maps), HtbSource(lambda: maps)]
        reg_counters, reg_full, reg_pc = CollectorRegistry(), CollectorRegistry(), CollectorRegistry()
        reg_counters.register(GuardedCollector(sources[:1]))
        reg_full.register(GuardedCollector(sources[1:]))
        # The same sources behind prometheus_client's own handler: what the fast writer saves.
        pc_sources: list[KernelLinkSource | HtbSource] = [KernelLinkSource(lambda: maps), HtbSource(lambda: maps)]
        sources.extend(pc_sources)
        reg_pc.register(GuardedCollector(pc_sources))
        server_c, port_c = _serve(reg_counters)
        server_f, port_f = _serve(reg_full)
        servers += [server_c, server_f]
        port_pc = free_port()
        server_pc, _thread = start_http_server(port_pc, "127.0.0.1", registry=reg_pc)
        servers.append(server_pc)
        port_ne = free_port()
        proc = _start_node_exporter(node_exporter, ns, port_ne)
        series = {
            "node_exporter": _series(http_get(port_ne, ns), b"node_network_"),
            "ours_counters": _series(http_get(port_c, None), b"inferslice_"),
            "ours_counters_htb": _series(http_get(port_f, None), b"inferslice_"),
        }
        runs = paired_runs(
            {
                "node_exporter": lambda: http_get(port_ne, ns),
                "ours_counters": lambda: http_get(port_c, None),
                "ours_counters_htb": lambda: http_get(port_f, None),
                "prometheus_client_counters_htb": lambda: http_get(port_pc, None),
            },
            repeat,
        )
        http_s = {k: statistics.median(v) for k, v in runs.items()}
        in_process_s = interleaved_medians(
            {
                "render_registry_counters_htb": lambda: render_registry(reg_full),
                "generate_latest_counters_htb": lambda: generate_latest(reg_full),
            },
            repeat,
        )
        paired = paired_ratios(runs, "node_exporter")
        return {
            "interfaces": n,
            "htb_classes": n,
            "repeat": repeat,
            "series": series,
            "http_median_s": http_s,
            "in_process_median_s": in_process_s,
            "ratio_to_node_exporter": {k: v["median"] for k, v in paired.items()},  # median of the paired ratios
            "paired_ratio_range": {k: [v["min"], v["max"]] for k, v in paired.items()},
        }
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
        for source in sources:
            source.close()
        terminate(proc, timeout_s=5)
        for name in (ns, peer):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=600)


def find_node_exporter() -> str:
    if os.geteuid() != 0:
        raise Unavailable("needs root (network namespaces)")
    binary = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if binary is None:
        raise Unavailable("prometheus-node-exporter is not installed")
    return binary


def run(sizes: tuple[int, ...] = (100, 1000), repeat: int = 15) -> dict[str, Any]:
    """Every size in one run; raises ``Unavailable`` when it cannot run here."""
    if repeat < MIN_RUNS:
        raise ValueError(f"--repeat {repeat}: a median of paired runs needs at least {MIN_RUNS}")
    binary = find_node_exporter()
    load = os.getloadavg()
    result = {"benchmark": "exporter", "baseline": "node_exporter", "sizes": [run_size(n, repeat, binary) for n in sizes]}
    return {**result, "load_average_1_5_15": [round(x, 2) for x in load], "cores": os.cpu_count()}


def markdown(result: dict[str, Any]) -> str:
    runs = result["sizes"][0]["repeat"] if result["sizes"] else 0
    load = result.get("load_average_1_5_15")
    lines = [
        f"Median scrape time over {runs} paired runs (in brackets: the median of the runs' ratios to node_exporter)"
        + (f"; load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} at the start on {result.get('cores')} cores." if load else "."),
        "",
        "| interfaces (+1 HTB class each) | node_exporter netdev | ours, counters | ours, counters + HTB"
        " | prometheus_client handler, counters + HTB |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in result["sizes"]:
        t, ratio = r["http_median_s"], r["ratio_to_node_exporter"]
        lines.append(
            f"| {r['interfaces']:,} | {t['node_exporter'] * 1e3:.1f} ms (1.00) "
            f"| {t['ours_counters'] * 1e3:.1f} ms ({ratio['ours_counters']:.2f}) "
            f"| {t['ours_counters_htb'] * 1e3:.1f} ms ({ratio['ours_counters_htb']:.2f}) "
            f"| {t['prometheus_client_counters_htb'] * 1e3:.1f} ms ({ratio['prometheus_client_counters_htb']:.2f}) |"
        )
    return "\n".join(lines) + "\n"
