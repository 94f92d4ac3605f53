"""Every committed corpus window as the classifier sees it: ``(id, snapshot, reference)``.

One reader for the tests that run over the corpus itself (the missing-field rule) and for the
scoring, so both judge a window against the same reference. Corpora:

- ``bench/results/diagnosis/corpus.jsonl``: issue 9's corpus (reference inline, ``saturation``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferslice.snapshot import Reference, SliceSnapshot, snapshot_from_dict

ISSUE9_CORPUS = Path("bench/results/diagnosis/corpus.jsonl")


@dataclass(frozen=True)
class Window:
    id: str
    snapshot: SliceSnapshot
    reference: Reference | None  # what ``classify`` gets beside the snapshot's own ``ref_*`` fields


def issue9_window(rec: Mapping[str, Any]) -> Window:
    snap = snapshot_from_dict(rec["snapshot"])
    sat = rec.get("saturation")
    ref = Reference(tokens_per_s_saturation=float(sat), source="learned", samples=99) if sat else None
    return Window(str(rec["id"]), snap, ref)


def committed(root: Path) -> Iterator[Window]:
    path = root / ISSUE9_CORPUS
    if path.exists():
        with path.open() as fh:
            for line in fh:
                if line.strip():
                    yield issue9_window(json.loads(line))
