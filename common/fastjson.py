"""JSON on the hot paths: the diagnosis round's Prometheus answers and the store's rows.

A 1,000-slice recorded round decodes ~5 MB of Prometheus JSON and the store encodes two rows a
slice; with the standard library these were more than half of the loop's CPU (``inferslice bench
scale``). orjson does both several times faster. The output contract is the standard library's
compact, key-sorted form, so rows written by either read back the same; values orjson cannot
encode (integers past 64 bits, a non-string key) fall back to the standard library rather than
fail. One difference is deliberate: a NaN or infinity is written as ``null`` (the standard library
writes ``NaN``, which is not JSON and which no other reader accepts).
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

_OPTS = orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY


def _default(value: Any) -> Any:
    # numpy scalars orjson does not take natively, Decimal, and any other real number: as a float.
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"not JSON serialisable: {type(value).__name__}") from None


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """Compact, key-sorted JSON text (what ``json.dumps(v, separators=(",", ":"), sort_keys=True)`` gives)."""
    try:
        return orjson.dumps(value, default=_default, option=_OPTS).decode()
    except orjson.JSONEncodeError:
        return json.dumps(_finite(value), separators=(",", ":"), sort_keys=True)


def loads(data: bytes | str) -> Any:
    """Decode JSON text; raises ``json.JSONDecodeError`` (orjson's error is a subclass) on malformed input."""
    return orjson.loads(data)
