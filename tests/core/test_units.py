"""Figures as a reader wants them: the issue's own examples, and the fidelity report that used to print raw floats."""

from __future__ import annotations

from inferslice.common import units
from inferslice.testbed.scenarios.fidelity import Check, checks_to_markdown


def test_the_issues_examples() -> None:
    assert units.seconds(0.061101534120050476) == "61 ms"
    assert units.seconds(0.0690473811200627) == "69 ms"
    assert units.bits_per_second(9.919e05) == "0.99 Mbit/s"


def test_precision_follows_magnitude() -> None:
    assert [units.seconds(v) for v in (0.0062, 0.25, 2.345, 125.0)] == ["6.2 ms", "250 ms", "2.35 s", "125 s"]
    assert [units.bits_per_second(v) for v in (5e5, 4.2e7, 3.5e8, 1e10)] == ["0.50 Mbit/s", "42.0 Mbit/s", "350 Mbit/s", "10.0 Gbit/s"]
    assert units.factor(4.3456) == "4.35x" and units.mbit(9.919e5) == "0.99"


def test_missing_and_non_finite_print_as_a_dash() -> None:
    assert units.seconds(None) == units.bits_per_second(float("nan")) == units.factor(float("inf")) == "-"


def test_the_fidelity_report_prints_units() -> None:
    table = checks_to_markdown(
        [
            Check("standard: uncapped demand at concurrency 10", 9.919e05, "0.90 Mbit/s +/- 25 %", True, unit="bit/s"),
            Check("standard c=10: 0.5 Mbit/s cap multiplies P99 TPOT", 4.3456, ">= 4.0x", True, unit="x"),
            Check("free: first P99 TTFT breach", 16, "16 +/- 4", True),
        ]
    )
    assert "| 0.99 Mbit/s |" in table and "| 4.35x |" in table and "| 16 |" in table
    assert "e+05" not in table
