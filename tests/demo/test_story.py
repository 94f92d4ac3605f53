"""The demo's story keeps what issue 18 item 6 asks of its remedies phase: the co-tenant stays, so
Premium can turn healthy only by the controller's move, and CI checks that the move was applied."""

from __future__ import annotations

from inferslice.cli.demo.story import DEFAULT_STORY, Phase


def _phase(name: str) -> Phase:
    return next(p for p in DEFAULT_STORY.phases if p.name == name)


def test_the_co_tenant_stays_through_the_remedies_and_only_a_move_can_cure_premium() -> None:
    before, remedies = _phase("three regimes"), _phase("remedies")
    assert before.loads["premium"].gpu_share < 0.9 and before.expect["premium"] == "compute_limited"
    # the same co-tenant through the remedies phase: it does not leave by itself
    assert remedies.loads["premium"].gpu_share == before.loads["premium"].gpu_share
    assert remedies.control == "auto"
    assert remedies.expect["premium"] == "healthy"
    assert remedies.expect_actions["premium"] == "relocate"
    # the other two remedies in the same phase: Standard's cap is the controller's, Free stays at its ceiling
    assert remedies.loads["standard"].keep_cap and remedies.expect_actions["standard"] == "set_cap"
    assert remedies.expect["free"] == "queue_limited"
