"""Prometheus text exposition (0.0.4) of collected families, fast for ``RowFamily``.

``generate_latest`` formats every sample through ``str.format`` with sorted labels and
``floatToGoString``: ~3 us a sample, the largest single cost of a 15,000-series scrape. Here a
``RowFamily`` whose rows carry the same label values as on an earlier scrape (the steady state:
the same interfaces, in the same order) is written with one ``%`` formatting of a cached template,
so a scrape formats only the numbers; otherwise with one f-string per row from cached label texts,
and the template is kept for the next scrape. Any other family (a
histogram, a family someone already read ``.samples`` of) is handed to ``generate_latest`` itself,
so its output is exactly prometheus_client's. Labels keep their declared order instead of being
sorted: the format does not order them, and Prometheus sorts on ingestion.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from .rows import RowFamily, format_value, label_texts, render_labels

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_TEXT_TYPE = {"unknown": "untyped"}


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


class _One(Collector):
    def __init__(self, family: Metric) -> None:
        self._family = family

    def collect(self) -> Iterable[Metric]:
        return [self._family]


# (sample name, label names) -> the last few (label values of every row, template with one %s per
# row). A few, not one: two registries in one process (a benchmark's variants) may render the same
# family with different rows. Bounded like the label texts: series that come and go rebuild it.
_TEMPLATES: dict[tuple[str, tuple[str, ...]], list[tuple[list[tuple[str, ...]], str]]] = {}
_TEMPLATES_PER_FAMILY = 4
_TEMPLATES_MAX = 1024


def _template(sname: str, names: tuple[str, ...], keys: list[tuple[str, ...]]) -> str:
    entries = _TEMPLATES.get((sname, names))
    if entries is None:
        if len(_TEMPLATES) >= _TEMPLATES_MAX:
            _TEMPLATES.clear()
        entries = _TEMPLATES[(sname, names)] = []
    for i, (cached_keys, text) in enumerate(entries):
        if cached_keys == keys:  # lengths first, then tuples whose strings are mostly the same objects
            if i:
                entries.insert(0, entries.pop(i))
            return text
    cache = label_texts(names)
    get = cache.get
    parts = []
    for values in keys:
        labels = get(values)
        if labels is None:
            labels = cache[values] = render_labels(names, values)
        parts.append(f"{sname}{labels.replace('%', '%%')} %s\n")  # a % in a label value is literal text
    text = "".join(parts)
    entries.insert(0, (keys, text))
    del entries[_TEMPLATES_PER_FAMILY:]
    return text


def _render_rows(fam: RowFamily, out: list[str]) -> None:
    sname = fam.sample_name
    out.append(f"# HELP {sname} {_escape_help(fam.documentation)}\n# TYPE {sname} {_TEXT_TYPE.get(fam.type, fam.type)}\n")
    rows = fam.rows
    if not rows:
        return
    template = _template(sname, fam.labelnames, [v for v, _ in rows])
    # int is what netlink counters are (str(int) is the exposition's integer); floats go through format_value.
    out.append(template % tuple([x if type(x) is int else format_value(x) for _, x in rows]))


def render_families(families: Iterable[Metric]) -> bytes:
    """The text exposition of ``families``, in order."""
    out: list[str] = []
    for fam in families:
        if isinstance(fam, RowFamily) and not fam.materialised:
            _render_rows(fam, out)
        else:
            out.append(generate_latest(_One(fam)).decode("utf-8"))
    return "".join(out).encode("utf-8")


def render_registry(registry: Collector) -> bytes:
    """What ``generate_latest(registry)`` serves, with the fast path for row families."""
    return render_families(registry.collect())
