"""``inferslice testbed move`` against a real tier front and engine hosts on loopback: progress per
phase, the final placement, exit codes, and the same id watching the same move."""

from __future__ import annotations

import asyncio

import pytest

from inferslice.cli import main
from inferslice.cli.testbed_move import parse_destination
from inferslice.common.registry import FrontEntry, Registry, write_registry
from inferslice.errors import InputError

from .test_front import Bed, bed, wait_for  # noqa: F401 - bed is the fixture


def _registry(b: Bed) -> None:
    ep = b.plan.front("standard")
    write_registry(
        Registry(topology_path="t.yaml", state_dir=str(b.state_dir), fronts=(FrontEntry("standard", ep.url, ep.url),)), b.state_dir
    )


def test_destination_parsing() -> None:
    assert parse_destination("dublin") == ("dublin", 0) and parse_destination("dublin/gpu1") == ("dublin", 1)
    with pytest.raises(InputError, match="--to"):
        parse_destination("dublin/1")


async def test_move_prints_each_phase_and_the_final_placement(bed: Bed, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    front = await bed.front("standard", fixed_replicas=1)
    try:
        await wait_for(lambda: front.state()["replicas"] and front.state()["replicas"][0]["state"] == "ready")
        _registry(bed)
        argv = [
            "testbed",
            "move",
            "standard",
            "--replica",
            "standard-0",
            "--to",
            "dublin/gpu1",
            "--id",
            "op-1",
            "--state-dir",
            str(bed.state_dir),
        ]
        rc = await asyncio.to_thread(main, argv)
        out = capsys.readouterr().out
        assert rc == 0, out
        assert "move op-1: standard-0 bristol/gpu0 -> dublin/gpu1" in out
        phases = [line.split()[2] for line in out.splitlines() if line.startswith("  ") and " s  " in line]
        assert phases[0] == "starting" and phases[-1] == "done"
        assert "standard-0-dublin" in out and "dublin/gpu1  ready" in out  # the placement at the end
        # the same id again: the same move (already done), not a second one
        rc = await asyncio.to_thread(main, argv)
        assert rc == 0 and "done" in capsys.readouterr().out and list(front.moves) == ["op-1"]
        # an unknown replica is refused before anything is asked of the front
        bad = ["testbed", "move", "standard", "--replica", "standard-9", "--to", "london", "--state-dir", str(bed.state_dir)]
        assert await asyncio.to_thread(main, bad) != 0
        assert "standard-9" in capsys.readouterr().err
    finally:
        await front.stop(release_replicas=True)
