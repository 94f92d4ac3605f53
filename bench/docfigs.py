"""Figures in the docs come from the committed benchmark results, not from memory.

A figure in markdown is a marked span: the marker names a JSON file (relative to the repository
root), a key path into it, optional arithmetic and a format; the text up to ``<!-- /fig -->`` is the
value, rendered::

    node_exporter's time at 1,000 interfaces:
    <!-- fig:bench/results/exporter/exporter.json#sizes[interfaces=1000].http_median_s.node_exporter *1000 {:.1f} ms -->78.1 ms<!-- /fig -->

Key path: dot-separated keys; an integer indexes a list; ``name[k=v]`` picks the element of the list
``name`` whose ``k`` is ``v`` (compared as JSON text, so ``[interfaces=1000]`` and ``[name="free"]``).
After the path: ``*N`` / ``/N`` (applied in order), then a ``str.format`` template (default ``{}``).

A marker inside inline code or a fenced block is an example, left alone.
``inferslice bench docs`` rewrites every span of the docs from the results; ``--check`` only reports
the stale ones (tests/consistency/test_doc_figures.py runs it on the repository's docs). Pure
functions here (text in, text out); the CLI shell reads and writes the files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferslice.errors import InputError

# The opening marker, the value text (no nested marker, at most one line), the closing marker.
SPAN = re.compile(r"<!--\s*fig:(?P<spec>[^>]*?)\s*-->(?P<value>[^<\n]*)<!--\s*/fig\s*-->")
_SELECT = re.compile(r"^(?P<name>[^\[\]]*)\[(?P<key>[^=\]]+)=(?P<want>[^\]]+)\]$")
_CODE = re.compile(r"^(```|~~~).*?^\1[^\n]*$|`[^`\n]+`", re.S | re.M)  # fenced blocks, inline code
_OP = re.compile(r"^(?P<op>[*/])(?P<n>[0-9.eE+-]+)$")
DEFAULT_FILES = ("README.md", "docs/**/*.md", "bench/results/**/*.md")


@dataclass(frozen=True)
class FigSpec:
    path: str  # the JSON file, relative to the repository root
    keys: str  # the key path inside it
    ops: tuple[tuple[str, float], ...]  # ("*", 1000.0), ...
    template: str  # str.format template with one field

    @classmethod
    def parse(cls, spec: str) -> FigSpec:
        head, _, rest = spec.strip().partition(" ")
        path, sep, keys = head.partition("#")
        if not sep or not path or not keys:
            raise InputError(f"figure marker {spec!r}: expected fig:PATH#KEY.PATH [*N|/N ...] [FORMAT]")
        ops: list[tuple[str, float]] = []
        words = rest.split(" ") if rest.strip() else []
        while words and (m := _OP.match(words[0])):
            ops.append((m["op"], float(m["n"])))
            words.pop(0)
        template = " ".join(words) or "{}"
        if template.count("{") != 1 or template.count("}") != 1:
            raise InputError(f"figure marker {spec!r}: the format {template!r} needs exactly one {{}} field")
        return cls(path, keys, tuple(ops), template)


@dataclass(frozen=True)
class Stale:
    file: str
    line: int
    spec: str
    shown: str
    expected: str


def lookup(data: Any, keys: str) -> Any:
    """The value at a key path (see the module doc); InputError naming the first key that fails."""
    value = data
    for part in keys.split("."):
        sel = _SELECT.match(part)
        name = sel["name"] if sel else part
        try:
            if name:
                value = value[int(name)] if isinstance(value, list) else value[name]
            if sel:
                want = sel["want"]
                matches = [x for x in value if isinstance(x, dict) and json.dumps(x.get(sel["key"])) in (want, json.dumps(want))]
                if len(matches) != 1:
                    raise InputError(f"{keys}: {len(matches)} elements of {name or 'the list'} have {sel['key']}={want}")
                value = matches[0]
        except (KeyError, IndexError, TypeError, ValueError) as err:
            raise InputError(f"{keys}: no {part!r} ({type(err).__name__}: {err})") from None
    return value


def render_value(spec: FigSpec, data: Any) -> str:
    value = lookup(data, spec.keys)
    for op, n in spec.ops:
        if not isinstance(value, (int, float)):
            raise InputError(f"{spec.keys}: {op}{n:g} needs a number, got {value!r}")
        value = value * n if op == "*" else value / n
    try:
        return spec.template.format(value)
    except (ValueError, TypeError) as err:
        raise InputError(f"{spec.keys}: format {spec.template!r} of {value!r}: {err}") from None


def refresh(text: str, load: Callable[[str], Any], name: str = "") -> tuple[str, list[Stale]]:
    """(text with every span's value rendered from ``load(path)``, the spans whose value changed)."""
    stale: list[Stale] = []
    code = [c.span() for c in _CODE.finditer(text)]

    def one(m: re.Match[str]) -> str:
        if any(a <= m.start() < b for a, b in code):
            return m[0]
        spec = FigSpec.parse(m["spec"])
        try:
            expected = render_value(spec, load(spec.path))
        except InputError as err:
            line = text.count("\n", 0, m.start()) + 1
            raise InputError(f"{name}:{line}: {err}") from None
        if expected != m["value"]:
            stale.append(Stale(name, text.count("\n", 0, m.start()) + 1, m["spec"].strip(), m["value"], expected))
        return f"<!-- fig:{m['spec'].strip()} -->{expected}<!-- /fig -->"

    return SPAN.sub(one, text), stale


def doc_files(root: Path, patterns: Iterable[str] = DEFAULT_FILES) -> list[Path]:
    found: set[Path] = set()
    for pattern in patterns:
        found.update(p for p in root.glob(pattern) if p.is_file())
    return sorted(found)


def update(root: Path, files: Iterable[Path], write: bool) -> tuple[list[Stale], int]:
    """Refresh the spans of ``files`` (written back when ``write``): (stale spans, spans seen)."""
    cache: dict[str, Any] = {}

    def load(path: str) -> Any:
        if path not in cache:
            source = root / path
            try:
                cache[path] = json.loads(source.read_text())
            except (OSError, ValueError) as err:
                raise InputError(f"{path}: {err}") from None
        return cache[path]

    stale: list[Stale] = []
    seen = 0
    for f in files:
        text = f.read_text()
        code = [c.span() for c in _CODE.finditer(text)]
        seen += sum(1 for m in SPAN.finditer(text) if not any(a <= m.start() < b for a, b in code))
        new, changed = refresh(text, load, f.relative_to(root).as_posix() if f.is_relative_to(root) else str(f))
        stale += changed
        if write and new != text:
            f.write_text(new)
    return stale, seen
