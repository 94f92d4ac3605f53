"""A pure parser of the Prometheus text exposition format (0.0.4, with the OpenMetrics bits a
scraper meets in the wild: ``# EOF``, exemplars, float timestamps, ``info``/``unknown`` types).

``parse_exposition(text) -> Exposition`` never raises anything but ``ParseError``: a replica that
answers garbage must cost one ``inferslice_target_up=0``, never a crashed scrape. Families group
samples by their declared ``# TYPE`` name and the suffixes that type allows (``_total``/``_created``
for counters, ``_bucket``/``_count``/``_sum``/``_created`` for histograms, ...); a sample that
matches no declared family becomes an ``untyped`` family of its own. Names may contain ``:``
(``vllm:num_requests_running``). Consumers that only want values look samples up by their exact
sample name with ``Exposition.samples(name)``, which works whatever the family grouping was.
Consumers that store series (the embedded collector) use ``series_samples``: every sample with its
labels sorted, so the label order an exporter happens to write never splits one series in two.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from inferslice.errors import ParseError

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_FLOAT = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[Ii]nf(?:inity)?|NaN|nan)")
_TYPES = frozenset({"counter", "gauge", "histogram", "summary", "untyped", "unknown", "info", "stateset", "gaugehistogram"})
# Which sample names a family of each type owns, as suffixes of the family name.
_SUFFIXES: dict[str, tuple[str, ...]] = {
    "counter": ("", "_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created", ""),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum", ""),
    "summary": ("", "_count", "_sum", "_created"),
    "info": ("", "_info"),
}
_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}
# Fast path for a well-formed sample line; anything else goes through the careful scanner, which
# also produces the error message.
_LABEL_RE = r'[a-zA-Z_][a-zA-Z0-9_]*[ \t]*=[ \t]*"(?:[^"\\]|\\.)*"'
_FAST_SAMPLE = re.compile(
    r"([a-zA-Z_:][a-zA-Z0-9_:]*)"
    r"(?:[ \t]*\{[ \t]*((?:" + _LABEL_RE + r"[ \t]*,[ \t]*)*(?:" + _LABEL_RE + r")?)[ \t]*,?[ \t]*\})?"
    r"[ \t]+(\S+)(?:[ \t]+(\S+))?"
)
_FAST_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"')
_ESCAPE = re.compile(r"\\(.)")


Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Labels  # in the order written (sorted by ``series_samples``)
    value: float
    timestamp: float | None = None  # as written: milliseconds (0.0.4) or seconds (OpenMetrics)

    def label(self, key: str, default: str | None = None) -> str | None:
        for k, v in self.labels:
            if k == key:
                return v
        return default

    @property
    def label_dict(self) -> dict[str, str]:
        return dict(self.labels)


@dataclass(frozen=True)
class MetricFamily:
    name: str
    type: str  # counter | gauge | histogram | summary | untyped | ... (as declared; 'untyped' if not)
    help: str
    samples: tuple[Sample, ...]


@dataclass(frozen=True)
class Exposition:
    families: tuple[MetricFamily, ...]
    _by_sample: dict[str, tuple[Sample, ...]] = field(default_factory=dict, compare=False, repr=False)

    def family(self, name: str) -> MetricFamily | None:
        for fam in self.families:
            if fam.name == name:
                return fam
        return None

    def samples(self, name: str) -> tuple[Sample, ...]:
        """Every sample with exactly this sample name, in any family."""
        return self._by_sample.get(name, ())

    def sample_names(self) -> Iterator[str]:
        return iter(self._by_sample)


class _Family:
    __slots__ = ("help", "name", "samples", "type")

    def __init__(self, name: str, type_: str = "untyped", help_: str = "") -> None:
        self.name = name
        self.type = type_
        self.help = help_
        self.samples: list[Sample] = []

    def owns(self, sample_name: str) -> bool:
        if sample_name == self.name:
            return True
        suffix = sample_name[len(self.name) :] if sample_name.startswith(self.name) else None
        return suffix is not None and suffix in _SUFFIXES.get(self.type, ("",))


def _unescape_help(text: str) -> str:
    return text.replace("\\\\", "\x00").replace("\\n", "\n").replace("\x00", "\\")


def _parse_float(text: str, what: str, lineno: int) -> float:
    if not _FLOAT.fullmatch(text):
        raise ParseError(f"line {lineno}: {what} {text[:40]!r} is not a number")
    return float(text)  # cannot fail once the regex matched; huge exponents become inf


def _parse_labels(line: str, pos: int, lineno: int) -> tuple[tuple[tuple[str, str], ...], int]:
    """Parse ``{a="x",b="y"}`` starting at ``line[pos] == '{'``; return the labels and the index after '}'."""
    labels: list[tuple[str, str]] = []
    seen: set[str] = set()
    n = len(line)
    pos += 1
    while True:
        while pos < n and line[pos] in " \t":
            pos += 1
        if pos >= n:
            raise ParseError(f"line {lineno}: unterminated label set")
        if line[pos] == "}":
            return tuple(labels), pos + 1
        m = _LABEL_NAME.match(line, pos)
        if not m:
            raise ParseError(f"line {lineno}: bad label name at column {pos + 1}")
        key = m.group(0)
        pos = m.end()
        while pos < n and line[pos] in " \t":
            pos += 1
        if pos >= n or line[pos] != "=":
            raise ParseError(f"line {lineno}: expected '=' after label {key!r}")
        pos += 1
        while pos < n and line[pos] in " \t":
            pos += 1
        if pos >= n or line[pos] != '"':
            raise ParseError(f"line {lineno}: label {key!r} value is not quoted")
        pos += 1
        chars: list[str] = []
        while True:
            end = line.find('"', pos)
            slash = line.find("\\", pos)
            if end < 0:
                raise ParseError(f"line {lineno}: unterminated value of label {key!r}")
            if 0 <= slash < end:
                chars.append(line[pos:slash])
                if slash + 1 >= n:
                    raise ParseError(f"line {lineno}: dangling escape in label {key!r}")
                nxt = line[slash + 1]
                # An unknown escape is kept literally, as Prometheus' own client parser does.
                chars.append(_UNESCAPE.get(nxt, "\\" + nxt))
                pos = slash + 2
                continue
            chars.append(line[pos:end])
            pos = end + 1
            break
        if key in seen:
            raise ParseError(f"line {lineno}: duplicate label {key!r}")
        seen.add(key)
        labels.append((key, "".join(chars)))
        while pos < n and line[pos] in " \t":
            pos += 1
        if pos < n and line[pos] == ",":
            pos += 1
        elif pos < n and line[pos] != "}":
            raise ParseError(f"line {lineno}: expected ',' or '}}' after label {key!r}")


def _unescape_value(text: str) -> str:
    return _ESCAPE.sub(lambda m: _UNESCAPE.get(m.group(1), m.group(0)), text) if "\\" in text else text


def _parse_sample(line: str, lineno: int) -> Sample:
    fast = _FAST_SAMPLE.fullmatch(line)
    if fast is not None:
        name, body, value_text, ts_text = fast.groups()
        fast_labels: tuple[tuple[str, str], ...] = ()
        if body:
            fast_labels = tuple((k, _unescape_value(v)) for k, v in _FAST_LABEL.findall(body))
            if len({k for k, _ in fast_labels}) != len(fast_labels):
                raise ParseError(f"line {lineno}: duplicate label in {name!r}")
        value = _parse_float(value_text, "value", lineno)
        timestamp = None
        if ts_text is not None:
            timestamp = _parse_float(ts_text, "timestamp", lineno)
            if not math.isfinite(timestamp):
                raise ParseError(f"line {lineno}: timestamp is not finite")
        return Sample(name, fast_labels, value, timestamp)
    return _parse_sample_slow(line, lineno)


def _parse_sample_slow(line: str, lineno: int) -> Sample:
    m = _NAME.match(line)
    if not m:
        raise ParseError(f"line {lineno}: not a metric name: {line[:40]!r}")
    name = m.group(0)
    pos = m.end()
    labels: tuple[tuple[str, str], ...] = ()
    brace = pos
    while brace < len(line) and line[brace] in " \t":
        brace += 1
    if brace < len(line) and line[brace] == "{":
        labels, pos = _parse_labels(line, brace, lineno)
    rest = line[pos:]
    if rest and rest[0] not in " \t":
        raise ParseError(f"line {lineno}: junk after metric name {name!r}")
    # An OpenMetrics exemplar follows ' # '; scrapers ignore it.
    hash_at = rest.find(" # ")
    if hash_at >= 0:
        rest = rest[:hash_at]
    parts = rest.split()
    if not parts or len(parts) > 2:
        raise ParseError(f"line {lineno}: expected 'value [timestamp]' after {name!r}")
    value = _parse_float(parts[0], "value", lineno)
    timestamp = None
    if len(parts) == 2:
        timestamp = _parse_float(parts[1], "timestamp", lineno)
        if not math.isfinite(timestamp):
            raise ParseError(f"line {lineno}: timestamp is not finite")
    return Sample(name, labels, value, timestamp)


def parse_exposition(text: str, keep: Callable[[str], bool] | None = None) -> Exposition:
    """Parse a whole exposition. ``keep(sample_or_family_name)``, when given, drops everything it
    rejects before labels are parsed: a consumer that reads 30 of 600 lines pays for 30."""
    if not isinstance(text, str):
        raise ParseError(f"exposition must be text, not {type(text).__name__}")
    families: dict[str, _Family] = {}
    order: list[_Family] = []
    typed: set[str] = set()
    current: _Family | None = None
    for lineno, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r").strip(" \t")
        if not line:
            continue
        if line[0] == "#":
            parts = line[1:].strip(" \t").split(None, 2)
            if not parts:
                continue
            if parts[0] == "EOF":
                break
            if parts[0] not in ("HELP", "TYPE"):
                continue  # a plain comment
            if len(parts) < 2 or not _NAME.fullmatch(parts[1]):
                raise ParseError(f"line {lineno}: {parts[0]} without a valid metric name")
            fname = parts[1]
            if keep is not None and not keep(fname):
                current = None
                continue
            fam = families.get(fname)
            if fam is None:
                fam = families[fname] = _Family(fname)
                order.append(fam)
            if parts[0] == "HELP":
                fam.help = _unescape_help(parts[2]) if len(parts) > 2 else ""
            else:
                type_ = parts[2].strip().lower() if len(parts) > 2 else ""
                if type_ not in _TYPES:
                    raise ParseError(f"line {lineno}: unknown metric type {type_!r} for {fname!r}")
                if fname in typed:
                    raise ParseError(f"line {lineno}: second TYPE line for {fname!r}")
                if fam.samples:
                    raise ParseError(f"line {lineno}: TYPE for {fname!r} after its samples")
                typed.add(fname)
                fam.type = "untyped" if type_ == "unknown" else type_
            current = fam
            continue
        m = _NAME.match(line)
        if m and keep is not None and not keep(m.group(0)):
            continue
        sample = _parse_sample(line, lineno)
        if current is None or not current.owns(sample.name):
            current = _owner(families, sample.name)
            if current is None:
                current = families[sample.name] = _Family(sample.name)
                order.append(current)
        current.samples.append(sample)
    by_sample: dict[str, list[Sample]] = {}
    for fam in order:
        for s in fam.samples:
            by_sample.setdefault(s.name, []).append(s)
    return Exposition(
        families=tuple(MetricFamily(f.name, f.type, f.help, tuple(f.samples)) for f in order),
        _by_sample={k: tuple(v) for k, v in by_sample.items()},
    )


def _owner(families: dict[str, _Family], sample_name: str) -> _Family | None:
    """The declared family a sample belongs to when it did not follow its family's TYPE line."""
    fam = families.get(sample_name)
    if fam is not None:
        return fam
    for suffix in ("_bucket", "_count", "_sum", "_total", "_created", "_info", "_gcount", "_gsum"):
        if sample_name.endswith(suffix):
            fam = families.get(sample_name[: -len(suffix)])
            if fam is not None and fam.owns(sample_name):
                return fam
    return None


def series_samples(text: str) -> tuple[Sample, ...]:
    """Every sample of a whole exposition, labels sorted, or ``ParseError``: a half-read scrape must not be stored.

    Timestamps in the exposition are dropped: samples are stamped with the scrape time, as
    Prometheus does for the usual timestamp-less exporters.
    """
    return tuple(
        Sample(s.name, tuple(sorted(s.labels)), s.value) for fam in parse_exposition(text).families for s in fam.samples
    )
