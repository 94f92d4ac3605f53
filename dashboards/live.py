"""Run every dashboard query against a live Prometheus and report which came back empty.

For the integration test with a real Prometheus scraping the testbed: a panel whose query
returns nothing names a metric the exporters do not expose (yet), a label that does not match,
or a rule that is not loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from inferslice.dashboards.checks import PanelQuery, iter_queries, substitute
from inferslice.errors import SourceUnavailable


@dataclass(frozen=True)
class QueryOutcome:
    query: PanelQuery
    sent: str  # the expression after variable substitution
    series: int
    error: str | None = None

    @property
    def empty(self) -> bool:
        return self.series == 0


def run_dashboard_queries(
    prometheus_url: str,
    dashboards: Sequence[dict[str, Any]],
    *,
    variables: dict[str, str] | None = None,
    rate_interval: str = "1m",
    timeout_s: float = 5.0,
    client: httpx.Client | None = None,
) -> list[QueryOutcome]:
    """Instant-query every panel target and annotation; multi-value variables default to ``.*``.

    ``variables`` overrides values (``{"slice": "premium"}``); ``rate_interval`` stands in for
    ``$__rate_interval`` and should cover at least two scrapes.
    """
    values = {"__rate_interval": rate_interval, "__interval": rate_interval, "__range": "1h", **(variables or {})}
    own = client is None
    http = client or httpx.Client(timeout=timeout_s)
    base = prometheus_url.rstrip("/")
    out: list[QueryOutcome] = []
    try:
        for dash in dashboards:
            for query in iter_queries(dash):
                sent = substitute(query.expr, values, default=".*")
                try:
                    resp = http.get(f"{base}/api/v1/query", params={"query": sent})
                except httpx.HTTPError as err:
                    raise SourceUnavailable(f"Prometheus at {base}: {err}") from err
                body = resp.json() if resp.headers.get("content-type", "").startswith("application/json") else {}
                if resp.status_code != 200 or body.get("status") != "success":
                    out.append(QueryOutcome(query, sent, 0, str(body.get("error") or f"HTTP {resp.status_code}")))
                    continue
                out.append(QueryOutcome(query, sent, len(body["data"]["result"])))
    finally:
        if own:
            http.close()
    return out


def empty_panel_queries(prometheus_url: str, dashboards: Sequence[dict[str, Any]], **kwargs: Any) -> list[QueryOutcome]:
    """The queries that returned no series or an error (the list an integration test asserts empty)."""
    return [o for o in run_dashboard_queries(prometheus_url, dashboards, **kwargs) if o.empty]
