"""Open loop at a rate that changes over time (``rate_schedule``): the shape, the thinning, the bounds."""

from __future__ import annotations

import time

import numpy as np
import pytest

from inferslice.errors import ConfigError
from inferslice.testbed.loadgen import LoadConfig, WorkloadSpec, arrival_offsets, run_load
from inferslice.testbed.loadgen.runner import rate_at, thin

from .conftest import ServerBehaviour

SHORT = WorkloadSpec(output_mu=2.0, output_sigma=0.3, max_output_tokens=12, prompt_mu=3.0)


def test_rate_is_linear_between_points_and_held_outside() -> None:
    sched = ((10.0, 1.0), (20.0, 3.0), (20.0, 0.0), (30.0, 0.0))
    assert rate_at(sched, 0.0) == 1.0
    assert rate_at(sched, 15.0) == pytest.approx(2.0)
    assert rate_at(sched, 25.0) == 0.0  # the step down at 20 s holds
    assert rate_at(sched, 99.0) == 0.0


def test_thinning_keeps_the_share_the_schedule_asks_for() -> None:
    rng = np.random.default_rng(3)
    raw = arrival_offsets(rng, 10.0, 1.0, 4000)  # ~400 s at the peak
    kept = thin(rng, raw, ((0.0, 2.5), (200.0, 2.5), (200.0, 10.0)), 10.0)
    first, second = np.sum(kept < 200.0), np.sum(kept >= 200.0)
    # 2.5 req/s then 10 req/s: ~500 then ~all of the peak's arrivals after 200 s
    assert 400 < first < 600
    assert second == np.sum(raw >= 200.0)


async def test_no_request_while_the_schedule_is_at_zero(sse_server: tuple[str, ServerBehaviour]) -> None:
    url, b = sse_server
    b.ttft_s, b.itl_s = 0.005, 0.001
    cfg = LoadConfig(
        url=url,
        model="tiny",
        request_rate_rps=60.0,
        rate_schedule=((0.0, 0.0), (0.6, 0.0), (0.6, 60.0)),
        duration_s=1.2,
        seed=2,
        workload=SHORT,
    )
    before = time.time()
    result = await run_load(cfg)
    starts = sorted(r.start_s for r in result.records)
    assert len(starts) >= 10  # ~36 expected in the last 0.6 s
    assert starts[0] - before >= 0.55  # nothing sent in the first 0.6 s of the run


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rate_schedule": ((0.0, 1.0),)},  # no peak rate
        {"request_rate_rps": 2.0, "rate_schedule": ((0.0, 3.0),)},  # above the peak
        {"request_rate_rps": 2.0, "rate_schedule": ((5.0, 1.0), (1.0, 1.0))},  # time going back
        {"request_rate_rps": 2.0, "rate_schedule": ((0.0, 0.0),)},  # never sends
    ],
)
def test_bad_schedules_are_config_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        LoadConfig(url="http://127.0.0.1:1", model="m", duration_s=1.0, **kwargs)  # type: ignore[arg-type]
