"""Suite-wide: the tests that share the machine's one testbed run in one process, in order.

The testbed's addresses and root-namespace routes are fixed, so one testbed at a time per machine,
guarded by the lock ``testbed/lock.py`` takes. tests/integration shares one testbed for the whole
session (tests/integration/conftest.py holds the lock until the session ends); anything that builds
a testbed of its own (tests/testbed_net, the control benchmark's smoke run, ...) must run before it
is up, since a second ``flock`` from the process that holds the first waits forever.

Under pytest-xdist (``make test`` runs ``-n 4 --dist loadgroup``) every such test is in the group
``testbed``: one worker runs them all, in the order below (the end-to-end tests last); every other
test is scheduled on its own. A test belongs to the group when its file lies under one of
``TESTBED_DIRS`` or is listed in ``TESTBED_FILES`` (by path: xdist's controller schedules by test id,
before any worker imports a test). A test outside the group that takes the testbed lock fails saying
how to join (docs/CONTRIBUTING.md, "Tests run in parallel"). The few tests elsewhere that compare
real-time measurements of two processes within a tight tolerance (``REALTIME_FILES``) form a second
unit, ``realtime``; as root, workers running either unit keep the base priority and the others are
niced, so CPU-bound tests yield to them.

The scheduler is this file's own (``pytest_xdist_make_scheduler``): xdist 3.8's loadgroup tags a
test by rewriting ``item._nodeid``, which pytest 9.2 no longer reads (its node id is ``item._id``), so
``xdist_group`` marks group nothing there. Groups by path need no marks and keep working either way;
an ``@<group>`` suffix xdist may add (an ``xdist_group`` mark, once that works again) is honoured.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from inferslice.testbed import lock as testbed_lock_module

TESTBED_GROUP = "testbed"
TESTS = Path(__file__).resolve().parent
TESTBED_DIRS = ("integration", "testbed_net")  # relative to tests/; every test below them is in the group
TESTBED_FILES = (  # tests elsewhere that build the fixed-address testbed (they take its lock)
    "bench/test_control_testbed_smoke.py",
    "rayserve/test_testbed_ray.py",
)
# Tests elsewhere that compare what two processes measured in real time within a tight tolerance (a
# client's TTFT against the engine's, a Prometheus rate against the embedded scraper's): one work unit
# (one worker, one at a time) at the base priority, like the testbed's. Under -n 4 on 2 cores they
# failed when they ran beside CPU-bound tests at the same priority.
REALTIME_GROUP = "realtime"
REALTIME_FILES = (
    "consistency/test_loadgen_vs_engine.py",
    "collectors/test_prometheus_parity.py",
    "loadgen/test_client.py",  # the client's TPOT within 1 ms of the server's schedule
)
# The testbed's tests measure latencies, rates and windows in real time on 2 shared cores: as root
# every xdist worker starts this much nicer and one that runs a test of either group returns to the
# base priority, so the CPU-bound tests of the other workers yield to it. (Not as another user: an
# unprivileged process cannot lower its niceness again; the testbed's tests need root anyway.)
WORKER_NICE = 10
_base_priority: list[int] = []


def group_of(rel: str) -> str | None:
    """The work unit a test file (relative to tests/) belongs to, None for a test scheduled on its own."""
    if in_testbed_group(rel):
        return TESTBED_GROUP
    return REALTIME_GROUP if rel in REALTIME_FILES else None


def in_testbed_group(rel: str) -> bool:
    """``rel``: a test file's path relative to tests/ (posix)."""
    return any(rel.startswith(f"{d}/") for d in TESTBED_DIRS) or rel in TESTBED_FILES


def _relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return ""


def _order(item: pytest.Item) -> int:
    """The testbed group last (in one process: it holds the machine's lock from its first test to the end),
    within it testbeds of their own first and the session testbed's end-to-end tests last; stable otherwise."""
    rel = _relative(Path(item.path))
    if not in_testbed_group(rel):
        return 0
    return 2 if rel.startswith("integration/") else 1


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") and os.geteuid() == 0:
        _base_priority.append(os.getpriority(os.PRIO_PROCESS, 0))
        os.nice(WORKER_NICE)
    dist = getattr(config.option, "dist", "no")
    if getattr(config.option, "numprocesses", None) and dist not in ("loadgroup", "no"):
        raise pytest.UsageError(
            f"--dist {dist} would spread the testbed's tests over several workers: use --dist loadgroup (the default in pyproject.toml)"
        )


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_order)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    rootpath = Path(config.rootpath)

    class TestbedGroupScheduling(LoadScopeScheduling):
        """Every test its own work unit, but each group's tests one unit (in collection order).

        LoadScopeScheduling hands out the largest unit first: the testbed group starts at once, on one worker.
        """

        def _split_scope(self, nodeid: str) -> str:
            if nodeid.rfind("@") > nodeid.rfind("]"):
                return nodeid.split("@")[-1]
            return group_of(_relative(rootpath / nodeid.split("::", 1)[0])) or nodeid

    return TestbedGroupScheduling(config, log)


# -- the group holds the machine's testbed lock from its first test to the end of the session -----------
# Taken once (as root: the group's tests need root), not test by test: on a shared machine another run
# waiting for the testbed would otherwise slip in between two of the group's tests, and the session
# testbed of tests/integration stays up (locked) until the session ends anyway. Nested testbed_lock()
# calls of this process are then no-ops (children see an ancestor holding it: testbed/lock.py).
# INFERSLICE_TEST_SESSION_LOCK names another file (tests/consistency/test_xdist_groups.py).
# What the group waited for the lock is recorded (another run held the testbed), so that the run's
# durations can be read without it. A test outside the group that takes the lock is an error.
LOCK_WAIT_PROPERTY = "testbed_lock_wait_s"
_lock_waits: list[float] = []
_session_lock: list[IO[str]] = []
_current: list[pytest.Item] = []
_original_lock = testbed_lock_module.testbed_lock


def _session_lock_path() -> Path:
    return Path(os.environ.get("INFERSLICE_TEST_SESSION_LOCK", str(testbed_lock_module.TESTBED_LOCK)))


def _record_wait(started: float) -> None:
    waited_s = time.monotonic() - started
    if _current and waited_s >= 1.0:  # reported with the test (JUnit property) and summed at the end
        _current[-1].user_properties.append((LOCK_WAIT_PROPERTY, round(waited_s, 1)))


def _hold_session_lock() -> None:
    path = _session_lock_path()
    if _session_lock or os.geteuid() != 0 or testbed_lock_module.lock_held_by_ancestor(path):
        return
    fh = path.open("a")
    started = time.monotonic()
    fcntl.flock(fh, fcntl.LOCK_EX)
    _record_wait(started)
    _session_lock.append(fh)


def pytest_unconfigure(config: pytest.Config) -> None:
    while _session_lock:  # after every fixture's teardown: the session testbed is down
        fh = _session_lock.pop()
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "teardown":  # its properties are all the test's: setup's and call's
        _lock_waits.extend(float(str(v)) for k, v in report.user_properties if k == LOCK_WAIT_PROPERTY)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _lock_waits:
        terminalreporter.write_line(
            f"testbed lock: {sum(_lock_waits):.0f} s waited in {len(_lock_waits)} acquisitions (another run held the machine's testbed)"
        )


@contextlib.contextmanager
def _guarded_lock(path: Path = testbed_lock_module.TESTBED_LOCK) -> Iterator[None]:
    if _current and not in_testbed_group(_relative(Path(_current[-1].path))):
        pytest.fail(
            f"{_current[-1].nodeid} takes the testbed lock but is not in the xdist group {TESTBED_GROUP!r}: put it under "
            f"tests/{{{','.join(TESTBED_DIRS)}}}/ or add its file to TESTBED_FILES in tests/conftest.py (docs/CONTRIBUTING.md)",
            pytrace=False,
        )
    if _session_lock and Path(path) in (_session_lock_path(), testbed_lock_module.TESTBED_LOCK):
        yield  # this process holds it for the session already
        return
    started = time.monotonic()
    with _original_lock(path):
        _record_wait(started)
        yield


# Before any test module or conftest below imports it by name (`from inferslice.testbed.lock import testbed_lock`).
testbed_lock_module.testbed_lock = _guarded_lock  # type: ignore[assignment]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if _base_priority and group_of(_relative(Path(item.path))):
        os.setpriority(os.PRIO_PROCESS, 0, _base_priority.pop())  # root may lower a niceness; children inherit it
    _current.append(item)
    if in_testbed_group(_relative(Path(item.path))):
        _hold_session_lock()
    try:
        return (yield)
    finally:
        _current.pop()


UNPRIVILEGED_UID = 65534  # nobody: what a non-root exporter or sidecar runs as


@pytest.fixture
def unprivileged_argv() -> list[str]:
    """A `setpriv` prefix running a command as uid/gid 65534 with every capability dropped.

    The command is this venv's Python importing inferslice from this checkout, so both must be
    reachable for that user: a clone under a 0700 directory (root's home, `mktemp -d`) is not.
    A probe run as that user tells; the skip names the path, rather than the test failing on an
    ImportError that says nothing about the code under test.
    """
    import shutil
    import subprocess
    import sys

    if os.geteuid() != 0:
        pytest.skip("switching to an unprivileged user needs root")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    uid = str(UNPRIVILEGED_UID)
    argv = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]
    root = str(TESTS.parent)
    probe = f"import os, sys; sys.exit(0 if os.access({root!r}, os.R_OK | os.X_OK) else 3)"
    try:
        got = subprocess.run([*argv, sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, check=False)
    except OSError as err:
        pytest.skip(f"uid {uid} cannot run {sys.executable}: {err}")
    if got.returncode == 3:
        pytest.skip(f"uid {uid} cannot reach the checkout {root}: a directory above it is not searchable by others (chmod o+x it)")
    if got.returncode != 0:
        pytest.skip(f"uid {uid} cannot run {sys.executable} (exit {got.returncode}): {got.stderr.strip()[-200:]}")
    return argv
