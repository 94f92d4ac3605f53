"""The demo's approve segment against a fake API: waits for the tier's pending action, approves it
with a POST, notices when it is applied; gives up (and says so) after its wait."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from inferslice.cli.demo.approval import WAIT_S, Approval, report_lines


@dataclass
class Resp:
    status_code: int


@dataclass
class FakeApi:
    rows: list[dict[str, Any]] = field(default_factory=list)
    posts: list[tuple[str, str, Any]] = field(default_factory=list)

    def api_get(self, path: str, **params: Any) -> Any:
        assert path == "/v1/actions"
        return [r for r in self.rows if r["state"] == params["state"] and params.get("slice") in (None, r["tier"])]

    def api_write(self, method: str, path: str, body: Any) -> Resp:
        self.posts.append((method, path, body))
        aid = path.split("/")[3]
        for r in self.rows:
            if r["id"] == aid and r["state"] == "pending":
                r["state"] = "approved"
                return Resp(200)
        return Resp(409)


def _row(aid: str, tier: str, state: str = "pending") -> dict[str, Any]:
    action = {"kind": "set_cap", "value": 1.5e6, "regime": "network_limited"}
    return {"id": aid, "tier": tier, "state": state, "decided_s": 103.0, "action": action}


def test_waits_for_the_tiers_action_approves_it_and_sees_it_applied() -> None:
    api = FakeApi()
    a = Approval("standard", started_s=100.0)
    assert a.step(api, 101.0) == [] and a.action_id is None  # nothing pending yet
    api.rows += [_row("premium-3-set_replicas", "premium"), _row("standard-7-set_cap", "standard")]
    lines = a.step(api, 104.0)
    assert a.action_id == "standard-7-set_cap" and a.approved_s == 104.0 and not a.done
    assert ("POST", "/v1/actions/standard-7-set_cap/approve", {"by": "demo-operator"}) in api.posts
    assert a.others == ["premium-3-set_replicas"]  # the operator approves what else is pending, it does not gate
    assert any("1.50 Mbit/s" in line for line in lines)
    api.rows[1].update(state="applied", applied_s=105.5, detail="standard: receive cap 1.5 Mbit/s")
    a.step(api, 106.0)
    assert a.done and a.applied_s == 105.5
    d = a.to_dict()
    got = (d["state"], d["pending_after_s"], d["approved_after_s"], d["applied_after_s"], d["http_status"])
    assert got == ("applied", 3.0, 4.0, 5.5, 200)
    assert "approved by demo-operator" in report_lines(d)[1]


def test_gives_up_after_its_wait_and_the_report_says_so() -> None:
    a = Approval("standard", started_s=0.0)
    assert not a.gave_up(WAIT_S - 1) and a.gave_up(WAIT_S + 1)
    assert a.to_dict()["state"] == "none"
    assert "NOT completed" in report_lines(a.to_dict())[1]
