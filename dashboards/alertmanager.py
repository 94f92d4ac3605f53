"""Alertmanager configuration generated from the tiers file: one route per (tier, severity), every
receiver a webhook to the diagnosis API's ``POST /v1/alerts``.

Distinct receiver names per route let the API tell from the payload's ``receiver`` field which
tier and severity an alert group was routed as, though all of them post to the same URL.

The webhook is a mutating endpoint of the API, so it needs the API's bearer token: with
``token_file`` every webhook carries ``http_config.authorization`` reading the token from that file
(Alertmanager rereads it per request, so the token never appears in the config itself).
"""

from __future__ import annotations

from typing import Any

from inferslice.dashboards.rules import SEVERITY_PAGE, SEVERITY_TICKET, scaled_duration
from inferslice.topology import Topology

DEFAULT_API_URL = "http://127.0.0.1:8080"

# Pages are grouped briefly and repeated hourly; tickets wait longer to batch a tier's alerts
# and repeat twice a day; anything else (source down without a slice) falls to the default.
_TIMING: dict[str, dict[str, str]] = {
    SEVERITY_PAGE: {"group_wait": "10s", "group_interval": "1m", "repeat_interval": "1h"},
    SEVERITY_TICKET: {"group_wait": "1m", "group_interval": "5m", "repeat_interval": "12h"},
}


def webhook_url(api_url: str) -> str:
    return f"{api_url.rstrip('/')}/v1/alerts"


def _receiver(name: str, api_url: str, token_file: str | None = None) -> dict[str, Any]:
    hook: dict[str, Any] = {"url": webhook_url(api_url), "send_resolved": True, "max_alerts": 0}
    if token_file is not None:
        hook["http_config"] = {"authorization": {"type": "Bearer", "credentials_file": token_file}}
    return {"name": name, "webhook_configs": [hook]}


def receiver_name(tier: str | None, severity: str | None) -> str:
    return "inferslice-" + "-".join(x for x in (tier, severity) if x) if (tier or severity) else "inferslice-default"


def _scaled(timing: dict[str, str], factor: float) -> dict[str, str]:
    return timing if factor == 1.0 else {k: scaled_duration(v, factor) for k, v in timing.items()}


def alertmanager_config(
    topology: Topology, api_url: str = DEFAULT_API_URL, hold_scale: float = 1.0, token_file: str | None = None
) -> dict[str, Any]:
    """``hold_scale`` multiplies every group_wait/group_interval/repeat_interval (tests: ~0.01, as the rules' holds);
    ``token_file``: an absolute path Alertmanager reads the API's bearer token from."""
    if not hold_scale > 0:
        raise ValueError("hold_scale must be > 0")
    routes: list[dict[str, Any]] = []
    receivers = [_receiver(receiver_name(None, None), api_url, token_file)]
    for tier in sorted(topology.tiers, key=lambda t: -t.priority):
        for severity in (SEVERITY_PAGE, SEVERITY_TICKET):
            name = receiver_name(tier.name, severity)
            routes.append(
                {"receiver": name, "matchers": [f'slice="{tier.name}"', f'severity="{severity}"'], **_scaled(_TIMING[severity], hold_scale)}
            )
            receivers.append(_receiver(name, api_url, token_file))
    for severity in (SEVERITY_PAGE, SEVERITY_TICKET):  # alerts without a slice label (sources, scrape targets)
        name = receiver_name(None, severity)
        routes.append({"receiver": name, "matchers": [f'severity="{severity}"'], **_scaled(_TIMING[severity], hold_scale)})
        receivers.append(_receiver(name, api_url, token_file))
    return {
        "global": {"resolve_timeout": "5m"},
        "route": {
            "receiver": receiver_name(None, None),
            "group_by": ["slice", "alertname"],
            **_scaled({"group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"}, hold_scale),
            "routes": routes,
        },
        # A tier's page already covers the same alert's ticket (the TTFT ladder, the burn pair).
        "inhibit_rules": [
            {
                "source_matchers": [f'severity="{SEVERITY_PAGE}"'],
                "target_matchers": [f'severity="{SEVERITY_TICKET}"'],
                "equal": ["slice", "alertname"],
            }
        ],
        "receivers": receivers,
    }
