"""The testbed's namespaces may pick CUBIC even on a machine that boots with another default."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferslice.testbed.net.kernel import NetworkBuildError, allow_congestion_control


def test_appends_a_missing_algorithm(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    allowed.write_text("reno bbr\n")
    allow_congestion_control("cubic", allowed)
    assert allowed.read_text().split() == ["reno", "bbr", "cubic"]


def test_leaves_a_present_algorithm_alone(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    allowed.write_text("reno cubic bbr\n")
    allow_congestion_control("cubic", allowed)
    assert allowed.read_text() == "reno cubic bbr\n"


def test_unwritable_list_is_a_build_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    allowed = tmp_path / "allowed"
    allowed.write_text("reno bbr\n")

    def denied(self: Path, *args: object, **kwargs: object) -> int:
        raise PermissionError("denied")

    monkeypatch.setattr(Path, "write_text", denied)
    with pytest.raises(NetworkBuildError, match="cubic"):
        allow_congestion_control("cubic", allowed)
