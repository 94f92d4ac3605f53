"""The recorded session (fixtures/): its topology, windows, actions, alerts and WAN links, loaded into a store."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from inferslice.actions import JUDGED_OUTCOMES, action_from_dict
from inferslice.control.guardrails import GuardState
from inferslice.control.state import ControlEvent
from inferslice.service.console.links import StaticLinks
from inferslice.service.console.view import LinkSample
from inferslice.service.controller.audit import AuditLog, Decided
from inferslice.snapshot import snapshot_from_dict
from inferslice.topology import Topology, load_topology

FIXTURES = Path(__file__).parent / "fixtures"


class Clock:
    """The API's clock, moved by the tests (fresh data, then stale)."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def session_topology() -> Topology:
    return load_topology(FIXTURES / "topology.yaml")


def windows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / "windows.jsonl").read_text().splitlines() if line.strip()]


def session() -> dict[str, Any]:
    return dict(json.loads((FIXTURES / "session.json").read_text()))


def recorded_links() -> StaticLinks:
    return StaticLinks(
        {frozenset((x["a"], x["b"])): LinkSample(rate_bps=x["rate_bps"], rtt_s=x["rtt_s"]) for x in session()["links"]}, label="recorded"
    )


def record_actions(audit: AuditLog, t0: float) -> None:
    """The session's actions in a controller audit log, each in its recorded state and outcome."""
    for item in session()["actions"]:
        data = dict(item["action"])
        for key in ("decided_s", "expected_by_s"):
            data[key] = t0 + data[key]
        action = action_from_dict(data)
        at = t0 + item["at_s"]
        judged = item["outcome"] in JUDGED_OUTCOMES
        state = "applied" if judged else item["outcome"]
        verdict = ControlEvent(at + 18.0, action.slice, item["outcome"], item.get("detail", ""), action.regime, action.id)
        events = [verdict] if judged else []
        decided = [Decided(action, "pending" if state == "pending" else "approved")]
        audit.record_decision(at, "approve", decided, [], events, {}, GuardState())
        if state != "pending":
            audit.transition(action.id, state, at + 1.0, detail=item.get("detail"))


def load_session(service: Any, store: Any, audit: AuditLog | None = None) -> float:
    """Ingest every window, then the actions (into ``audit`` when given, else the store) and alerts;
    returns the session's last window time."""
    rows = windows()
    t0 = rows[0]["window_end_s"]
    for row in rows:
        service.ingest(snapshot_from_dict(row))
    extra = session()
    if audit is not None:
        record_actions(audit, t0)
    for item in extra["actions"] if audit is None else []:
        data = dict(item["action"])
        for key in ("decided_s", "expected_by_s"):
            data[key] = t0 + data[key]
        store.put_action(action_from_dict(data), t0 + item["at_s"], item["outcome"])
    alerts = []
    for a in extra["alerts"]:
        starts = t0 + a["at_s"]
        alerts.append(
            {
                "fingerprint": a["labels"]["alertname"] + a["labels"]["slice"],
                "starts_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(starts)),
                "starts_at_s": starts,
                "ends_at": None,
                "ends_at_s": None,
                "status": a["status"],
                "alertname": a["labels"]["alertname"],
                "slice": a["labels"]["slice"],
                "labels": a["labels"],
                "annotations": a["annotations"],
                "generator_url": "",
            }
        )
    store.put_alerts(alerts, "inferslice-api", t0 + 120)
    return float(rows[-1]["window_end_s"])
