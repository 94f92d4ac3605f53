"""The control loop's modes and error handling, in process, against the file-backed actuator."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.exposition import generate_latest

from inferslice.actions import Action
from inferslice.control.actuators.base import ApplyResult, PermanentActuatorError, RetryableActuatorError
from inferslice.control.settings import tier_policies
from inferslice.diagnosis import Diagnosis, Regime
from inferslice.service.controller import Controller, Mode
from inferslice.service.controller.audit import AuditLog, TransitionError
from inferslice.snapshot import SliceSnapshot

from .fake_backend import FileActuator
from .helpers import TOPOLOGY


def _source() -> dict[str, tuple[Diagnosis, SliceSnapshot]]:
    return {
        "premium": (
            Diagnosis("premium", Regime.QUEUE_LIMITED, confidence=0.9),
            SliceSnapshot("premium", request_rate=2.0, requests_waiting=30.0, queue_time_p99_s=4.0),
        )
    }


def _controller(tmp_path: Path, mode: Mode, actuator: FileActuator | None = None) -> tuple[Controller, FileActuator, dict[str, float]]:
    act = actuator or FileActuator(tmp_path / "backend.json", TOPOLOGY)
    clock = {"t": 100.0}
    ctl = Controller(TOPOLOGY, tier_policies(TOPOLOGY), act, AuditLog(tmp_path / "audit.db"), _source, clock=lambda: clock["t"], mode=mode)
    return ctl, act, clock


def test_dry_run_records_and_applies_nothing(tmp_path: Path) -> None:
    ctl, act, _ = _controller(tmp_path, Mode.DRY_RUN)
    report = ctl.tick()
    assert [a.kind.value for a in report.decided] == ["set_replicas"]
    assert act.observe()["premium"].replicas_target == 1
    [row] = ctl.audit.actions()
    assert row["state"] == "dry_run" and row["diagnosis"]["regime"] == "queue_limited" and "queue_limited" in row["action"]["reason"]
    assert ctl.states["premium"].checks == ()  # a dry-run action is never judged


def test_approve_mode_waits_for_the_operator(tmp_path: Path) -> None:
    ctl, act, clock = _controller(tmp_path, Mode.APPROVE)
    ctl.tick()
    [pending] = ctl.audit.actions(state="pending")
    assert act.observe()["premium"].replicas_target == 1
    clock["t"] = 102.0
    row = ctl.approve(pending["id"], "alice")
    assert row["state"] == "approved" and row["approved_by"] == "alice"
    with pytest.raises(TransitionError):
        ctl.approve(pending["id"], "bob")  # no longer pending
    ctl.drive()
    assert act.observe()["premium"].replicas_target == pending["action"]["value"]
    assert ctl.audit.action(pending["id"])["state"] == "applied"  # type: ignore[index]
    check = next(c for c in ctl.states["premium"].checks if c.action_id == pending["id"])
    assert check.applied and check.expected_by_s == pytest.approx(102.0 + 16.0)  # judged from approval, not proposal
    text = generate_latest(ctl.metrics.registry).decode()
    assert 'inferslice_control_actions_total{kind="set_replicas",outcome="applied",slice="premium"} 1.0' in text
    assert 'inferslice_control_actions_total{kind="set_replicas",outcome="pending",slice="premium"} 1.0' in text


def test_rejected_action_is_never_applied(tmp_path: Path) -> None:
    ctl, act, _ = _controller(tmp_path, Mode.APPROVE)
    ctl.tick()
    [pending] = ctl.audit.actions(state="pending")
    ctl.reject(pending["id"], "alice")
    ctl.drive()
    assert act.observe()["premium"].replicas_target == 1
    assert ctl.audit.action(pending["id"])["state"] == "rejected"  # type: ignore[index]


class _Flaky(FileActuator):
    def __init__(self, path: Path, error: Exception) -> None:
        super().__init__(path, TOPOLOGY)
        self.error = error

    def apply(self, action: Action) -> ApplyResult:
        raise self.error


def test_retryable_errors_retry_then_fail_and_permanent_fails_at_once(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    ctl, _, _ = _controller(tmp_path / "r", Mode.AUTO, _Flaky(tmp_path / "r" / "b.json", RetryableActuatorError("busy")))
    ctl.tick()
    [row] = ctl.audit.actions()
    assert row["state"] == "approved" and row["attempts"] == 1 and "retryable" in row["detail"]
    for _ in range(4):
        ctl.drive()
    assert ctl.audit.action(row["id"])["state"] == "failed"  # type: ignore[index]
    (tmp_path / "p").mkdir()
    ctl, _, _ = _controller(tmp_path / "p", Mode.AUTO, _Flaky(tmp_path / "p" / "b.json", PermanentActuatorError("no such tier")))
    ctl.tick()
    [row] = ctl.audit.actions()
    assert row["state"] == "failed" and row["attempts"] == 1 and ctl.states["premium"].checks == ()


def test_verdicts_reach_the_trail_the_api_and_metrics_as_such(tmp_path: Path) -> None:
    """A squeezed Standard: the cap raise is judged on the first window measured under it, which fills
    it again: insufficient in the audit row (what GET /v1/actions serves) and in the metric."""
    act = FileActuator(tmp_path / "backend.json", TOPOLOGY)
    data = act._read()
    data["tiers"]["standard"]["cap_bps"] = 0.5e6
    act._write(data)
    clock = {"t": 100.0}

    def source() -> dict[str, tuple[Diagnosis, SliceSnapshot]]:
        cap = float(act.observe()["standard"].cap_bps or 0.0)
        t = clock["t"]
        snap = SliceSnapshot("standard", window_end_s=t, window_s=8.0, request_rate=1.5, link_rx_bps=0.97 * cap, link_cap_bps=cap,
                             output_tokens_per_s=220.0, ref_output_tokens_per_s=370.0)  # fmt: skip
        return {"standard": (Diagnosis("standard", Regime.NETWORK_LIMITED, confidence=0.8, window_end_s=t), snap)}

    ctl = Controller(
        TOPOLOGY, tier_policies(TOPOLOGY), act, AuditLog(tmp_path / "audit.db"), source, clock=lambda: clock["t"], mode=Mode.AUTO
    )
    while clock["t"] < 130.0:
        ctl.tick()
        clock["t"] += 2.0
    raises = [r for r in ctl.audit.actions() if r["kind"] == "set_cap" and r["state"] == "applied"]
    assert len(raises) >= 2 and raises[0]["outcome"] == "insufficient"  # judged under its own value, then raised again
    text = generate_latest(ctl.metrics.registry).decode()
    assert 'inferslice_control_actions_total{kind="set_cap",outcome="insufficient",slice="standard"}' in text


def test_a_batch_is_judged_in_priority_order(tmp_path: Path) -> None:
    """Every tier's own GPUs are in use and a co-tenant slows bristol: Free, Standard and Premium each
    want half of dublin/gpu1 (the one GPU no tier reserves) in the same step; two fit. Premium (the
    highest priority) and Standard get it, Free's move is refused and decided again on a later step."""
    act = FileActuator(tmp_path / "backend.json", TOPOLOGY)
    data = act._read()
    for tier, n in (("free", 1), ("standard", 3), ("premium", 6)):
        data["tiers"][tier]["replicas"] = n
    data["shares"] = {"bristol/gpu0": 0.35, "bristol/gpu1": 0.35}
    act._write(data)
    clock = {"t": 100.0}

    def source() -> dict[str, tuple[Diagnosis, SliceSnapshot]]:
        t = clock["t"]
        return {
            tier: (
                Diagnosis(tier, Regime.COMPUTE_LIMITED, confidence=0.9, window_end_s=t),
                SliceSnapshot(tier, request_rate=1.0, gpu_share=0.35),
            )
            for tier in ("free", "standard", "premium")
        }

    ctl = Controller(TOPOLOGY, tier_policies(TOPOLOGY), act, AuditLog(tmp_path / "a.db"), source, clock=lambda: clock["t"], mode=Mode.AUTO)
    for _ in range(2):  # a compute verdict acts on its second window
        ctl.tick()
        clock["t"] += 2.0
    moves = {(r["tier"], r["state"]) for r in ctl.audit.actions() if r["kind"] == "relocate"}
    assert {"premium", "standard"} == {t for t, s in moves if s != "refused"} and ("free", "refused") in moves
