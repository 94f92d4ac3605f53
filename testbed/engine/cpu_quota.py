"""A real CPU engine's co-tenant: its process tree's CPU bandwidth, cut with a cgroup quota.

The emulator models a GPU co-tenant as a reduced effective GPU share. A real vLLM on CPU has no GPU
to share; its analogue is a CPU quota: the replica's processes (the API server and its engine-core
child) get ``share`` of the CPU time they could use (``cpus`` cores at share 1), as a co-tenant in the
same cgroup hierarchy would leave them. Both cgroup versions:

- v1 (this machine): ``/sys/fs/cgroup/cpu/<group>/cpu.cfs_quota_us`` over ``cpu.cfs_period_us``
  (-1: unlimited), processes in ``cgroup.procs``;
- v2 (with the cpu controller enabled in the parent's ``cgroup.subtree_control``):
  ``/sys/fs/cgroup/<group>/cpu.max`` = ``"<quota> <period>"`` (``max``: unlimited).

Every process of the tree is moved in at each change (a child forked before it was moved would
otherwise escape), and the group is removed (processes back to the root) at ``release``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from inferslice.errors import PermanentError

PERIOD_US = 100_000  # the kernel's default CFS period
MIN_QUOTA_US = 1_000  # the kernel refuses quotas under 1 ms
V1_ROOT = Path("/sys/fs/cgroup/cpu")
V2_ROOT = Path("/sys/fs/cgroup")
GROUP_PREFIX = "inferslice-"


def host_views() -> tuple[Path, ...]:
    """Where else the host's /sys may be seen from. Inside ``ip netns exec`` /sys is a fresh sysfs (the
    namespace's own), which hides the host's cgroup mounts; the parent that launched the engine host
    (in the host's mount namespace) still shows them through its root, and so may PID 1 where it is
    not protected (a container's init often is). The PIDs are the same: a network namespace is not
    a PID namespace."""
    return (Path(f"/proc/{os.getppid()}/root"), Path("/proc/1/root"))


class CgroupUnavailable(PermanentError):
    """No cgroup CPU controller this process may write."""


@dataclass(frozen=True)
class Controller:
    version: int  # 1 or 2
    root: Path

    def group(self, name: str) -> Path:
        return self.root / f"{GROUP_PREFIX}{name}"


def find_controller(v1_root: Path = V1_ROOT, v2_root: Path = V2_ROOT, via: tuple[Path, ...] | None = None) -> Controller:
    """The v1 cpu controller where mounted, else cgroup v2 with cpu in the root's controllers; each
    looked for as this process sees /sys, then through each of ``via`` (default ``host_views()``)."""
    views = host_views() if via is None else via
    roots = [(v1_root, v2_root)]
    roots += [(v / v1_root.relative_to(v1_root.anchor), v / v2_root.relative_to(v2_root.anchor)) for v in views]
    for v1, _ in roots:
        try:
            if (v1 / "cpu.cfs_quota_us").exists():
                return Controller(1, v1)
        except OSError:
            continue  # a root this process may not walk (PermissionError on a protected /proc/N/root)
    for _, v2 in roots:
        try:
            controllers = (v2 / "cgroup.controllers").read_text().split()
        except OSError:
            continue
        if "cpu" in controllers:
            return Controller(2, v2)
    raise CgroupUnavailable(
        f"no cgroup CPU controller: neither {v1_root}/cpu.cfs_quota_us nor cpu in {v2_root}/cgroup.controllers"
        + (f" (nor under {', '.join(map(str, views))})" if views else "")
    )


def process_tree(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """``pid`` and every descendant (from /proc/<pid>/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in (proc / str(p) / "task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue
    return out


def quota_us(share: float, cpus: float, period_us: int = PERIOD_US) -> int | None:
    """The quota for ``share`` of ``cpus`` cores (None: unlimited at share 1)."""
    if not 0 < share <= 1:
        raise ValueError(f"a share is in (0, 1], got {share}")
    if share >= 1:
        return None
    return max(MIN_QUOTA_US, int(share * cpus * period_us))


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as err:
        raise CgroupUnavailable(f"cannot write {path}: {err.strerror or err}") from None


def apply(ctl: Controller, name: str, pid: int, share: float, cpus: float, period_us: int = PERIOD_US) -> int | None:
    """Put ``pid``'s process tree in group ``name`` at ``share`` of ``cpus`` cores; returns the quota (None: unlimited)."""
    group = ctl.group(name)
    try:
        group.mkdir(exist_ok=True)
    except OSError as err:
        raise CgroupUnavailable(f"cannot create {group}: {err.strerror or err}") from None
    quota = quota_us(share, cpus, period_us)
    if ctl.version == 1:
        _write(group / "cpu.cfs_period_us", str(period_us))
        _write(group / "cpu.cfs_quota_us", str(-1 if quota is None else quota))
    else:
        _write(group / "cpu.max", f"{'max' if quota is None else quota} {period_us}")
    for p in process_tree(pid):
        try:
            (group / "cgroup.procs").write_text(str(p))
        except OSError:
            continue  # a process that exited meanwhile
    return quota


def release(ctl: Controller, name: str) -> None:
    """Move the group's processes back to the root and remove the group (no-op when it is gone)."""
    group = ctl.group(name)
    if not group.exists():
        return
    try:
        pids = (group / "cgroup.procs").read_text().split()
    except OSError:
        pids = []
    for p in pids:
        try:
            (ctl.root / "cgroup.procs").write_text(p)
        except OSError:
            continue
    try:
        os.rmdir(group)
    except OSError:
        pass
