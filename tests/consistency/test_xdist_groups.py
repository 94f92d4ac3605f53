"""Under pytest-xdist the testbed's tests share one worker, in order (tests/conftest.py).

A pytest run with real xdist workers over a small tree laid out like tests/ and using the real
tests/conftest.py: every test of the testbed group (by directory, by file list) runs in one worker,
the end-to-end ones (integration/) after the others, the realtime files in one unit too, while the rest
spreads over the workers; a test outside the group that takes the testbed lock fails saying how to join.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

RECORD = """
import json, os, time
from pathlib import Path

def record(name):
    with open(os.environ["GROUP_LOG"], "a") as f:
        row = {"name": name, "worker": os.environ.get("PYTEST_XDIST_WORKER"), "t": time.time(), "nice": os.getpriority(os.PRIO_PROCESS, 0)}
        f.write(json.dumps(row) + "\\n")
    time.sleep(0.05)  # long enough that idle workers would take the next test if they could
"""

TREE = {
    "testbed_net/test_net.py": "from record import record\n" + "".join(f"def test_net{i}():\n    record('net{i}')\n" for i in range(4)),
    "integration/conftest.py": "import pytest\n@pytest.fixture(scope='session')\ndef testbed():\n    return 'the session testbed'\n",
    "integration/test_e2e.py": "from record import record\n"
    + "".join(f"def test_e2e{i}(testbed):\n    record('e2e{i}')\n" for i in range(3)),
    "bench/test_control_testbed_smoke.py": "from record import record\ndef test_smoke():\n    record('smoke')\n",
    "consistency/test_loadgen_vs_engine.py": "from record import record\n"
    + "".join(f"def test_rt{i}():\n    record('rt{i}')\n" for i in range(3)),
    "other/test_free.py": "from record import record\n" + "".join(f"def test_free{i}():\n    record('free{i}')\n" for i in range(12)),
    "testbed_net/test_wait.py": (  # another process holds the lock for 2 s: the wait is reported
        "import subprocess, time\nfrom inferslice.testbed import lock\nfrom record import record\n"
        "def test_wait(tmp_path):\n    path = tmp_path / 'lock'\n    path.touch()\n"
        "    holder = subprocess.Popen(['flock', str(path), 'sleep', '2'])\n"
        "    while subprocess.run(['flock', '-n', str(path), 'true']).returncode == 0:\n        time.sleep(0.05)\n"
        "    with lock.testbed_lock(path):\n        record('wait')\n    holder.wait()\n"
    ),
    "testbed_net/test_held.py": (  # as root the group holds the (session) testbed lock between its tests
        "import os, subprocess\nfrom record import record\n"
        "def test_held():\n    held = subprocess.run(['flock', '-n', os.environ['INFERSLICE_TEST_SESSION_LOCK'], 'true']).returncode != 0\n"
        "    assert held == (os.geteuid() == 0)\n    record('held')\n"
    ),
    "other/test_stray.py": (
        "from pathlib import Path\nfrom inferslice.testbed import lock\n"
        "def test_stray(tmp_path):\n    with lock.testbed_lock(tmp_path / 'lock'):\n        pass\n"
    ),
}
# Only xdist among the installed plugins: each worker starts in about a second instead of importing them all.
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "xdist"]
# Not our own worker's identity (PYTEST_XDIST_WORKER...) when this test runs under xdist itself.
ENV = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS" and not k.startswith("PYTEST_XDIST")}
ENV["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
GROUP = {"net0", "net1", "net2", "net3", "wait", "held", "e2e0", "e2e1", "e2e2", "smoke"}


def test_the_testbed_group_runs_in_one_worker_in_order(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy2(ROOT / "tests" / "conftest.py", tests / "conftest.py")
    (tests / "record.py").write_text(RECORD)
    for rel, text in TREE.items():
        (tests / rel).parent.mkdir(parents=True, exist_ok=True)
        (tests / rel).write_text(text)
    log = tmp_path / "log.jsonl"
    session_lock = tmp_path / "session.lock"  # not the machine's: this test must not wait for its testbed
    session_lock.touch()
    proc = subprocess.run(
        [*PYTEST, "-n", "3", "--dist", "loadgroup", "--rootdir", str(tmp_path),
         "-c", os.devnull, "--import-mode=importlib", str(tests)],
        cwd=tmp_path, env={**ENV, "GROUP_LOG": str(log), "PYTHONPATH": str(tests), "INFERSLICE_TEST_SESSION_LOCK": str(session_lock)},
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert "1 failed" in out and "test_stray" in out and "not in the xdist group 'testbed'" in out, out
    assert f"{len(GROUP) + 12 + 3} passed" in out, out
    assert re.search(r"testbed lock: [12] s waited in 1 acquisitions", out), out
    assert subprocess.run(["flock", "-n", str(session_lock), "true"]).returncode == 0  # released at the end
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    group = [r for r in rows if r["name"] in GROUP]
    assert {r["name"] for r in group} == GROUP
    assert len({r["worker"] for r in group}) == 1, group
    order = [r["name"] for r in sorted(group, key=lambda r: r["t"])]
    assert all(n.startswith("e2e") for n in order[-3:]), order  # the session testbed's tests last
    realtime = [r for r in rows if r["name"].startswith("rt")]
    assert len({r["worker"] for r in realtime}) == 1, realtime
    assert [r["name"] for r in sorted(realtime, key=lambda r: r["t"])] == ["rt0", "rt1", "rt2"]
    free_workers = {r["worker"] for r in rows if r["name"].startswith("free")}
    assert len(free_workers) >= 2, rows  # the rest is spread, not queued behind the group
    if os.geteuid() == 0:  # the group's worker runs at our priority, the others yield to it
        base = os.getpriority(os.PRIO_PROCESS, 0)
        assert {r["nice"] for r in group + realtime} == {base}, group + realtime
        others = [r for r in rows if r["worker"] not in (group[0]["worker"], realtime[0]["worker"])]
        assert others and {r["nice"] for r in others} == {min(base + 10, 19)}, others


def test_another_dist_mode_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    proc = subprocess.run(
        [*PYTEST, "-n", "2", "--dist", "load", "--collect-only",
         str(ROOT / "tests" / "consistency" / "test_xdist_groups.py")],
        cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode != 0 and "use --dist loadgroup" in proc.stdout + proc.stderr
