"""The host's CPU steal: the share of a span in which this virtual machine's CPUs were taken away by
its hypervisor (runnable, not run).

The testbed emulates a WAN and GPUs in real time. When the hypervisor steals the CPUs every process
freezes together and wakes late: the WAN's RTT reads 100+ ms over its delay, tokens arrive in bursts,
the diagnosis loop skips windows, and an honest classifier reads that as a network or compute
bottleneck, because it is one. A real-time result (the demo's phases) therefore carries the steal
measured over it, so a phase the host starved is told apart from one the system got wrong.
Measured on the development VM, 2026-12-07: 0 % in quiet minutes, 36-68 % for a minute at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC_STAT = Path("/proc/stat")
# A share of steal above which a real-time phase is not a test of the system. On the development VM,
# 2026-12-07: one demo run (vmstat every 5 s) read 0 % through the three phases that met all their
# verdicts and 36-68 % through the approval phase, whose three verdicts all missed; two more, measured
# per phase by the demo itself, read 51-64 % in every phase and met 6 and 3 of 12. The bar sits low in
# that gap but not at its floor: CI forgives a miss only above it (.ci/run), so it errs toward judging.
STARVED_SHARE = 0.25


@dataclass(frozen=True)
class CpuTimes:
    steal: int  # clock ticks, every CPU together
    total: int


def read(path: Path = PROC_STAT) -> CpuTimes | None:
    """The machine's CPU times now; None where there is no such file or it cannot be read."""
    try:
        with path.open() as fh:
            first = fh.readline().split()
    except OSError:
        return None
    if len(first) < 9 or first[0] != "cpu":
        return None
    try:
        ticks = [int(x) for x in first[1:9]]  # user nice system idle iowait irq softirq steal (guest is inside user)
    except ValueError:
        return None
    return CpuTimes(steal=ticks[7], total=sum(ticks))


def steal_share(before: CpuTimes | None, after: CpuTimes | None) -> float | None:
    """The share of the CPU time between two readings that the hypervisor took (None: unknown)."""
    if before is None or after is None or after.total <= before.total:
        return None
    return max(0.0, min(1.0, (after.steal - before.steal) / (after.total - before.total)))
