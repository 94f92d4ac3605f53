"""The fast text writer against prometheus_client's own: same samples, valid exposition."""

from __future__ import annotations

import math
import shutil
import subprocess
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from inferslice.common.exposition import parse_exposition
from inferslice.errors import InferSliceError
from inferslice.exporters.base import GuardedCollector
from inferslice.exporters.rows import RowFamily, format_value
from inferslice.exporters.text import render_families, render_registry

names = st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True).filter(lambda s: not s.startswith("__"))
label_values = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
values = st.one_of(
    st.integers(min_value=0, max_value=2**64 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
)


@st.composite
def families(draw: st.DrawFn) -> list[tuple[str, str, str, tuple[str, ...], list[tuple[tuple[str, ...], int | float]]]]:
    out = []
    used: set[str] = set()
    for _ in range(draw(st.integers(1, 3))):
        name = draw(names.filter(lambda n: n not in used and not n.endswith("_total")))
        used.add(name)
        typ = draw(st.sampled_from(["counter", "gauge", "untyped"]))
        doc = draw(st.text(max_size=20).filter(lambda d: "\r" not in d))
        labelnames = tuple(draw(st.lists(names, max_size=3, unique=True)))
        rows = draw(st.lists(st.tuples(st.tuples(*[label_values] * len(labelnames)), values), max_size=5, unique_by=lambda r: r[0]))
        if typ == "counter":
            rows = [(lv, abs(v) if not (isinstance(v, float) and math.isnan(v)) else v) for lv, v in rows]
        out.append((name, typ, doc, labelnames, rows))
    return out


def both(spec: list[tuple[str, str, str, tuple[str, ...], list[tuple[tuple[str, ...], int | float]]]]) -> tuple[list[Metric], list[Metric]]:
    fast: list[Metric] = []
    slow: list[Metric] = []
    for name, typ, doc, labelnames, rows in spec:
        exported = name + "_total" if typ == "counter" else name
        f = RowFamily(exported, doc, typ, labelnames)
        s: Metric
        if typ == "counter":
            s = CounterMetricFamily(name, doc, labels=list(labelnames))
        elif typ == "gauge":
            s = GaugeMetricFamily(name, doc, labels=list(labelnames))
        else:
            s = Metric(name, doc, "untyped")
        for lv, v in rows:
            f.add(lv, v)
            if isinstance(s, (CounterMetricFamily, GaugeMetricFamily)):
                s.add_metric(list(lv), v)
            else:
                s.add_sample(name, dict(zip(labelnames, lv, strict=True)), v)
        fast.append(f)
        slow.append(s)
    return fast, slow


def canonical(text: str) -> list[tuple[str, str, str, list[tuple[str, tuple[tuple[str, str], ...], str]]]]:
    """Families as the reference parser reads them; values as repr so NaN compares equal."""
    out = []
    for fam in text_string_to_metric_families(text):
        samples = [(s.name, tuple(sorted(s.labels.items())), repr(float(s.value))) for s in fam.samples]
        out.append((fam.name, fam.type, fam.documentation, samples))
    return out


class _Fixed(Collector):
    def __init__(self, fams: Iterable[Metric]) -> None:
        self._fams = list(fams)

    def collect(self) -> Iterable[Metric]:
        return self._fams


@settings(max_examples=300, deadline=None)
@given(families())
def test_fast_writer_parses_to_the_same_samples_as_generate_latest(spec: list) -> None:  # type: ignore[type-arg]
    fast, slow = both(spec)
    ours = render_families(fast).decode("utf-8")
    reference = generate_latest(_Fixed(slow)).decode("utf-8")
    assert canonical(ours) == canonical(reference)
    # Our own scraper's parser (what the engine exporter uses on replicas) reads it the same way.
    exp = parse_exposition(ours)
    assert sum(len(f.samples) for f in exp.families) == sum(len(r) for *_, r in spec)


@settings(max_examples=100, deadline=None)
@given(families())
def test_row_family_samples_are_prometheus_clients_samples(spec: list) -> None:  # type: ignore[type-arg]
    fast, slow = both(spec)
    for f, s in zip(fast, slow, strict=True):
        assert [(x.name, x.labels, repr(float(x.value))) for x in f.samples] == [
            (x.name, x.labels, repr(float(x.value))) for x in s.samples
        ]
        assert f.name == s.name and f.type == s.type
    # Once materialised, the family is rendered by prometheus_client itself: still the same samples.
    assert canonical(render_families(fast).decode()) == canonical(generate_latest(_Fixed(slow)).decode())


def test_values_are_written_exactly() -> None:
    assert format_value(2**64 - 1) == "18446744073709551615"
    assert format_value(1.5e-300) == "1.5e-300"
    assert format_value(float("inf")) == "+Inf"
    assert format_value(float("-inf")) == "-Inf"
    assert format_value(float("nan")) == "NaN"
    fam = RowFamily("x_bytes_total", "doc", "counter", ["a"])
    fam.add(('q"\\\nz',), 2**64 - 1)
    assert render_families([fam]) == (
        b'# HELP x_bytes_total doc\n# TYPE x_bytes_total counter\nx_bytes_total{a="q\\"\\\\\\nz"} 18446744073709551615\n'
    )


def test_registry_users_and_guarded_merge_see_every_row() -> None:
    class Src:
        def __init__(self, name: str, link: str, value: int) -> None:
            self.name, self._link, self._value = name, link, value

        def collect(self) -> Iterable[Metric]:
            fam = RowFamily("inferslice_link_receive_bytes_total", "rx", "counter", ["slice", "link"])
            fam.add(("premium", self._link), self._value)
            return [fam]

    class Plain:
        name = "plain"

        def collect(self) -> Iterable[Metric]:
            fam = CounterMetricFamily("inferslice_link_receive_bytes", "rx", labels=["slice", "link"])
            fam.add_metric(["free", "c"], 7)
            return [fam]

    reg = CollectorRegistry()
    reg.register(GuardedCollector([Src("one", "a", 1), Src("two", "b", 2), Plain()]))
    assert reg.get_sample_value("inferslice_link_receive_bytes_total", {"slice": "premium", "link": "b"}) == 2
    text = render_registry(reg).decode()
    fam = next(f for f in text_string_to_metric_families(text) if f.name == "inferslice_link_receive_bytes")
    assert sorted((s.labels["link"], s.value) for s in fam.samples) == [("a", 1.0), ("b", 2.0), ("c", 7.0)]
    assert text.count("# TYPE inferslice_link_receive_bytes_total") == 1


def test_other_families_fall_back_to_prometheus_client() -> None:
    hist = HistogramMetricFamily("rtt_seconds", "rtt", labels=["pop"])
    hist.add_metric(["bristol"], [("0.01", 3), ("+Inf", 4)], 0.05)
    assert render_families([hist]) == generate_latest(_Fixed([hist]))


def test_row_family_rejects_what_it_cannot_write() -> None:
    with pytest.raises(ValueError):
        RowFamily("h", "doc", "histogram", [])
    with pytest.raises(ValueError):
        RowFamily("x", "doc", "gauge", ["bad-name"])
    with pytest.raises(ValueError):
        RowFamily("bad name", "doc", "gauge", [])


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_accepts_the_network_families() -> None:
    fam = RowFamily("inferslice_link_receive_bytes_total", "Bytes received on the link", "counter", ["slice", "pop", "link"])
    cap = RowFamily("inferslice_link_cap_bps", "Bandwidth cap in bit/s", "gauge", ["slice", "pop", "link", "direction"])
    for i in range(50):
        fam.add(("premium", "bristol", f'l{i} "quoted" \\ back'), i * 10**12)
        cap.add(("premium", "bristol", f"l{i}", "transmit"), 1e8 + 0.5)
    body = render_families([fam, cap])
    proc = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_parse_errors_are_ours() -> None:
    # A family we wrote parses with our parser into the exact values, including 64-bit counters.
    fam = RowFamily("c_total", "d", "counter", ["k"])
    fam.add(("v",), 2**53 + 1)
    exp = parse_exposition(render_families([fam]).decode())
    assert exp.samples("c_total")[0].value == float(2**53 + 1)
    with pytest.raises(InferSliceError):
        parse_exposition("c_total{k=v} 1\n")


@settings(max_examples=200, deadline=None)
@given(families(), st.lists(values, min_size=15, max_size=15))
def test_a_second_scrape_of_the_same_series_writes_its_new_values(spec: list, new_values: list) -> None:  # type: ignore[type-arg]
    """The steady-state path (a cached template per family, values formatted into it) writes what a
    first scrape would: same series, the new values, label texts with % in them intact."""
    render_families(both(spec)[0])  # the first scrape leaves templates behind
    again = []
    k = 0
    for name, typ, doc, labelnames, rows in spec:
        fresh = []
        for lv, _ in rows:
            v = new_values[k % len(new_values)]
            k += 1
            fresh.append((lv, abs(v) if typ == "counter" and not (isinstance(v, float) and math.isnan(v)) else v))
        again.append((name, typ, doc, labelnames, fresh))
    fast, slow = both(again)
    assert canonical(render_families(fast).decode("utf-8")) == canonical(generate_latest(_Fixed(slow)).decode("utf-8"))


def test_a_percent_sign_in_a_label_value_survives_the_template() -> None:
    for value in (1, 2):
        fam = RowFamily("x_total", "doc", "counter", ["a"])
        fam.add(("50%s of %d",), value)
        assert render_families([fam]).decode().endswith(f'x_total{{a="50%s of %d"}} {value}\n')
