"""The scrape's pause of the cyclic collector: overlapping scrapes, and a collector someone else turned off."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from inferslice.exporters.http import cyclic_gc_paused


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_overlapping_scrapes_turn_the_collector_back_on_when_the_last_ends() -> None:
    gc.enable()
    first, second = cyclic_gc_paused(), cyclic_gc_paused()
    first.__enter__()
    second.__enter__()
    assert not gc.isenabled()
    first.__exit__(None, None, None)  # the first to start ends first
    assert not gc.isenabled()
    second.__exit__(None, None, None)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off_and_an_error_still_restores() -> None:
    gc.disable()
    with cyclic_gc_paused():
        pass
    assert not gc.isenabled()
    gc.enable()
    with pytest.raises(RuntimeError), cyclic_gc_paused():
        raise RuntimeError("scrape failed")
    assert gc.isenabled()
