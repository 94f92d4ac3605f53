"""JSON on the hot paths: the store's rows and the Prometheus answers the round decodes.

The store encodes two rows a slice a round; at 1,000 slices the standard library's encoder was the
largest part of an ingest after the classifier, and orjson encodes the same rows about nine times
faster (profiled: 420 -> 45 ms over three rounds). Decoding, orjson is barely faster on Prometheus's
answers (building the objects is the cost), so a recorded round scans them instead
(``collectors.recorded.scan_vector``) and decodes here only what the scan declines. The output
contract is the standard library's compact, key-sorted form, so rows written by either read back
the same; values orjson cannot encode (integers past 64 bits, a non-string key) fall back to the
standard library rather than fail. One difference is deliberate: a NaN or infinity is written as
``null`` (the standard library writes ``NaN``, which is not JSON and which no other reader accepts).
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
