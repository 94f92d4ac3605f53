"""Prometheus's ``rate`` and ``histogram_quantile``, reimplemented so the embedded source needs no Prometheus.

Both follow Prometheus 2.42 (the Debian build we compare against in the tests):

- ``extrapolated_rate``: promql/functions.go ``extrapolatedRate``. The range is closed ``[t - W, t]``
  (Prometheus 3 made it left-open; at our scrape intervals the difference is one sample at most).
  A decrease between two samples is a counter reset: the value before the reset is added back.
  The result is extrapolated towards the window edges when the first/last sample lie within 1.1
  average sample intervals of them, else by half an interval, and never below the counter's zero.
- ``bucket_quantile``: promql/quantile.go ``bucketQuantile``: buckets sorted by upper bound, equal
  bounds merged, counts forced monotonic, linear interpolation inside the bucket holding the rank
  (the lowest bucket interpolates from 0 unless its bound is <= 0), and a rank in the ``+Inf`` bucket
  returns the highest finite bound.

Values Prometheus itself returns as NaN stay NaN here; ``finite_or_none`` is where they become
``None`` for a snapshot.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Sample = tuple[float, float]  # (unix seconds, value)


def extrapolated_rate(
    samples: Sequence[Sample], range_start_s: float, range_end_s: float, *, is_counter: bool = True, is_rate: bool = True
) -> float | None:
    """``rate`` (``is_rate``) or ``increase`` over the samples that fell in ``[range_start_s, range_end_s]``.

    ``None`` with fewer than two samples, as Prometheus drops such a series from the result.
    """
    if len(samples) < 2:
        return None
    first_t, first_v = samples[0]
    last_t, last_v = samples[-1]
    result = last_v - first_v
    if is_counter:
        prev = first_v
        for _, v in samples[1:]:
            if v < prev:
                result += prev
            prev = v
    duration_to_start = first_t - range_start_s
    duration_to_end = range_end_s - last_t
    sampled_interval = last_t - first_t
    if sampled_interval <= 0:
        return None
    average_between = sampled_interval / (len(samples) - 1)
    if is_counter and result > 0 and first_v >= 0:
        # A counter cannot go below zero: do not extrapolate past the point where it would.
        duration_to_zero = sampled_interval * (first_v / result)
        duration_to_start = min(duration_to_start, duration_to_zero)
    threshold = average_between * 1.1
    extrapolate_to = sampled_interval
    extrapolate_to += duration_to_start if duration_to_start < threshold else average_between / 2
    extrapolate_to += duration_to_end if duration_to_end < threshold else average_between / 2
    factor = extrapolate_to / sampled_interval
    if is_rate:
        factor /= range_end_s - range_start_s
    return result * factor


def parse_le(value: str) -> float | None:
    """A bucket's ``le`` label as a float (``+Inf`` included); ``None`` when it is not a number."""
    try:
        return float(value)
    except ValueError:
        return None


def bucket_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """Prometheus's ``histogram_quantile`` over ``(upper_bound, cumulative_count)`` pairs."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    ordered = sorted(buckets, key=lambda b: b[0])
    if not ordered or not math.isinf(ordered[-1][0]) or ordered[-1][0] < 0:
        return math.nan
    # Equal bounds (e.g. "1" and "1.0" from two exporters) are one bucket.
    merged: list[list[float]] = []
    for bound, count in ordered:
        if merged and merged[-1][0] == bound:
            merged[-1][1] += count
        else:
            merged.append([bound, count])
    # Buckets scraped at slightly different moments can be non-monotonic; Prometheus flattens them.
    highest = -math.inf
    for b in merged:
        if b[1] > highest:
            highest = b[1]
        elif b[1] < highest:
            b[1] = highest
    if len(merged) < 2:
        return math.nan
    observations = merged[-1][1]
    if observations == 0 or math.isnan(observations):
        return math.nan
    rank = q * observations
    # First bucket (the +Inf one excluded) whose cumulative count reaches the rank.
    idx = len(merged) - 1
    for i in range(len(merged) - 1):
        if merged[i][1] >= rank:
            idx = i
            break
    if idx == len(merged) - 1:
        return merged[-2][0]
    if idx == 0 and merged[0][0] <= 0:
        return merged[0][0]
    bucket_start = 0.0
    bucket_end = merged[idx][0]
    count = merged[idx][1]
    if idx > 0:
        bucket_start = merged[idx - 1][0]
        count -= merged[idx - 1][1]
        rank -= merged[idx - 1][1]
    if count == 0:
        return math.nan  # q == 0 over an empty lowest bucket: Go's 0/0
    return bucket_start + (bucket_end - bucket_start) * (rank / count)


def finite_or_none(value: float | None) -> float | None:
    """NaN (no observations, 0/0) and infinities are 'unknown' in a snapshot, never a number."""
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return value

