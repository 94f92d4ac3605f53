"""Suite-wide: the tests that share the machine's one testbed run in one process, in order.

The testbed's addresses and root-namespace routes are fixed, so one testbed at a time per machine,
guarded by the lock ``testbed/lock.py`` takes. tests/integration shares one testbed for the whole
session (tests/integration/conftest.py holds the lock until the session ends); anything that builds
a testbed of its own (tests/testbed_net, the control benchmark's smoke run, ...) must run before it
is up, since a second ``flock`` from the process that holds the first waits forever.

Under pytest-xdist (``make test`` runs ``-n 4 --dist loadgroup``) every such test is put in the
xdist group ``testbed``: one worker runs them all, in the order below (the end-to-end tests last);
every other test is scheduled on its own. A test belongs to the group when it lies under one of
``TESTBED_DIRS``, is listed in ``TESTBED_FILES``, requests the ``testbed`` fixture, or carries
``@pytest.mark.testbed``. A test outside the group that takes the testbed lock fails with a message
saying how to join (docs/CONTRIBUTING.md, "Tests run in parallel").
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from inferslice.testbed import lock as testbed_lock_module

TESTBED_GROUP = "testbed"
TESTS = Path(__file__).resolve().parent
TESTBED_DIRS = ("integration", "testbed_net")  # relative to tests/; every test below them is in the group
TESTBED_FILES = (  # tests elsewhere that build the fixed-address testbed (they take its lock)
    "bench/test_control_testbed_smoke.py",
    "rayserve/test_testbed_ray.py",
)
TESTBED_MARKER = "testbed"
TESTBED_FIXTURES = ("testbed",)  # tests/integration/conftest.py's session testbed (and `platform`, which needs it)


def _relative(item: pytest.Item) -> str:
    try:
        return Path(item.path).resolve().relative_to(TESTS).as_posix()
    except ValueError:
        return ""


def in_testbed_group(item: pytest.Item) -> bool:
    rel = _relative(item)
    return (
        any(rel.startswith(f"{d}/") for d in TESTBED_DIRS)
        or rel in TESTBED_FILES
        or item.get_closest_marker(TESTBED_MARKER) is not None
        or any(f in getattr(item, "fixturenames", ()) for f in TESTBED_FIXTURES)
    )


def _order(item: pytest.Item) -> int:
    """Within the group: testbeds of their own first, the session testbed's end-to-end tests last."""
    return 1 if _relative(item).startswith("integration/") else 0


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{TESTBED_MARKER}: uses the machine's one fixed-address testbed (run in one xdist worker)")
    dist = getattr(config.option, "dist", "no")
    if getattr(config.option, "numprocesses", None) and dist not in ("loadgroup", "no"):
        raise pytest.UsageError(
            f"--dist {dist} would spread the testbed's tests over several workers: use --dist loadgroup (the default in pyproject.toml)"
        )


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group marks (its own modifyitems hook)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_order)  # stable: collection order otherwise
    for item in items:
        if in_testbed_group(item):
            item.add_marker(pytest.mark.xdist_group(TESTBED_GROUP))


# -- a test outside the group that takes the testbed lock is an error, not a silent serialisation ------
_current: list[pytest.Item] = []
_original_lock = testbed_lock_module.testbed_lock


@contextlib.contextmanager
def _guarded_lock(path: Path = testbed_lock_module.TESTBED_LOCK) -> Iterator[None]:
    if _current and not in_testbed_group(_current[-1]):
        pytest.fail(
            f"{_current[-1].nodeid} takes the testbed lock but is not in the xdist group {TESTBED_GROUP!r}: put it under "
            f"tests/{{{','.join(TESTBED_DIRS)}}}/, add its file to TESTBED_FILES in tests/conftest.py or mark it "
            f"@pytest.mark.{TESTBED_MARKER} (docs/CONTRIBUTING.md)",
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
