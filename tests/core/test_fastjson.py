"""The hot-path JSON (common/fastjson.py) keeps the standard library's output contract.

Expectations are the standard library's own output for the same value, so a difference in
spacing, key order or number spelling that a reader could see fails here.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferslice.common import fastjson


def _stdlib(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


_scalars = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8) | st.floats(allow_nan=False, allow_infinity=False)
)
_values = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=20
)


@given(_values)
def test_it_reads_back_what_the_standard_library_writes_and_the_other_way(value: object) -> None:
    text = fastjson.dumps(value)
    assert json.loads(text) == json.loads(_stdlib(value))  # the same value, read by a standard reader
    assert fastjson.loads(_stdlib(value)) == value


def test_a_row_is_compact_and_key_sorted_like_the_standard_librarys() -> None:
    row = {"slice": "premium", "confidence": 0.85, "evidence": [{"ratio": 1.5, "name": "ttft"}], "a": None, "n": 3}
    assert fastjson.dumps(row) == _stdlib(row)


def test_numbers_it_cannot_take_natively_still_encode() -> None:
    assert json.loads(fastjson.dumps({"x": np.float32(0.5), "y": np.int64(7), "z": Decimal("1.25")})) == {"x": 0.5, "y": 7, "z": 1.25}
    assert json.loads(fastjson.dumps({"big": 2**70})) == {"big": 2**70}  # past 64 bits: the standard library's path


def test_a_non_finite_float_is_written_as_null_not_as_invalid_json() -> None:
    text = fastjson.dumps({"a": math.nan, "b": [math.inf]})
    assert json.loads(text) == {"a": None, "b": [None]}
    big = fastjson.dumps({"a": math.nan, "big": 2**70})  # the fallback writes null too
    assert json.loads(big) == {"a": None, "big": 2**70}


def test_what_it_cannot_encode_is_a_type_error_naming_the_type() -> None:
    with pytest.raises(TypeError, match="object"):
        fastjson.dumps({"x": object()})


def test_malformed_text_raises_the_standard_librarys_error() -> None:
    with pytest.raises(json.JSONDecodeError):
        fastjson.loads(b'{"status": "success", "data": ')
