"""Helpers for the collector tests: exposition rendering, a tiny metrics server, a real Prometheus."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from inferslice.common.prometheus import Prometheus

Key = tuple[str, tuple[tuple[str, str], ...]]
Samples = dict[Key, float]

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def key(name: str, **labels: str) -> Key:
    return (name, tuple(sorted(labels.items())))


def _fmt(v: float) -> str:
    return "+Inf" if v == float("inf") else repr(float(v))


def _labels(labels: tuple[tuple[str, str], ...]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}" if labels else ""


def render_text(samples: Samples, stamp_s: float | None = None) -> str:
    """Prometheus text format, one line per sample, no TYPE lines (everything 'untyped').

    ``stamp_s`` gives every sample that explicit timestamp (the format's milliseconds), which a
    scraping Prometheus keeps (``honor_timestamps`` is on by default)."""
    stamp = "" if stamp_s is None else f" {round(stamp_s * 1000)}"
    return "".join(f"{name}{_labels(labels)} {_fmt(v)}{stamp}\n" for (name, labels), v in sorted(samples.items()))


def render_openmetrics(scrapes: list[tuple[str, float, Samples]]) -> str:
    """The same samples, timestamped, for ``promtool tsdb create-blocks-from openmetrics``.

    Each sample gets the label ``instance=<target>`` so series of two targets stay apart, as a
    scraping Prometheus would keep them.
    """
    by_name: dict[str, dict[tuple[tuple[str, str], ...], list[tuple[float, float]]]] = {}
    for target, t, samples in scrapes:
        for (name, labels), v in samples.items():
            lbl = tuple(sorted((*labels, ("instance", target))))
            by_name.setdefault(name, {}).setdefault(lbl, []).append((t, v))
    lines = []
    for name in sorted(by_name):
        lines.append(f"# TYPE {name} unknown")
        for lbl, points in by_name[name].items():
            for t, v in sorted(points):
                lines.append(f"{name}{_labels(lbl)} {_fmt(v)} {t:.3f}")
    return "\n".join(lines) + "\n# EOF\n"


def histogram(name: str, buckets: dict[float, float], total: float, **labels: str) -> Samples:
    """Cumulative bucket counts (the +Inf one is the count) and the sum."""
    out: Samples = {}
    for le, count in buckets.items():
        le_s = "+Inf" if le == float("inf") else repr(float(le))
        out[key(name + "_bucket", le=le_s, **labels)] = count
    out[key(name + "_count", **labels)] = buckets[float("inf")]
    out[key(name + "_sum", **labels)] = total
    return out


class ExpositionServer:
    """Serves ``pages[path]`` (text, or an int HTTP status) on 127.0.0.1; ``pages`` may change between scrapes.

    ``dynamic[path]`` (a callable) is evaluated per request, for expositions that evolve in real time.
    """

    def __init__(self) -> None:
        self.pages: dict[str, str | int] = {}
        self.dynamic: dict[str, Callable[[], str]] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                page: str | int | None
                page = outer.dynamic[self.path]() if self.path in outer.dynamic else outer.pages.get(self.path, 404)
                if isinstance(page, int):
                    self.send_response(page)
                    self.end_headers()
                    return
                body = page.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> ExpositionServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def server() -> Iterator[ExpositionServer]:
    with ExpositionServer() as srv:
        yield srv


def require_prometheus() -> None:
    if not (os.path.exists(PROMETHEUS) and os.access(PROMETHEUS, os.X_OK)):
        pytest.skip(f"no Prometheus binary at {PROMETHEUS} (Debian package 'prometheus')")


@contextmanager
def running_prometheus(workdir: Path, config_yaml: str, data_dir: Path | None = None) -> Iterator[str]:
    """Start a real Prometheus on a free loopback port; yields its base URL; stops it by PID."""
    require_prometheus()
    # Backfilled blocks are dated in the past: keep them all.
    prom = Prometheus(workdir, config_yaml, data_dir=data_dir, retention="100y")
    try:
        prom.start(timeout_s=20)
        yield prom.url
    finally:
        prom.stop()


# -- a two-slice world (free, premium) over four targets ------------------------------------------

TTFT = "inferslice_engine_time_to_first_token_seconds"
TPOT = "inferslice_engine_time_per_output_token_seconds"
QUEUE = "inferslice_engine_request_queue_time_seconds"


def world(k: float, *, reset_free_tokens_at: float | None = None) -> dict[str, Samples]:
    """Every target's exposition after ``k`` ten-second steps (counters grow linearly with k).

    Per 10 s: free TTFT buckets 0.1:10, 0.5:60, 1:98, +Inf:100 (sum 30); premium 0.1:80, 0.5:100.
    Free output 1000 tokens, premium 2000; free client edge 125 kB received, 25 kB sent.
    """
    inf = float("inf")
    engine: Samples = {}
    engine.update(histogram(TTFT, {0.1: 10 * k, 0.5: 60 * k, 1.0: 98 * k, inf: 100 * k}, 30 * k, slice="free"))
    engine.update(histogram(TTFT, {0.1: 80 * k, 0.5: 100 * k, 1.0: 100 * k, inf: 100 * k}, 5 * k, slice="premium"))
    engine.update(histogram(TPOT, {0.025: 50 * k, 0.05: 100 * k, inf: 100 * k}, 2.5 * k, slice="free"))
    engine.update(histogram(TPOT, {0.025: 100 * k, 0.05: 100 * k, inf: 100 * k}, 2.0 * k, slice="premium"))
    engine.update(histogram(QUEUE, {0.1: 50 * k, 1.0: 100 * k, inf: 100 * k}, 10 * k, slice="free"))
    free_tokens = 1000 * k
    if reset_free_tokens_at is not None and k >= reset_free_tokens_at:
        free_tokens = 1000 * (k - reset_free_tokens_at)  # the engine restarted: counters start again from 0
    engine[key("inferslice_engine_generation_tokens_total", slice="free")] = free_tokens
    engine[key("inferslice_engine_generation_tokens_total", slice="premium")] = 500 + 2000 * k
    engine[key("inferslice_slo_ttft_requests_total", slice="free")] = 100 * k  # premium: only the TTFT _count
    engine[key("inferslice_engine_preemptions_total", slice="free")] = 0.0
    engine[key("inferslice_engine_requests_running", slice="free")] = 10
    engine[key("inferslice_engine_requests_running", slice="premium")] = 5
    engine[key("inferslice_engine_requests_waiting", slice="free")] = 3
    engine[key("inferslice_engine_requests_waiting", slice="premium")] = 0
    engine[key("inferslice_engine_kv_cache_usage_ratio", slice="free", stat="max")] = 0.6
    engine[key("inferslice_engine_kv_cache_usage_ratio", slice="free", stat="mean")] = 0.3
    engine[key("inferslice_slice_replicas", slice="free")] = 1
    engine[key("inferslice_slice_replicas", slice="premium")] = 4
    engine[key("inferslice_slice_replicas_max", slice="free")] = 1
    engine[key("inferslice_slice_replicas_max", slice="premium")] = 6
    engine[key("inferslice_slo_ttft_seconds", slice="free")] = 0.5
    serve: Samples = {key("inferslice_serve_queued_requests", slice="free"): 4}
    network: Samples = {
        key("inferslice_link_receive_bytes_total", slice="free", pop="bristol", link="client-edge"): 125000 * k,
        key("inferslice_link_transmit_bytes_total", slice="free", pop="bristol", link="client-edge"): 25000 * k,
        key("inferslice_link_receive_bytes_total", slice="premium", pop="bristol", link="client-edge"): 250000 * k,
        key("inferslice_link_transmit_bytes_total", slice="premium", pop="bristol", link="client-edge"): 50000 * k,
        # another link of the same slice: must not count towards the client edge
        key("inferslice_link_receive_bytes_total", slice="free", pop="london", link="overlay-free-london"): 9e6 * k,
        key("inferslice_link_cap_bits_per_second", slice="free", pop="bristol", link="client-edge", direction="receive"): 5e5,
        key("inferslice_link_cap_bits_per_second", slice="free", pop="bristol", link="client-edge", direction="transmit"): 1e5,
        key("inferslice_link_cap_bits_per_second", slice="premium", pop="bristol", link="client-edge", direction="receive"): 1e10,
        # WAN: premium's replicas reach the gateway (bristol) over london's and dublin's links; free's sit at bristol
        key("inferslice_slice_wan_path_rtt_seconds", slice="premium", pop="bristol", peer_pop="london", link="wan-bristol-london"): 0.009,
        key("inferslice_slice_wan_path_rtt_seconds", slice="premium", pop="bristol", peer_pop="dublin", link="wan-bristol-dublin"): 0.018,
        key("inferslice_link_receive_bytes_total", slice="shared", pop="bristol", link="wan-bristol-london"): 1.25e6 * k,  # 1 Mbit/s
        key("inferslice_link_receive_bytes_total", slice="shared", pop="bristol", link="wan-bristol-dublin"): 2.5e6 * k,  # 2 Mbit/s
        key("inferslice_link_receive_bytes_total", slice="shared", pop="london", link="wan-london-bristol"): 9e6 * k,  # the other way
        key("inferslice_link_capacity_bits_per_second", slice="shared", pop="bristol", link="wan-bristol-london"): 10e6,
        key("inferslice_link_capacity_bits_per_second", slice="shared", pop="bristol", link="wan-bristol-dublin"): 4e6,
        key("inferslice_link_capacity_bits_per_second", slice="shared", pop="london", link="wan-london-bristol"): 10e6,
        key("inferslice_pop_rtt_seconds_sum", pop="bristol", peer_pop="london"): 0.2 * k,  # 20 ms mean: 11 ms over its 9
        key("inferslice_pop_rtt_seconds_count", pop="bristol", peer_pop="london"): 10 * k,
        key("inferslice_pop_rtt_seconds_sum", pop="bristol", peer_pop="dublin"): 0.19 * k,  # 19 ms: 1 ms over its 18
        key("inferslice_pop_rtt_seconds_count", pop="bristol", peer_pop="dublin"): 10 * k,
    }
    gpu: Samples = {
        key("inferslice_gpu_utilization_ratio", pop="bristol", gpu="0"): 0.8,
        key("inferslice_gpu_utilization_ratio", pop="london", gpu="0"): 0.4,
        key("inferslice_gpu_utilization_ratio", pop="dublin", gpu="0"): 0.2,
        key("inferslice_gpu_utilization_ratio", pop="bristol", gpu="1"): 1.0,
        key("inferslice_gpu_allocated_fraction", slice="free", pop="bristol", replica="free-0", gpu="0"): 0.5,
        key("inferslice_gpu_allocated_fraction", slice="premium", pop="london", replica="premium-0", gpu="0"): 0.5,
        key("inferslice_gpu_allocated_fraction", slice="premium", pop="london", replica="premium-1", gpu="0"): 0.5,
        key("inferslice_gpu_allocated_fraction", slice="premium", pop="dublin", replica="premium-2", gpu="0"): 0.5,
        key("inferslice_gpu_allocated_fraction", slice="premium", pop="bristol", replica="premium-3", gpu="1"): 0.0,
        key("inferslice_replica_gpu_share_ratio", slice="free", pop="bristol", replica="free-0"): 1.0,
        key("inferslice_replica_gpu_share_ratio", slice="premium", pop="london", replica="premium-0"): 0.9,
        key("inferslice_replica_gpu_share_ratio", slice="premium", pop="dublin", replica="premium-2"): 0.7,
    }
    return {"engine": engine, "serve": serve, "network": network, "gpu": gpu}


# Expected snapshot values of ``world`` over a 20 s window whose samples sit on both window edges
# (the counts are the window's: 10 requests/s x 20 s).
EXPECTED: dict[str, dict[str, float | None]] = {
    "free": {
        "ttft_p50_s": 0.1 + 0.4 * (100 - 20) / (120 - 20),
        "ttft_p99_s": 1.0,  # rank 198 of 200 lies in +Inf: the highest finite bound
        "ttft_mean_s": 0.3,
        "tpot_p50_s": 0.025,
        "tpot_p99_s": 0.025 + 0.025 * (198 - 100) / 100,
        "tpot_mean_s": 0.025,
        "output_tokens_per_s": 100.0,
        "request_rate": 10.0,
        "request_count": 200.0,  # the TTFT _count's increase over the 20 s window the tests use
        "tpot_request_count": 200.0,
        "link_rx_bps": 100000.0,
        "link_tx_bps": 20000.0,
        "link_cap_bps": 5e5,
        "requests_waiting": 7.0,
        "requests_running": 10.0,
        "queue_time_p99_s": 0.1 + 0.9 * (198 - 100) / 100,
        "replicas": 1.0,
        "replicas_max": 1.0,
        "gpu_utilization": 0.8,
        "gpu_share": 1.0,
        "kv_cache_usage": 0.6,
        "preemptions_per_s": 0.0,
        "wan_rx_bps": None,  # every replica at the gateway: no WAN on the path
        "wan_capacity_bps": None,
        "wan_rtt_s": None,
        "wan_base_rtt_s": None,
    },
    "premium": {
        "ttft_p50_s": 0.1 * 100 / 160,
        "ttft_p99_s": 0.1 + 0.4 * (198 - 160) / 40,
        "ttft_mean_s": 0.05,
        "tpot_p50_s": 0.025 * 0.5,
        "tpot_p99_s": 0.025 * 0.99,
        "tpot_mean_s": 0.02,
        "output_tokens_per_s": 200.0,
        "request_rate": 10.0,  # from the TTFT histogram's _count: no SLO counter for premium
        "request_count": 200.0,
        "tpot_request_count": 200.0,
        "link_rx_bps": 200000.0,
        "link_tx_bps": 40000.0,
        "link_cap_bps": 1e10,  # a cap at the nominal 10 Gb/s is no cap: reported at the link's physical rate
        "requests_waiting": 0.0,
        "requests_running": 5.0,
        "queue_time_p99_s": None,  # no queue-time histogram for premium
        "replicas": 4.0,
        "replicas_max": 6.0,
        "gpu_utilization": (0.4 + 0.2) / 2,  # london/gpu0 counted once; the zero allocation on bristol/gpu1 is not a host
        "gpu_share": 0.7,
        "kv_cache_usage": None,
        "preemptions_per_s": None,
        "wan_rx_bps": 2e6,  # the fullest path link: dublin's at 0.5 of 4 Mbit/s (london's is at 0.1 of 10)
        "wan_capacity_bps": 4e6,
        "wan_rtt_s": 0.02,  # the link furthest over its declared RTT: london's, 20 ms against 9
        "wan_base_rtt_s": 0.009,
    },
}
