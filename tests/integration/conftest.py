"""A session-scoped testbed for integration tests: brought up once, torn down at the end.

Only one testbed can run on a machine (its addresses are fixed), so the fixture holds an exclusive
``flock`` on ``/tmp/inferslice-testbed.lock`` for the whole session: the same lock that
``flock /tmp/inferslice-testbed.lock <command>`` takes, so concurrent pytest runs and manual
testbed commands serialize instead of colliding. State lives in ``/run/inferslice-test``, apart
from a developer's ``/run/inferslice``.

Use: ``def test_x(testbed: Testbed) -> None`` (``testbed.registry``, ``testbed.state_dir``,
``testbed.topology``, ``testbed.client_netns``, ``testbed.log_tails()``); ``platform`` adds the
one ``Platform`` stack (``inferslice.service.platform``, as the demo uses it) around it for one test:
a 1 s scrape interval and alert holds scaled by ``HOLD_SCALE`` so that a 10 m ticket fires in seconds;
everything else is the production configuration.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from inferslice.common.registry import Registry
from inferslice.testbed.lock import testbed_lock
from inferslice.topology import Topology, load_topology

if TYPE_CHECKING:
    from inferslice.service.platform import Platform

STATE_DIR = Path("/run/inferslice-test")
SCRAPE_INTERVAL_S = 1.0  # the brief's "scrape interval 1 s": two scrapes bound the cap-follow check
HOLD_SCALE = 0.01  # 10 m -> 6 s, 1 m -> 1 s: the breach scenario fits in well under a minute
API_INTERVAL_S = 1.0  # one verdict per scrape
API_WINDOW_S = 8.0  # the API's default window: eight 1 s scrapes, enough for a P99
ROOT_REASON = "needs root: the testbed builds network namespaces, TUN devices and qdiscs"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason=ROOT_REASON)
needs_monitoring = pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("prometheus-alertmanager") is None,
    reason="needs the Debian prometheus and prometheus-alertmanager binaries",
)


@dataclass(frozen=True)
class Testbed:
    __test__ = False  # a fixture value, not a test class

    registry: Registry
    state_dir: Path

    @cached_property
    def topology(self) -> Topology:
        return load_topology(self.registry.topology_path)

    @property
    def client_netns(self) -> str:
        """The namespace load generators run in (their traffic crosses the tiers' client-edge caps)."""
        return self.registry.client_netns()

    def log_tails(self, n: int = 800) -> str:
        """The testbed's process logs (engine hosts, fronts, delay line), for failure messages."""
        from inferslice.testbed.net import procs

        parts = []
        for pf in procs.read_pidfiles(self.state_dir):
            try:
                text = procs.log_path(self.state_dir, pf.name).read_text(errors="replace")[-n:]
            except OSError:
                text = "<no log>"
            parts.append(f"--- {pf.name} (pid {pf.pid}):\n{text}")
        return "\n".join(parts)


@pytest.fixture(scope="session")
def testbed() -> Iterator[Testbed]:
    if os.geteuid() != 0:
        pytest.skip(ROOT_REASON)
    from inferslice.testbed.net import lifecycle

    with testbed_lock():  # waits for whoever holds the testbed now
        registry = lifecycle.up(None, STATE_DIR, services=True)
        try:
            yield Testbed(registry, STATE_DIR)
        finally:
            lifecycle.down(STATE_DIR)


@pytest.fixture
def platform(testbed: Testbed, tmp_path: Path) -> Iterator[Platform]:
    """Exporter, Prometheus (+ rules), Alertmanager and the API around the session's testbed, for one test."""
    from inferslice.service.platform import Platform, PlatformSettings

    settings = PlatformSettings(
        scrape_interval_s=SCRAPE_INTERVAL_S, hold_scale=HOLD_SCALE, api_interval_s=API_INTERVAL_S, api_window_s=API_WINDOW_S
    )
    plat = Platform(testbed.registry, testbed.topology, testbed.state_dir, tmp_path / "platform", settings)
    try:
        plat.start()
        yield plat
    finally:
        plat.stop()
