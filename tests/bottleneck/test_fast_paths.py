"""The classifier's fast paths answer exactly as the expressions they stand in for, on every float.

``rounding.r4`` skips ``round``'s decimal conversion for whole numbers, ``rounding.unit_r4`` for a
fraction at 0 or from 1 up, ``ge`` answers ``a > b`` before computing its tolerance: each must give
the same float (bit for bit) or the same truth as the plain expression, or a diagnosis would change
with an optimisation. Written from the expressions, not from the code: ``round(x, 4)``,
``round(min(1.0, x), 4)`` and ``a >= b - 1e-9 * max(abs(a), abs(b))``.
"""

from __future__ import annotations

import math
import struct

from hypothesis import given
from hypothesis import strategies as st

from inferslice.bottleneck.attribution import ge
from inferslice.bottleneck.classify import _clamp_r4
from inferslice.bottleneck.rounding import r4, unit_r4

EDGES = st.sampled_from([0.0, -0.0, 1.0, 6.0, -1.0, 0.55, 1e300, -1e300, 5e-324, math.inf, -math.inf, math.nan, 0.00005, 0.00015])
FLOATS = st.floats(allow_nan=True, allow_infinity=True) | EDGES


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


@given(FLOATS)
def test_r4_is_round_to_four_digits_bit_for_bit(x: float) -> None:
    if math.isnan(x):
        assert math.isnan(r4(x))
    else:
        assert _bits(r4(x)) == _bits(round(x, 4))


@given(FLOATS, FLOATS)
def test_ge_answers_as_the_tolerant_comparison(a: float, b: float) -> None:
    assert ge(a, b) is (a >= b - 1e-9 * max(abs(a), abs(b)))


@given(st.lists(st.floats(allow_nan=False) | EDGES.filter(lambda x: not math.isnan(x))))
def test_a_fraction_rounds_as_the_plain_expression(parts: list[float]) -> None:
    # Judge.fractions and attribution.settle keep the largest of their ratios, rising from 0.0
    # (never -0.0), and round it so.
    x = 0.0
    for y in parts:
        if y > x:
            x = y
    assert _bits(unit_r4(x)) == _bits(round(min(1.0, x), 4))


@given(FLOATS)
def test_the_reported_confidence_is_the_clamped_rounded_one(conf: float) -> None:
    got, want = _clamp_r4(conf), round(min(1.0, max(0.0, conf)), 4)
    assert _bits(got) == _bits(want)
