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
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    """Testbeds of their own first, the session testbed's end-to-end tests last (stable otherwise)."""
    return 1 if _relative(Path(item.path)).startswith("integration/") else 0


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


# -- a test outside the group that takes the testbed lock is an error, not a silent serialisation ------
_current: list[pytest.Item] = []
_original_lock = testbed_lock_module.testbed_lock


@contextlib.contextmanager
def _guarded_lock(path: Path = testbed_lock_module.TESTBED_LOCK) -> Iterator[None]:
    if _current and not in_testbed_group(_relative(Path(_current[-1].path))):
        pytest.fail(
            f"{_current[-1].nodeid} takes the testbed lock but is not in the xdist group {TESTBED_GROUP!r}: put it under "
            f"tests/{{{','.join(TESTBED_DIRS)}}}/ or add its file to TESTBED_FILES in tests/conftest.py (docs/CONTRIBUTING.md)",
            pytrace=False,
        )
    with _original_lock(path):
        yield


# Before any test module or conftest below imports it by name (`from inferslice.testbed.lock import testbed_lock`).
testbed_lock_module.testbed_lock = _guarded_lock  # type: ignore[assignment]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if _base_priority and group_of(_relative(Path(item.path))):
        os.setpriority(os.PRIO_PROCESS, 0, _base_priority.pop())  # root may lower a niceness; children inherit it
    _current.append(item)
    try:
        return (yield)
    finally:
        _current.pop()
