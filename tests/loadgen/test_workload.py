from __future__ import annotations

import math

import numpy as np
import pytest

from inferslice.errors import ConfigError
from inferslice.testbed.loadgen import Workload, WorkloadSpec, arrival_offsets


def test_seeded_workload_is_deterministic_and_order_independent() -> None:
    a, b = Workload(seed=7), Workload(seed=7)
    late = b.request(300)  # building request 300 first must not change requests 0..299
    assert [a.request(i) for i in range(5)] == [b.request(i) for i in range(5)]
    assert a.request(300) == late
    assert Workload(seed=8).request(0) != a.request(0)


def test_lengths_match_the_sharegpt_fit() -> None:
    w = Workload(seed=0)
    lengths = np.array([w.lengths(i) for i in range(20000)])
    prompt, output = lengths[:, 0], lengths[:, 1]
    assert 200 <= prompt.mean() <= 230
    assert 180 <= output.mean() <= 200
    assert np.median(prompt) < prompt.mean()  # heavy right tail, like ShareGPT
    spec = WorkloadSpec()
    assert prompt.min() >= spec.min_tokens and prompt.max() <= spec.max_prompt_tokens
    assert output.min() >= spec.min_tokens and output.max() <= spec.max_output_tokens


def test_prompt_text_has_four_characters_per_token() -> None:
    r = Workload(seed=3).request(0)
    assert len(r.prompt) == 4 * r.prompt_tokens - 1
    assert len(r.prompt.split()) == r.prompt_tokens


def test_invalid_spec_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        WorkloadSpec(min_tokens=0)


def test_poisson_and_gamma_arrivals_have_the_configured_rate() -> None:
    rng = np.random.default_rng(1)
    poisson = arrival_offsets(rng, 5.0, 1.0, 20000)
    gaps = np.diff(poisson)
    assert abs(gaps.mean() - 0.2) < 0.01
    assert abs(gaps.std() / gaps.mean() - 1.0) < 0.05  # exponential: CV 1
    bursty = np.diff(arrival_offsets(rng, 5.0, 0.25, 20000))
    assert abs(bursty.mean() - 0.2) < 0.02
    assert bursty.std() / bursty.mean() > 1.7  # gamma shape 0.25: CV 2
    assert (arrival_offsets(rng, math.inf, 1.0, 4) == 0).all()
