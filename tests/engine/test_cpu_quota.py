"""A real engine's co-tenant as a cgroup CPU quota (engine/cpu_quota.py): the arithmetic everywhere,
the kernel's enforcement where this process may write a cgroup CPU controller (root)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inferslice.testbed.engine import cpu_quota


def test_quota_arithmetic() -> None:
    assert cpu_quota.quota_us(1.0, 2) is None  # share 1: no quota at all
    assert cpu_quota.quota_us(0.25, 2) == 50_000  # a quarter of two cores per 100 ms period
    assert cpu_quota.quota_us(0.001, 1) == cpu_quota.MIN_QUOTA_US
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError):
            cpu_quota.quota_us(bad, 2)


def test_controller_discovery_on_fake_trees(tmp_path: Path) -> None:
    v1, v2 = tmp_path / "cpu", tmp_path / "unified"
    v1.mkdir()
    v2.mkdir()
    with pytest.raises(cpu_quota.CgroupUnavailable):
        cpu_quota.find_controller(v1, v2, via=())
    (v2 / "cgroup.controllers").write_text("memory pids cpu\n")
    assert cpu_quota.find_controller(v1, v2, via=()).version == 2
    (v1 / "cpu.cfs_quota_us").write_text("-1\n")
    assert cpu_quota.find_controller(v1, v2, via=()).version == 1  # v1 first: the machines that have it


def test_controller_found_through_pid_1s_root_when_sys_hides_it(tmp_path: Path) -> None:
    # ``ip netns exec`` mounts the namespace's own sysfs on /sys: the cgroup mounts vanish from this
    # process's view, and the host's are still under /proc/1/root (here: a fake root).
    hidden_v1, hidden_v2 = Path("/no-such-sys/fs/cgroup/cpu"), Path("/no-such-sys/fs/cgroup")
    host = tmp_path / "init-root"
    (host / "no-such-sys" / "fs" / "cgroup" / "cpu").mkdir(parents=True)
    (host / "no-such-sys" / "fs" / "cgroup" / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    ctl = cpu_quota.find_controller(hidden_v1, hidden_v2, via=(tmp_path / "protected", host))
    assert ctl.version == 1 and ctl.root == host / "no-such-sys" / "fs" / "cgroup" / "cpu"
    with pytest.raises(cpu_quota.CgroupUnavailable, match="nor under"):
        cpu_quota.find_controller(hidden_v1, hidden_v2, via=(tmp_path / "empty",))


def test_v2_writes_cpu_max(tmp_path: Path) -> None:
    ctl = cpu_quota.Controller(2, tmp_path)
    group = ctl.group("p-x")
    group.mkdir()
    (group / "cgroup.procs").write_text("")
    cpu_quota.apply(ctl, "p-x", os.getpid(), 0.3, 2)
    assert (group / "cpu.max").read_text() == "60000 100000"
    cpu_quota.apply(ctl, "p-x", os.getpid(), 1.0, 2)
    assert (group / "cpu.max").read_text() == "max 100000"


def _writable_controller() -> cpu_quota.Controller | None:
    if os.geteuid() != 0:
        return None
    try:
        return cpu_quota.find_controller()
    except cpu_quota.CgroupUnavailable:
        return None


@pytest.mark.root
@pytest.mark.skipif(_writable_controller() is None, reason="needs root and a cgroup CPU controller")
def test_the_kernel_holds_a_busy_process_tree_to_its_quota() -> None:
    ctl = _writable_controller()
    assert ctl is not None
    # a parent and a child both spinning: the quota is the tree's, not one process's
    code = "import os, time\nos.fork()\nend = time.time() + 30\nwhile time.time() < end: pass\n"
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    name = f"test-{os.getpid()}"
    try:
        time.sleep(0.3)
        cpu_quota.apply(ctl, name, proc.pid, 0.2, 1.0)  # 0.2 of one core for the whole tree
        pids = cpu_quota.process_tree(proc.pid)
        assert len(pids) == 2

        def cpu_s() -> float:
            total = 0.0
            for p in pids:
                fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            return total

        c0, t0 = cpu_s(), time.monotonic()
        time.sleep(2.0)
        used = (cpu_s() - c0) / (time.monotonic() - t0)
        assert used == pytest.approx(0.2, abs=0.08)  # about a fifth of a core, whatever the machine's load
    finally:
        cpu_quota.release(ctl, name)
        os.killpg(proc.pid, 9)
        proc.wait()
    assert not ctl.group(name).exists()


@pytest.mark.root
@pytest.mark.skipif(_writable_controller() is None, reason="needs root and a cgroup CPU controller")
def test_an_engine_host_inside_a_network_namespace_finds_the_controller() -> None:
    # Where the engine hosts run: `ip netns exec` hides /sys/fs/cgroup behind the namespace's sysfs.
    # The test's own namespace, removed whatever happens.
    ns = f"t-cgq-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        code = "from inferslice.testbed.engine import cpu_quota as q; c = q.find_controller(); print(c.version, c.root)"
        out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        version, root = out.stdout.split()
        assert version in ("1", "2") and root.startswith("/")
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
