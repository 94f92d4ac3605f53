"""WAN telemetry for the console's topology: measured rate and RTT per PoP pair.

The exporters publish per-tunnel byte counters ``{slice, pop, peer_pop}`` and PoP-to-PoP probe RTT
histograms ``{pop, peer_pop}``; Prometheus holds their rates. ``PrometheusLinks`` asks it for both,
at most once per ``ttl_s`` however many pages poll, and never lets a slow or dead Prometheus stall a
page: the last answer is kept and the source is reported down.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from inferslice import metric_names as mn
from inferslice.service.console.view import LinkSample

Samples = Mapping[frozenset[str], LinkSample]


class LinkTelemetry(Protocol):
    def samples(self) -> Samples: ...

    def status(self) -> dict[str, Any] | None:
        """A ``sources`` entry for the page (None: nothing to report)."""
        ...


class NoLinkTelemetry:
    def samples(self) -> Samples:
        return {}

    def status(self) -> dict[str, Any] | None:
        return {"name": "WAN telemetry", "ok": None, "detail": "not configured: links show configured RTT only", "age_s": None}


class StaticLinks:
    """Fixed samples (a recorded session, the synthetic benchmark)."""

    def __init__(self, samples: Samples, label: str = "recorded") -> None:
        self._samples = dict(samples)
        self.label = label

    def samples(self) -> Samples:
        return self._samples

    def status(self) -> dict[str, Any] | None:
        return {"name": "WAN telemetry", "ok": True, "detail": f"{self.label}: {len(self._samples)} links", "age_s": None}


@dataclass(frozen=True)
class PrometheusLinkSettings:
    base_url: str = "http://127.0.0.1:9090"
    rate_window: str = "30s"  # 15 scrapes at 2 s: a rate that does not jump with one scrape
    ttl_s: float = 2.0  # one query pair per scrape interval, whatever the number of pages
    timeout_s: float = 1.0  # a page update must not wait on a struggling Prometheus longer than this


def link_queries(rate_window: str) -> tuple[str, str]:
    rate = f"sum by (pop, peer_pop) (rate({mn.TUNNEL_TRANSMIT_BYTES}[{rate_window}])) * 8"
    rtt = f"histogram_quantile(0.5, sum by (pop, peer_pop, le) (rate({mn.POP_RTT}_bucket[{rate_window}])))"
    return rate, rtt


def samples_from_vectors(rate: list[dict[str, Any]], rtt: list[dict[str, Any]]) -> dict[frozenset[str], LinkSample]:
    """Per undirected pair: the busier direction's rate (what meets the capacity) and the mean RTT."""
    rates: dict[frozenset[str], float] = {}
    rtts: dict[frozenset[str], list[float]] = {}
    for row in rate:
        pair = frozenset((row["metric"].get("pop", ""), row["metric"].get("peer_pop", "")))
        value = float(row["value"][1])
        if len(pair) == 2 and value == value:  # NaN when a counter is new
            rates[pair] = max(rates.get(pair, 0.0), value)
    for row in rtt:
        pair = frozenset((row["metric"].get("pop", ""), row["metric"].get("peer_pop", "")))
        value = float(row["value"][1])
        if len(pair) == 2 and value == value:
            rtts.setdefault(pair, []).append(value)
    return {
        p: LinkSample(rate_bps=rates.get(p), rtt_s=sum(rtts[p]) / len(rtts[p]) if p in rtts else None) for p in rates.keys() | rtts.keys()
    }


class PrometheusLinks:
    def __init__(self, settings: PrometheusLinkSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.clock = clock
        self._lock = threading.Lock()
        self._samples: dict[frozenset[str], LinkSample] = {}
        self._at: float | None = None
        self._ok_at: float | None = None
        self._error: str | None = None

    def _query(self, client: httpx.Client, expr: str) -> list[dict[str, Any]]:
        r = client.get(f"{self.settings.base_url}/api/v1/query", params={"query": expr})
        r.raise_for_status()
        body = r.json()
        if body.get("status") != "success":
            raise ValueError(body.get("error", "query failed"))
        return list(body["data"]["result"])

    def samples(self) -> Samples:
        with self._lock:
            now = self.clock()
            if self._at is not None and now - self._at < self.settings.ttl_s:
                return self._samples
            self._at = now
            try:
                with httpx.Client(timeout=self.settings.timeout_s) as client:
                    rate_q, rtt_q = link_queries(self.settings.rate_window)
                    self._samples = samples_from_vectors(self._query(client, rate_q), self._query(client, rtt_q))
                self._ok_at, self._error = now, None
            except (httpx.HTTPError, ValueError, KeyError) as err:
                self._error = f"{type(err).__name__}: {err}"  # keep the last samples; status says they are old
            return self._samples

    def status(self) -> dict[str, Any] | None:
        with self._lock:
            age = None if self._ok_at is None else self.clock() - self._ok_at
            if self._error is not None:
                return {"name": "WAN telemetry", "ok": False, "detail": f"Prometheus {self.settings.base_url}: {self._error}", "age_s": age}
            return {"name": "WAN telemetry", "ok": True, "detail": f"Prometheus {self.settings.base_url}", "age_s": age}
