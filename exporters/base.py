"""What every exporter shares: sources that may fail, and a collector that survives them.

A *source* reads one thing at scrape time (netlink, OVSDB, NVML, a replica's /metrics) and yields
fresh metric families. A source that cannot be read raises ``SourceUnavailable`` (retryable) or
``ParseError``; ``GuardedCollector`` turns that into ``inferslice_source_up{source}=0`` and keeps
serving every other source. Each source's scrape time is exported too, so a slow source shows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from inferslice import metric_names as mn
from inferslice.errors import InferSliceError

from .rows import RowFamily

log = logging.getLogger(__name__)


class Source(Protocol):
    """One data source of an exporter. ``collect`` raises ``InferSliceError`` subclasses when down."""

    name: str

    def collect(self) -> Iterable[Metric]: ...


class GuardedCollector(Collector):
    """Collects every source on each scrape; a failing source is reported down, never fatal."""

    def __init__(self, sources: Sequence[Source], clock: Callable[[], float] = time.perf_counter) -> None:
        self._sources = list(sources)
        self._clock = clock
        self.last_errors: dict[str, str] = {}

    @property
    def sources(self) -> list[Source]:
        return list(self._sources)

    def collect(self) -> Iterator[Metric]:
        # Several sources may export the same metric (kernel, HTB and OVS all count link bytes): one
        # family per name keeps the exposition valid (a second "# TYPE" line for a name is an error).
        merged: dict[str, Metric] = {}
        for family in self._collect_sources():
            first = merged.get(family.name)
            if first is None:
                merged[family.name] = family
            elif isinstance(first, RowFamily) and isinstance(family, RowFamily) and first.extend(family):
                pass  # rows stay rows: the text writer renders them without Sample objects
            elif first.type == family.type:
                first.samples.extend(family.samples)
            else:
                log.warning("metric %s exported as %s and %s; keeping the first", family.name, first.type, family.type)
        yield from merged.values()

    def _collect_sources(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(mn.SOURCE_UP, "1 if the source was read on this scrape, 0 if it was down", labels=["source"])
        duration = GaugeMetricFamily(mn.SOURCE_SCRAPE_DURATION, "Time spent reading the source on this scrape", labels=["source"])
        for source in self._sources:
            start = self._clock()
            try:
                # Materialise first: a source that fails halfway must not leave half its families.
                families = list(source.collect())
            except InferSliceError as err:
                self.last_errors[source.name] = str(err)
                log.debug("source %s down: %s", source.name, err)
                up.add_metric([source.name], 0.0)
            except OSError as err:  # a vanished interface or socket surfaces as OSError from libraries
                self.last_errors[source.name] = f"{type(err).__name__}: {err}"
                up.add_metric([source.name], 0.0)
            else:
                self.last_errors.pop(source.name, None)
                up.add_metric([source.name], 1.0)
                yield from families
            duration.add_metric([source.name], self._clock() - start)
        yield up
        yield duration
