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
how to join (docs/CONTRIBUTING.md, "Tests run in parallel").

The scheduler is this file's own (``pytest_xdist_make_scheduler``): xdist 3.8's loadgroup tags a
test by rewriting ``item._nodeid``, which pytest 9.2 no longer reads (its node id is ``item._id``), so
``xdist_group`` marks group nothing there. Groups by path need no marks and keep working either way;
an ``@<group>`` suffix xdist may add (an ``xdist_group`` mark, once that works again) is honoured.
"""

from __future__ import annotations

import contextlib
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
        """Every test its own work unit, but the testbed group's tests one unit (in collection order).

        LoadScopeScheduling hands out the largest unit first: the group starts at once, on one worker.
        """

        def _split_scope(self, nodeid: str) -> str:
            if nodeid.rfind("@") > nodeid.rfind("]"):
                return nodeid.split("@")[-1]
            path = nodeid.split("::", 1)[0]
            return TESTBED_GROUP if in_testbed_group(_relative(rootpath / path)) else nodeid

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
    _current.append(item)
    try:
        return (yield)
    finally:
        _current.pop()
