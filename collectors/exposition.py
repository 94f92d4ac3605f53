"""Prometheus text exposition -> flat samples (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from inferslice.errors import ParseError

Labels = tuple[tuple[str, str], ...]  # sorted (name, value) pairs, the metric name excluded


@dataclass(frozen=True)
class ParsedSample:
    name: str  # the sample name as exposed ("..._bucket", "..._total")
    labels: Labels
    value: float


def parse_exposition(text: str) -> tuple[ParsedSample, ...]:
    """Parse a whole exposition or raise ``ParseError``: a half-read scrape must not be stored.

    Timestamps in the exposition are ignored: samples are stamped with the scrape time, as
    Prometheus does for the usual timestamp-less exporters.
    """
    out: list[ParsedSample] = []
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out.append(ParsedSample(s.name, tuple(sorted(s.labels.items())), float(s.value)))
    except (ValueError, TypeError, IndexError, KeyError) as err:
        # prometheus_client reports malformed lines as ValueError, truncated ones as IndexError
        raise ParseError(f"exposition: {err}") from None
    return tuple(out)
