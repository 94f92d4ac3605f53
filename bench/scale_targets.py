"""The synthetic deployment of ``inferslice bench scale``: 100 PoPs x 10 tiers = 1,000 slices (each
tier has its own slice at each PoP), three 0.5-GPU replicas each (3,000 replicas), and fake
targets serving recorded expositions.

- ``synthetic_topology``: a valid tiers file of that size (the model's own validation applies).
- Replicas: every fake vLLM replica serves the recorded vLLM 0.32.0 exposition
  (``recorded/``, a copy of the captured fixture) with its counters advanced in time.
- Node exporters: each PoP's exposition is what our exporter renders for that PoP's 30 replicas,
  plus the network and GPU series the exporter adds per slice; the other PoPs' are the same text
  relabelled (``p000`` -> ``pNNN``).

``advancing(text)`` turns an exposition into a function of time: counter, histogram and summary
samples grow as ``v * (1 + t / 100)`` (one scale for every bucket of a histogram, so buckets stay
cumulative and rates are constant), gauges stay. The fake target server runs in a child process
so that its CPU is not counted against the process being measured.
"""

from __future__ import annotations

import ipaddress
import multiprocessing
import os
import re
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

from inferslice import metric_names as mn
from inferslice.topology import Topology, topology_from_dict

RECORDED = Path(__file__).resolve().parent / "recorded" / "vllm-0.32.0-cpu-metrics-after-bench.txt"
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)(.*)$")


def pop_name(i: int) -> str:
    return f"p{i:03d}"


def slice_name(tier: int, pop: int) -> str:
    return f"t{tier}-{pop_name(pop)}"


def synthetic_topology(pops: int = 100, tiers: int = 10, replicas: int = 3) -> Topology:
    gpus = max(1, -(-tiers * replicas // 2))  # 0.5 GPU per replica
    pop_list = [{"name": pop_name(i), "gpus": gpus} for i in range(pops)]
    links = [{"a": pop_name(0), "b": pop_name(i), "rtt_ms": 2.0 + (i % 20)} for i in range(1, pops)]
    tier_list = []
    for p in range(pops):
        for t in range(tiers):
            n = p * tiers + t
            slots = [f"{pop_name(p)}/gpu{(t * replicas + r) // 2}" for r in range(replicas)]
            tier_list.append({
                "name": slice_name(t, p),
                "subnet": str(ipaddress.IPv4Network((0x0A000000 + (n << 8), 24))),
                "vni": 1000 + n,
                "gpu_quota": replicas * 0.5,
                "cpu_quota": 4,
                "replicas_max": replicas,
                "max_ongoing_requests": 6,
                "priority": t,
                "placement": slots,
            })  # fmt: skip
    return topology_from_dict({"name": "scale", "client": {"gateway": pop_name(0)}, "pops": pop_list, "links": links, "tiers": tier_list})


def _is_cumulative(name: str) -> bool:
    return name.endswith(("_total", "_count", "_sum", "_bucket"))  # _created is a timestamp: it stays


def advancing(text: str, step_s: float = 1.0) -> Callable[[float], str]:
    """An exposition whose cumulative samples grow linearly in time (see module doc), re-rendered at
    most once per ``step_s`` (a scrape inside the same step gets the same bytes, like a real target
    between two updates of its counters)."""
    chunks: list[str] = []  # static text before each value
    values: list[float] = []
    tail: list[str] = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        value: float | None = None
        if not line.startswith("#") and m is not None and _is_cumulative(m[1]):
            try:
                value = float(m[3])
            except ValueError:
                value = None
        if m is None or value is None or m[4]:  # a sample with a timestamp stays as recorded
            tail.append(line)
            continue
        chunks.append("\n".join(tail) + ("\n" if tail else "") + f"{m[1]}{m[2] or ''} ")
        tail = []
        values.append(value)
    base = np.array(values, dtype=float)
    end = "\n".join(tail) + "\n"
    cache: dict[int, str] = {}

    def at(t: float) -> str:
        step = int(t // step_s)
        text_at = cache.get(step)
        if text_at is None:
            formatted = np.char.mod("%.6g", base * (1.0 + step * step_s / 100.0)).tolist()
            text_at = "".join(c + v + "\n" for c, v in zip(chunks, formatted, strict=True)) + end
            cache.clear()
            cache[step] = text_at
        return text_at

    return at


def network_and_gpu_lines(topology: Topology, pop: str) -> str:
    """The exporter's per-slice link counters, caps, and GPU series for one PoP's slices."""
    lines = [
        f"# TYPE {mn.LINK_RECEIVE_BYTES} counter", f"# TYPE {mn.LINK_TRANSMIT_BYTES} counter",
        f"# TYPE {mn.LINK_CAP_BPS} gauge", f"# TYPE {mn.GPU_ALLOCATED_FRACTION} gauge", f"# TYPE {mn.GPU_UTILIZATION} gauge",
    ]  # fmt: skip
    gpus: set[int] = set()
    for tier in topology.tiers:
        if not tier.name.endswith(pop):
            continue
        link = f'slice="{tier.name}",pop="{pop}",link="client-edge"'
        lines.append(f"{mn.LINK_RECEIVE_BYTES}{{{link}}} 1.0e6")
        lines.append(f"{mn.LINK_TRANSMIT_BYTES}{{{link}}} 4.0e7")
        lines.append(f'{mn.LINK_CAP_BPS}{{{link},direction="receive"}} 1e9')
        for r, slot in enumerate(tier.placement):
            gpu = int(slot.rsplit("gpu", 1)[1])
            gpus.add(gpu)
            lines.append(f'{mn.GPU_ALLOCATED_FRACTION}{{slice="{tier.name}",pop="{pop}",replica="{tier.name}-{r}",gpu="{gpu}"}} 0.5')
    lines += [f'{mn.GPU_UTILIZATION}{{pop="{pop}",gpu="{g}"}} 0.6' for g in sorted(gpus)]
    return "\n".join(lines) + "\n"


def relabel_node(text: str, pop_index: int) -> str:
    return text.replace(pop_name(0), pop_name(pop_index))


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        fn = self.server.routes.get(self.path)
        if fn is None:
            self.send_error(404)
            return
        body = fn(time.time() - self.server.t0).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # 100 exporters are scraped at once; the default backlog of 5 refuses them
    routes: dict[str, Callable[[float], str]]
    t0: float


def _relabelled(render: Callable[[float], str], pop: str) -> Callable[[float], str]:
    return lambda t: render(t).replace(pop_name(0), pop)


def _serve(texts: dict[str, str], port_queue: Any, cpu: int | None, step_s: float, pops: dict[str, str] | None = None) -> None:
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})
    server = _Server(("127.0.0.1", 0), _Handler)
    if pops is None:
        server.routes = {path: advancing(text, step_s) for path, text in texts.items()}
    else:
        # One template (PoP p000's text), rendered once per step and relabelled per PoP: every PoP's
        # exposition is that text with its name (relabel_node), and rendering 1,000 of them each
        # scrape interval made the fake targets, not Prometheus, the busiest thing on the machine.
        (template,) = texts.values()
        render = advancing(template, step_s)
        server.routes = {path: _relabelled(render, pop) for path, pop in pops.items()}
    server.t0 = time.time()
    port_queue.put(server.server_address[1])
    server.serve_forever()


class FakeTargets:
    """A child process serving ``path -> exposition`` (advancing in time) on a loopback port."""

    def __init__(self, texts: dict[str, str], cpu: int | None = None, step_s: float = 1.0, pops: dict[str, str] | None = None) -> None:
        """``pops``: path -> PoP name, every path serving ``texts``' single template relabelled to its PoP."""
        ctx = multiprocessing.get_context("spawn")
        queue = ctx.Queue()
        self._proc = ctx.Process(target=_serve, args=(texts, queue, cpu, step_s, pops), daemon=True)
        self._proc.start()
        self.port = int(queue.get(timeout=60))

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self._proc.terminate()
        self._proc.join(timeout=5)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(timeout=5)
