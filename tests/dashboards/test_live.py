"""``live.run_dashboard_queries`` against a real Prometheus (Debian package) scraping a real
prometheus_client endpoint on 127.0.0.1: every generated query is accepted by the server after
variable substitution, and the queries whose metrics are exposed come back non-empty."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest
from prometheus_client import CollectorRegistry, Gauge, make_wsgi_app

from inferslice import metric_names as m
from inferslice.common.prometheus import Prometheus, ScrapeJob, prometheus_config
from inferslice.dashboards import live
from inferslice.errors import RetryableError

READY_TIMEOUT_S = 20.0  # the first scrape lands ~5 s after start whatever the interval (CONTRACTS.md)


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass



@pytest.fixture
def exporter() -> Iterator[int]:
    registry = CollectorRegistry()
    replicas = Gauge(m.SLICE_REPLICAS, "replicas serving", ["slice"], registry=registry)
    ceiling = Gauge(m.SLICE_REPLICAS_MAX, "replica ceiling", ["slice"], registry=registry)
    for tier, n, top in (("free", 1, 1), ("standard", 2, 3), ("premium", 4, 6)):
        replicas.labels(tier).set(n)
        ceiling.labels(tier).set(top)
    server = make_server("127.0.0.1", 0, make_wsgi_app(registry), handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_port)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def prometheus(tmp_path: Path, exporter: int) -> Iterator[str]:
    if shutil.which("prometheus") is None and not Path("/usr/bin/prometheus").exists():
        pytest.skip("prometheus is not installed (Debian package prometheus)")
    prom = Prometheus(tmp_path, prometheus_config([ScrapeJob("inferslice", [f"127.0.0.1:{exporter}"])], 1.0))
    try:
        prom.start(timeout_s=READY_TIMEOUT_S)
        try:
            prom.wait_for_series(m.SLICE_REPLICAS_MAX, timeout_s=READY_TIMEOUT_S)
        except RetryableError:
            pytest.fail("Prometheus did not scrape the exporter in time")
        yield prom.url
    finally:
        prom.stop()


def test_every_query_runs_and_exposed_metrics_are_not_empty(prometheus, artefacts):
    outcomes = live.run_dashboard_queries(prometheus, artefacts.dashboards)
    assert len(outcomes) > 100
    assert [o for o in outcomes if o.error] == []  # the server accepts every substituted query
    filled = {(o.query.dashboard, o.query.panel, o.query.ref) for o in outcomes if not o.empty}
    assert ("inferslice-overview", "Replicas against ceiling", "A") in filled
    assert ("inferslice-overview", "Replicas against ceiling", "B") in filled
    assert ("inferslice-tier-premium", "Replicas and cold starts", "A") in filled
    empty = live.empty_panel_queries(prometheus, artefacts.dashboards)
    assert any(o.query.panel == "P99 TTFT against the SLO" for o in empty)  # no histogram exposed here
    assert len(empty) == len(outcomes) - len(filled)
