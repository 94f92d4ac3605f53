"""``kill -9`` of the Platform leaves no orphan: the Platform (as ``inferslice demo`` builds it, with
Prometheus, Alertmanager, the API and the controller) runs in a real parent process, which is killed
with SIGKILL; every child's PID must be gone (a zombie awaiting its reaper counts as gone). No
testbed is needed (the registry names an exporter nobody serves, as in test_platform.py)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("prometheus-alertmanager") is None or not sys.platform.startswith("linux"),
    reason="needs Linux and the Debian prometheus and prometheus-alertmanager binaries",
)

PARENT = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from inferslice.cli.demo import demo_platform
    from inferslice.common.ports import free_port
    from inferslice.common.registry import Registry
    from inferslice.topology import default_topology_path, load_topology

    work = Path(sys.argv[1])
    (work / "state").mkdir()
    reg = Registry(topology_path=str(default_topology_path()), state_dir=str(work / "state"),
                   services={"exporter": f"http://127.0.0.1:{free_port()}"})
    plat = demo_platform(load_topology(), reg, work / "out", work / "state")
    plat.start()
    pids = {p.name: p.pid for p in plat.procs}
    proc = getattr(plat.controller, "proc", None)  # co-located with the API (service/controller/process.py): no process of its own
    if proc is not None:
        pids["controller"] = proc.pid
    print(json.dumps(pids), flush=True)
    time.sleep(300)
    """
)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def test_no_child_outlives_a_platform_killed_with_sigkill(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    pids: dict[str, int] = {}
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line, "the platform did not start"
        pids = json.loads(line)
        assert {"prometheus", "alertmanager", "api"} <= set(pids)  # the controller runs inside the API process
        assert all(_alive(p) for p in pids.values())
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 20.0  # a bound on the wait (children shut down on SIGTERM), not a speed claim
        while any(_alive(p) for p in pids.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [name for name, p in pids.items() if _alive(p)], "orphaned after kill -9 of the platform"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)
        for p in pids.values():  # clean up by PID whatever the verdict
            if _alive(p):
                subprocess.run(["kill", "-9", str(p)], check=False)
