"""The host's CPU steal (common/hostcpu.py) from /proc/stat's first line."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferslice.common import hostcpu


def _stat(tmp_path: Path, line: str) -> Path:
    path = tmp_path / "stat"
    path.write_text(line + "\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
    return path


def test_steal_is_the_eighth_field_and_the_total_leaves_guest_out(tmp_path: Path) -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice: guest is already inside user
    got = hostcpu.read(_stat(tmp_path, "cpu  100 0 50 800 10 0 5 35 70 0"))
    assert got == hostcpu.CpuTimes(steal=35, total=1000)


def test_the_share_between_two_readings() -> None:
    before, after = hostcpu.CpuTimes(steal=100, total=1000), hostcpu.CpuTimes(steal=160, total=1200)
    assert hostcpu.steal_share(before, after) == pytest.approx(0.3)
    assert hostcpu.steal_share(after, after) is None  # no time passed: unknown, not 0
    assert hostcpu.steal_share(None, after) is None


@pytest.mark.parametrize("line", ["", "intr 1 2 3", "cpu 1 2 3", "cpu a b c d e f g h i"])
def test_an_unreadable_stat_is_unknown_not_an_error(tmp_path: Path, line: str) -> None:
    assert hostcpu.read(_stat(tmp_path, line)) is None
    assert hostcpu.read(tmp_path / "absent") is None


def test_this_machine_reads() -> None:
    got = hostcpu.read()
    assert got is not None and 0 <= got.steal <= got.total
