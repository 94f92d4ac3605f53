"""A metric family kept as rows of (label values, value), rendered to text without Sample objects.

prometheus_client's ``add_metric`` builds a ``Sample`` namedtuple and a label dict per sample
(~2-4 us each); at 1,000 links x 15 series that alone outcosts node_exporter's whole scrape.
``RowFamily`` stores a tuple per sample instead and is still a ``Metric``: anything that reads
``.samples`` (``registry.get_sample_value``, ``generate_latest``) gets ordinary ``Sample``s, built
on first access. ``exporters.text.render_families`` reads the rows directly, writing each series'
label text from a cache, so a steady scrape formats only numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from prometheus_client.core import Metric
from prometheus_client.samples import Sample

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# prometheus_client accepts UTF-8 names (written quoted); the fast writer writes names bare.
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# Label texts by label names, then by values. Bounded: interfaces that come and go with new names
# must not grow it forever; clearing it only costs one re-render per series.
_LABEL_TEXT: dict[tuple[str, ...], dict[tuple[str, ...], str]] = {}
_LABEL_TEXT_MAX = 200_000  # ~13x the 1,000-link exporter's series; ~40 MB at worst

Value = int | float
Row = tuple[tuple[str, ...], Value]


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def label_texts(names: tuple[str, ...]) -> dict[tuple[str, ...], str]:
    """The cache for one label-name tuple: the writer's hot loop does one ``dict.get`` per row."""
    if sum(len(v) for v in _LABEL_TEXT.values()) >= _LABEL_TEXT_MAX:
        _LABEL_TEXT.clear()
    by_values = _LABEL_TEXT.get(names)
    if by_values is None:
        by_values = _LABEL_TEXT[names] = {}
    return by_values


def render_labels(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    if not names:
        return ""
    return "{" + ",".join(f'{k}="{escape_label_value(v)}"' for k, v in zip(names, values, strict=True)) + "}"


def format_value(value: Value) -> str:
    """A sample value as Prometheus text: integers exactly, floats as the shortest repr."""
    if type(value) is int:
        return str(value)
    v = float(value)
    if math.isfinite(v):
        return repr(v)
    if math.isnan(v):
        return "NaN"
    return "+Inf" if v > 0 else "-Inf"


class RowFamily(Metric):
    """A counter, gauge or untyped family whose samples are added as rows.

    ``name`` is given as exported (counters with ``_total``), as the constants in
    ``inferslice.metric_names`` are; the family name follows prometheus_client's convention.
    """

    def __init__(self, name: str, documentation: str, typ: str, labelnames: Sequence[str]) -> None:
        if typ not in ("counter", "gauge", "untyped", "unknown"):
            raise ValueError(f"RowFamily holds counters, gauges or untyped families, not {typ!r}")
        if not _METRIC_NAME.fullmatch(name):
            raise ValueError(f"invalid metric name {name!r}")
        base = name.removesuffix("_total") if typ == "counter" else name
        self._samples: list[Sample] = []
        super().__init__(base, documentation, typ)
        for label in labelnames:
            if not _LABEL_NAME.fullmatch(label) or label.startswith("__"):
                raise ValueError(f"invalid label name {label!r}")
        self.labelnames: tuple[str, ...] = tuple(labelnames)
        self.sample_name = base + "_total" if typ == "counter" else base
        self.rows: list[Row] = []

    def add(self, values: tuple[str, ...], value: Value) -> None:
        """One sample; ``values`` in ``labelnames`` order (the tuple may be shared between families)."""
        self.rows.append((values, value))

    def extend(self, other: RowFamily) -> bool:
        """Append another family's rows if it is the same series shape; False if it is not."""
        if other.sample_name != self.sample_name or other.labelnames != self.labelnames or other._samples:
            return False
        if self._samples:
            self._samples.extend(other.samples)
        else:
            self.rows.extend(other.rows)
        return True

    @property  # type: ignore[override]
    def samples(self) -> list[Sample]:
        if self.rows:
            names, sname = self.labelnames, self.sample_name
            self._samples.extend(Sample(sname, dict(zip(names, v, strict=True)), x) for v, x in self.rows)
            self.rows = []
        return self._samples

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        self._samples = value

    @property
    def materialised(self) -> bool:
        """True once someone read ``samples``: the rows were turned into ``Sample``s."""
        return bool(self._samples)
