"""The demo report's host-steal lines: each phase's share, and the phases the host starved."""

from __future__ import annotations

from inferslice.cli.demo import _steal_lines


def test_each_phase_is_listed_and_only_the_starved_ones_are_named() -> None:
    lines = _steal_lines({"baseline": 0.004, "remedies": None, "approval": 0.42})
    assert lines[1].endswith("per phase: baseline 0%, approval 42%.")  # an unmeasured phase is left out
    assert lines[2].startswith("Starved: approval (steal >= 25%)")


def test_a_quiet_host_gets_no_starved_line_and_an_unmeasured_one_no_line() -> None:
    assert len(_steal_lines({"baseline": 0.0, "approval": 0.2})) == 2
    assert _steal_lines({"baseline": None}) == []
