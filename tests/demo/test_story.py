"""The demo's story keeps what issue 18 item 6 asks of its remedies phase: the co-tenant stays, so
Premium can turn healthy only by the controller's move, and CI checks that the move was applied."""

from __future__ import annotations

from inferslice.cli.demo.story import DEFAULT_STORY, Phase, judge


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


def test_a_tail_verdict_is_neutral_in_a_phase_verdict_as_in_the_episodes() -> None:
    """After the move, a window may read the co-tenant's tail (compute at 0.25, under the episodes' bar):
    it counts for no regime; an unknown still counts against the phase."""
    remedies = _phase("remedies")

    def d(end: float, regime: str, conf: float) -> dict[str, object]:
        return {"window_end_s": end, "regime": regime, "confidence": conf}

    premium = [d(60.0 + k, "healthy", 0.98) for k in range(4)] + [d(64.0 + k, "compute_limited", 0.25) for k in range(5)]
    v = {x.tier: x for x in judge(remedies, {"premium": premium}, 50.0, 70.0)}["premium"]
    assert v.ok and v.windows == 4 and v.share == 1.0
    counted = {x.tier: x for x in judge(remedies, {"premium": premium}, 50.0, 70.0, neutral_below=0.0)}["premium"]
    assert not counted.ok  # read at face value the tails would outvote the healthy windows
    unknown = [d(60.0 + k, "healthy", 0.98) for k in range(4)] + [d(64.0 + k, "unknown", 0.0) for k in range(5)]
    assert not {x.tier: x for x in judge(remedies, {"premium": unknown}, 50.0, 70.0)}["premium"].ok
