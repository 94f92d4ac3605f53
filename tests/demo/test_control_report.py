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
    # The window ending at 116 began before the raise (8 s windows): "after" is the first one wholly under it.
    history = {
        "standard": [
            {"window_end_s": 109.0, "regime": "network_limited"},
            {"window_end_s": 116.0, "regime": "network_limited"},
            {"window_end_s": 119.0, "regime": "healthy"},
        ]
    }
    events = [
        {"at_s": 120.0, "tier": "free", "kind": "at_ceiling", "message": "free is queue_limited at its ceiling ... max_ongoing_requests=12"}
    ]
    text = "\n".join(control_section(actions, history, timeline, events))
    row = "| remedies | auto | set_cap | standard | 1.00 Mbit/s | network_limited | applied | 1 | 10 s | - | network_limited -> healthy |"
    assert row in text
    assert "1 further proposals were refused" in text
    assert "at_ceiling (free)" in text and "max_ongoing_requests=12" in text


def test_repeated_proposals_are_one_row_and_each_verdict_shows_as_such() -> None:
    """The issue's report listed 19 identical dry-run rows: one row now, with a count and first/last time;
    an insufficient raise and an ineffective scale-out read as such."""
    phases = DEFAULT_STORY.phases
    timeline = [(phases[1], 100.0, 130.0), (phases[2], 130.0, 160.0)]
    cap = {"kind": "set_cap", "value": 1.5e6, "regime": "network_limited"}
    proposal = {"tier": "standard", "mode": "dry-run", "state": "dry_run", "action": cap}
    move = {"kind": "relocate", "value": "london/gpu0", "regime": "compute_limited", "replica": "premium-0"}
    actions = [{**proposal, "decided_s": 104.0 + k} for k in range(19)]
    actions += [
        {"tier": "premium", "mode": "dry-run", "state": "dry_run", "action": move, "decided_s": 104.5 + k} for k in range(19)
    ]  # interleaved
    actions += [
        {"tier": "standard", "mode": "auto", "state": "applied", "decided_s": 131.0, "applied_s": 131.2, "outcome": "insufficient",
         "action": {"kind": "set_cap", "value": 0.86e6, "regime": "network_limited", "expected_by_s": 135.0}},
        {"tier": "standard", "mode": "auto", "state": "applied", "decided_s": 137.0, "applied_s": 137.2, "outcome": "effective",
         "action": {"kind": "set_cap", "value": 2.59e6, "regime": "network_limited", "expected_by_s": 141.0}},
        {"tier": "premium", "mode": "auto", "state": "applied", "decided_s": 133.0, "applied_s": 133.1, "outcome": "ineffective",
         "action": {"kind": "set_replicas", "value": 3, "regime": "compute_limited", "expected_by_s": 145.0}},
    ]  # fmt: skip
    text = "\n".join(control_section(actions, {}, timeline, [{"at_s": 150.0, "tier": "premium", "kind": "ineffective", "message": "m"}]))
    rows = [line for line in text.splitlines() if line.startswith("| three regimes") or line.startswith("| remedies")]
    assert len(rows) == 5
    assert "| three regimes | dry-run | set_cap | standard | 1.50 Mbit/s | network_limited | dry_run | 19 | 4-22 s |" in rows[0]
    assert "| three regimes | dry-run | relocate premium-0 | premium | london/gpu0 | compute_limited | dry_run | 19 | 4-22 s |" in rows[1]
    assert rows[2].endswith("| insufficient |") and "0.86 Mbit/s" in rows[2]
    assert rows[3].endswith("| ineffective |") and rows[4].endswith("| effective |")
    assert "- remedies: ineffective (premium): m" in text


def test_an_action_is_not_credited_with_the_next_ones_effect() -> None:
    """The issue's demo: the raise to 0.86 Mbit/s bound and the controller raised again to 2.59 six
    seconds later; the first window wholly after the first raise was measured under 2.59, so the first
    raise has no "after" of its own (—), and the second gets the healthy window."""
    phase = DEFAULT_STORY.phases[2]
    timeline = [(phase, 100.0, 160.0)]
    raise1 = {"kind": "set_cap", "value": 0.86e6, "regime": "network_limited", "expected_by_s": 135.0}
    raise2 = {"kind": "set_cap", "value": 2.59e6, "regime": "network_limited", "expected_by_s": 141.0}
    scale = {"kind": "set_replicas", "value": 3, "regime": "queue_limited", "expected_by_s": 140.0}
    actions = [
        {"tier": "standard", "mode": "auto", "state": "applied", "decided_s": 131.0, "applied_s": 131.2, "outcome": "insufficient",
         "action": raise1},
        {"tier": "standard", "mode": "auto", "state": "applied", "decided_s": 137.0, "applied_s": 137.2, "outcome": "effective",
         "action": raise2},
        # another knob of the same tier does not cut the raise's window, nor the raises its
        {"tier": "standard", "mode": "auto", "state": "applied", "decided_s": 132.0, "applied_s": 132.0, "outcome": "effective",
         "action": scale},
    ]  # fmt: skip
    history = {
        "standard": [
            {"window_end_s": 130.0, "regime": "network_limited"},
            {"window_end_s": 141.0, "regime": "healthy"},
            {"window_end_s": 146.0, "regime": "healthy"},
        ]
    }
    text = "\n".join(control_section(actions, history, timeline))
    rows = {line.split(" | ")[4]: line for line in text.splitlines() if line.startswith("| remedies")}
    assert "| network_limited -> — |" in rows["0.86 Mbit/s"]
    assert "| network_limited -> healthy |" in rows["2.59 Mbit/s"]
    assert "| network_limited -> healthy |" in rows["3"]


def test_a_move_is_not_credited_with_the_next_move_of_the_same_tier() -> None:
    """The "after" columns measure the whole tier: Premium's first move, followed by a second one
    before a window measured it alone, has no "after"; the second gets the healthy window."""
    timeline = [(DEFAULT_STORY.phases[2], 100.0, 160.0)]
    move = {"kind": "relocate", "regime": "compute_limited", "expected_by_s": 0.0}
    actions = [
        {"tier": "premium", "mode": "auto", "state": "applied", "decided_s": 133.0, "applied_s": 133.0, "outcome": "superseded",
         "action": {**move, "value": "dublin/gpu0", "replica": "premium-0", "expected_by_s": 137.0}},
        {"tier": "premium", "mode": "auto", "state": "applied", "decided_s": 140.0, "applied_s": 140.0, "outcome": "effective",
         "action": {**move, "value": "dublin/gpu1", "replica": "premium-1", "expected_by_s": 144.0}},
    ]  # fmt: skip
    history = {"premium": [{"window_end_s": 130.0, "regime": "compute_limited"}, {"window_end_s": 149.0, "regime": "healthy"}]}
    text = "\n".join(control_section(actions, history, timeline))
    rows = [line for line in text.splitlines() if line.startswith("| remedies")]
    assert "premium-0" in rows[0] and "| compute_limited -> — |" in rows[0]
    assert "premium-1" in rows[1] and "| compute_limited -> healthy |" in rows[1]
