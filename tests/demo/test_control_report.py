"""The demo report's control section: applied actions with their cause and measured effect."""

from __future__ import annotations

from inferslice.cli.demo.control_report import control_section
from inferslice.cli.demo.story import DEFAULT_STORY


def test_actions_listed_with_effect_and_refusals_counted() -> None:
    phase = DEFAULT_STORY.phases[2]
    timeline = [(phase, 100.0, 150.0)]
    actions = [
        {"tier": "standard", "mode": "auto", "state": "applied", "decided_s": 110.0, "applied_s": 110.5, "outcome": "effective",
         "action": {"kind": "set_cap", "value": 1e6, "regime": "network_limited", "expected_by_s": 114.0}},
        {"tier": "standard", "mode": "auto", "state": "refused", "decided_s": 112.0, "action": {"kind": "set_cap", "value": 2e6}},
    ]  # fmt: skip
    history = {"standard": [{"window_end_s": 109.0, "regime": "network_limited"}, {"window_end_s": 116.0, "regime": "healthy"}]}
    events = [
        {"at_s": 120.0, "tier": "free", "kind": "at_ceiling", "message": "free is queue_limited at its ceiling ... max_ongoing_requests=12"}
    ]
    text = "\n".join(control_section(actions, history, timeline, events))
    assert "| remedies | auto | set_cap | standard | 1.00 Mbit/s | network_limited | applied | - | network_limited -> healthy |" in text
    assert "1 further proposals were refused" in text
    assert "at_ceiling (free)" in text and "max_ongoing_requests=12" in text
