"""Suite-wide ordering: the end-to-end tests run last.

They share one testbed for the whole session (tests/integration/conftest.py), torn down when the
session ends; anything that builds a testbed of its own (tests/testbed_net) must run before it is
up, since the testbed's addresses and root-namespace routes are fixed.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: "/tests/integration/" in str(item.path))
