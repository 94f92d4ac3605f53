"""Scrape cost: inferslice's network exporter vs prometheus-node-exporter's netdev collector.

For N in (100, 1000): a namespace made for the benchmark holds N veth interfaces (peers in a second
namespace), each with an HTB qdisc and one class. node_exporter runs inside that namespace with
only the netdev collector; our exporter serves from the root namespace and reads the benchmark
namespace over netlink. Both are scraped over HTTP by the same client (socket opened in the right
namespace), median of repeated scrapes. Reported: HTTP scrape of our links-only exporter (like with
like: netdev), our full exporter (links + HTB classes), node_exporter, and our collect() alone.

Run as root: ``.venv/bin/python bench/network_exporter_bench.py [--sizes 100 1000]``.
Everything created is removed at the end (namespaces by name, node_exporter by PID).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, generate_latest, start_http_server

from inferslice.exporters.base import GuardedCollector
from inferslice.exporters.network import HtbMap, HtbSource, InterfaceMap, KernelLinkSource, KernelMaps
from inferslice.exporters.network.netlink import in_netns


def sh(*args: str, stdin: str | None = None) -> None:
    subprocess.run(list(args), check=True, input=stdin, capture_output=True, text=True, timeout=600)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


def median_s(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm: sockets, name caches, allocator
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def build(ns: str, peer: str, n: int) -> None:
    sh("ip", "netns", "add", ns)
    sh("ip", "netns", "add", peer)
    sh("ip", "-n", ns, "link", "set", "lo", "up")  # node_exporter listens on the namespace's loopback
    links = "".join(f"link add vb{i} type veth peer name vp{i} netns {peer}\nlink set vb{i} up\n" for i in range(n))
    sh("ip", "-n", ns, "-batch", "-", stdin=links)
    qdiscs = "".join(
        f"qdisc add dev vb{i} root handle 1: htb default 1\nclass add dev vb{i} parent 1: classid 1:1 htb rate 100mbit ceil 100mbit\n"
        for i in range(n)
    )
    sh("tc", "-n", ns, "-batch", "-", stdin=qdiscs)


def run_size(n: int, repeat: int, node_exporter: str) -> dict[str, float]:
    tag = f"isb{os.getpid() % 10000}"
    ns, peer = f"{tag}n{n}", f"{tag}p{n}"
    proc: subprocess.Popen[bytes] | None = None
    servers = []
    try:
        build(ns, peer, n)
        maps = KernelMaps(
            tuple(InterfaceMap(f"vb{i}", "premium", "bristol", f"l{i}", ns) for i in range(n)),
            tuple(HtbMap(f"vb{i}", 0x10001, "premium", "bristol", f"l{i}", "transmit", ns) for i in range(n)),
        )
        links_only = KernelMaps(maps.interfaces)
        link_source = KernelLinkSource(lambda: links_only)
        full_sources = [KernelLinkSource(lambda: maps), HtbSource(lambda: maps)]
        reg_links, reg_full = CollectorRegistry(), CollectorRegistry()
        reg_links.register(GuardedCollector([link_source]))
        reg_full.register(GuardedCollector(full_sources))
        port_links, port_full, port_ne = free_port(), free_port(), free_port()
        for reg, port in ((reg_links, port_links), (reg_full, port_full)):
            server, _thread = start_http_server(port, "127.0.0.1", registry=reg)
            servers.append(server)
        proc = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                ns,
                node_exporter,
                "--collector.disable-defaults",
                "--collector.netdev",
                f"--web.listen-address=127.0.0.1:{port_ne}",
                "--log.level=error",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while True:
            try:
                body = http_get(port_ne, ns)
                break
            except (OSError, RuntimeError):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("node_exporter did not come up") from None
                time.sleep(0.1)
        ne_series = sum(1 for line in body.split(b"\n") if line.startswith(b"node_network_"))
        ours = http_get(port_full, None)
        our_series = sum(1 for line in ours.split(b"\n") if line.startswith(b"inferslice_") and b"source_" not in line)
        result = {
            "node_exporter_http_s": median_s(lambda: http_get(port_ne, ns), repeat),
            "ours_links_http_s": median_s(lambda: http_get(port_links, None), repeat),
            "ours_full_http_s": median_s(lambda: http_get(port_full, None), repeat),
            "ours_links_collect_s": median_s(lambda: list(link_source.collect()), repeat),
            "ours_full_collect_s": median_s(lambda: [list(s.collect()) for s in full_sources], repeat),
            "ours_full_collect_and_render_s": median_s(lambda: generate_latest(reg_full), repeat),
            "node_exporter_series": float(ne_series),
            "our_series": float(our_series),
        }
        for s in full_sources:
            s.close()
        link_source.close()
        return result
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for name in (ns, peer):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=600)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    node_exporter = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if node_exporter is None:
        print("prometheus-node-exporter is not installed", file=sys.stderr)
        return 2
    os.environ.setdefault("TMPDIR", tempfile.gettempdir())
    for n in args.sizes:
        r = run_size(n, args.repeat, node_exporter)
        print(f"--- {n} interfaces, each with an HTB class (median of {args.repeat} scrapes) ---")
        ne_ms, ne_series = r["node_exporter_http_s"] * 1e3, r["node_exporter_series"]
        print(f"node_exporter netdev HTTP scrape:        {ne_ms:8.2f} ms  ({ne_series:.0f} series)")
        print(f"ours, links only, HTTP scrape:           {r['ours_links_http_s'] * 1e3:8.2f} ms  (8 series per interface)")
        print(f"ours, links + HTB, HTTP scrape:          {r['ours_full_http_s'] * 1e3:8.2f} ms  ({r['our_series']:.0f} series)")
        print(f"ours, links only, collect():             {r['ours_links_collect_s'] * 1e3:8.2f} ms")
        print(f"ours, links + HTB, collect():            {r['ours_full_collect_s'] * 1e3:8.2f} ms")
        print(f"ours, links + HTB, collect + render:     {r['ours_full_collect_and_render_s'] * 1e3:8.2f} ms")
        print(f"ratio ours/node_exporter, HTTP like-with-like (links): {r['ours_links_http_s'] / r['node_exporter_http_s']:.2f}")
        print(f"ratio ours/node_exporter, HTTP links + HTB:            {r['ours_full_http_s'] / r['node_exporter_http_s']:.2f}")
        print(f"ratio ours collect()/node_exporter HTTP (links):       {r['ours_links_collect_s'] / r['node_exporter_http_s']:.2f}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
