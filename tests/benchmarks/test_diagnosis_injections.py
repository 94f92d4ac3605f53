"""Choosing the diagnosis benchmark's injections (a real engine's run injects on its tier only)."""

from __future__ import annotations

import pytest

from inferslice.bench.diagnosis import DEFAULT_INJECTIONS, select_injections
from inferslice.errors import PermanentError


def test_all_three_by_default() -> None:
    assert select_injections() == DEFAULT_INJECTIONS


def test_one_tier_with_its_own_client_count() -> None:
    [inj] = select_injections(["standard"], {"standard": 5})
    assert (inj.tier, inj.expected, inj.concurrency, inj.cap_bps) == ("standard", "network_limited", 5, 0.5e6)


def test_the_other_tiers_keep_their_clients() -> None:
    chosen = select_injections(None, {"free": 2})
    assert [i.concurrency for i in chosen] == [2, 10, 8]


@pytest.mark.parametrize(("tiers", "clients"), [(["gold"], {}), (None, {"gold": 3}), (["free"], {"free": 0})])
def test_unknown_tiers_and_empty_loads_are_refused(tiers: list[str] | None, clients: dict[str, int]) -> None:
    with pytest.raises(PermanentError):
        select_injections(tiers, clients)
