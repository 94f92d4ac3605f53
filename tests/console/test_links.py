"""``PrometheusLinks`` against a stand-in Prometheus on loopback: one query pair per TTL, a dead
Prometheus keeps the last samples and reports the source down; and the state endpoint's encoding."""

from __future__ import annotations

import gzip
import json
import threading
import warnings
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from inferslice.service.app import create_app
from inferslice.service.console.links import PrometheusLinks, PrometheusLinkSettings
from inferslice.service.store import Store
from inferslice.topology import load_topology

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient


class FakePrometheus:
    def __init__(self) -> None:
        self.queries: list[str] = []
        self.up = True
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = parse_qs(urlparse(self.path).query)["query"][0]
                outer.queries.append(query)
                if not outer.up:
                    self.send_response(503)
                    self.end_headers()
                    return
                metric = {"pop": "bristol", "peer_pop": "london"}
                value = "2500000" if "tunnel" in query else "0.0095"
                result = [{"metric": metric, "value": [0, value]}]
                body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def prometheus() -> Iterator[FakePrometheus]:
    p = FakePrometheus()
    yield p
    p.server.shutdown()


def test_one_query_pair_per_ttl_and_a_dead_prometheus_keeps_the_last_samples(prometheus: FakePrometheus) -> None:
    now = [100.0]
    links = PrometheusLinks(PrometheusLinkSettings(base_url=prometheus.url, ttl_s=2.0), clock=lambda: now[0])
    pair = frozenset(("bristol", "london"))
    first = links.samples()
    assert first[pair].rate_bps == 2.5e6 and first[pair].rtt_s == 0.0095
    links.samples()  # same scrape interval: answered from the cache
    assert len(prometheus.queries) == 2
    status = links.status()
    assert status is not None and status["ok"] is True

    prometheus.up = False
    now[0] += 3.0
    assert links.samples()[pair].rate_bps == 2.5e6  # the last answer stays on screen
    status = links.status()
    assert status is not None and status["ok"] is False and "HTTPStatusError" in status["detail"]
    assert status["age_s"] == 3.0  # how old the samples shown are


def test_the_state_document_is_gzipped_for_clients_that_accept_it() -> None:
    store = Store(":memory:")
    client = TestClient(create_app(store, load_topology(), clock=lambda: 1.0))
    plain = client.get("/v1/console/state", headers={"Accept-Encoding": "identity"})
    packed = client.get("/v1/console/state", headers={"Accept-Encoding": "gzip"})
    assert plain.headers.get("content-encoding") is None
    assert packed.headers["content-encoding"] == "gzip"
    assert packed.json()["topology"] == plain.json()["topology"]  # the client decodes it transparently
    assert len(gzip.compress(plain.content)) >= int(packed.headers["content-length"]) * 0.9
    assert "/v1/console/state" in client.get("/openapi.json").json()["paths"]
    page = client.get("/console")
    assert page.status_code == 200 and 'src="/console/static/console.js"' in page.text
    assert client.get("/console/static/vendor/uplot/LICENSE").text.startswith("The MIT License")
    store.close()
