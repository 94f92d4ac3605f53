"""Panel building blocks on grafanalib: every target bound to the provisioned datasource uid,
every panel with a unit, and a flow layout that places panels on Grafana's 24-column grid.

Dashboards are returned as plain JSON dicts (what Grafana imports and what the checks read).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import attr
import grafanalib.core as g
from grafanalib._gen import DashboardEncoder

DATASOURCE_UID = "inferslice-prometheus"  # fixed so provisioned dashboards bind without a lookup
DATASOURCE: dict[str, str] = {"type": "prometheus", "uid": DATASOURCE_UID}
GRID_COLUMNS = 24

# Grafana unit ids (fieldConfig.defaults.unit).
SECONDS = "s"
BITS_PER_S = "bps"
BYTES = "decbytes"
REQ_PER_S = "reqps"
OPS_PER_S = "ops"
PACKETS_PER_S = "pps"
RATIO = "percentunit"
COUNT = "short"
TOKENS_PER_S = "suffix: tok/s"
GPUS = "suffix: GPU"
STATE = "none"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""
    instant: bool = False
    table: bool = False  # format=table, for table panels


@dataclass(frozen=True)
class Cell:
    """A panel before layout: the grafanalib object and its size in grid units."""

    panel: Any
    w: int = 12
    h: int = 8
    row: bool = False


@dataclass
class Layout:
    """Places cells left to right, wrapping at 24 columns; a row header always starts a new line."""

    cells: list[Cell] = field(default_factory=list)

    def add(self, *cells: Cell) -> Layout:
        self.cells.extend(cells)
        return self

    def place(self) -> list[Any]:
        out: list[Any] = []
        x = y = line_h = 0
        for panel_id, cell in enumerate(self.cells, start=1):
            if cell.row or x + cell.w > GRID_COLUMNS:
                y, x, line_h = y + line_h, 0, 0
            out.append(attr.evolve(cell.panel, gridPos=g.GridPos(h=cell.h, w=cell.w, x=x, y=y), id=panel_id))
            x += cell.w
            line_h = max(line_h, cell.h)
            if cell.row:
                y, x, line_h = y + cell.h, 0, 0
        return out


def targets(queries: Sequence[Query]) -> list[g.Target]:
    ref = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return [
        g.Target(
            expr=qr.expr,
            legendFormat=qr.legend,
            refId=ref[i],
            instant=qr.instant,
            format="table" if qr.table else g.TIME_SERIES_TARGET_FORMAT,
            datasource=DATASOURCE,
        )
        for i, qr in enumerate(queries)
    ]


def _unit(unit: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"fieldConfig": {"defaults": {"unit": unit}}}
    if extra:
        out.update(extra)
    return out


def _links(links: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"title": title, "url": url, "targetBlank": True} for title, url in links]


def row(title: str) -> Cell:
    return Cell(g.RowPanel(title=title, dataSource=DATASOURCE), w=GRID_COLUMNS, h=1, row=True)


def timeseries(
    title: str,
    queries: Sequence[Query],
    unit: str,
    *,
    w: int = 12,
    h: int = 8,
    description: str = "",
    links: Sequence[tuple[str, str]] = (),
    stack: bool = False,
) -> Cell:
    panel = g.TimeSeries(
        title=title,
        description=description or None,
        dataSource=DATASOURCE,
        targets=targets(queries),
        unit=unit,
        links=_links(links),
        stacking={"mode": "normal" if stack else "none", "group": "A"},
        legendDisplayMode="table",
        legendCalcs=["lastNotNull", "max"],
    )
    return Cell(panel, w, h)


def stat(title: str, queries: Sequence[Query], unit: str, *, w: int = 6, h: int = 4, description: str = "") -> Cell:
    panel = g.Stat(
        title=title,
        description=description or None,
        dataSource=DATASOURCE,
        targets=targets(queries),
        format=unit,
        reduceCalc="lastNotNull",
        extraJson=_unit(unit),
    )
    return Cell(panel, w, h)


def state_timeline(title: str, queries: Sequence[Query], *, w: int = 12, h: int = 8, description: str = "") -> Cell:
    panel = g.StateTimeline(
        title=title,
        description=description or None,
        dataSource=DATASOURCE,
        targets=targets(queries),
        extraJson=_unit(STATE),
    )
    return Cell(panel, w, h)


def table(
    title: str,
    queries: Sequence[Query],
    unit: str,
    *,
    w: int = 12,
    h: int = 8,
    description: str = "",
    links: Sequence[tuple[str, str]] = (),
    transformations: Sequence[dict[str, Any]] = (),
) -> Cell:
    panel = g.Table(
        title=title,
        description=description or None,
        dataSource=DATASOURCE,
        targets=targets(queries),
        unit=unit,
        links=_links(links),
        transformations=list(transformations),
    )
    return Cell(panel, w, h)


def text(title: str, markdown: str, *, w: int = 12, h: int = 8) -> Cell:
    return Cell(g.Text(title=title, content=markdown, mode=g.TEXT_MODE_MARKDOWN), w, h)


def variable(name: str, label: str, query: str, *, multi: bool = True) -> g.Template:
    """A query variable over label values, refreshed when the time range changes (new tiers appear)."""
    return g.Template(
        name=name,
        label=label,
        query=query,
        dataSource=DATASOURCE,
        includeAll=multi,
        multi=multi,
        default="$__all" if multi else None,
        refresh=g.REFRESH_ON_TIME_RANGE_CHANGE,
    )


def prometheus_annotation(name: str, expr: str, *, title: str, text_format: str, tags: str, step: str = "1m") -> dict[str, Any]:
    return {
        "name": name,
        "datasource": DATASOURCE,
        "enable": True,
        "iconColor": "orange",
        "expr": expr,
        "step": step,
        "titleFormat": title,
        "textFormat": text_format,
        "tagKeys": tags,
        "useValueForTime": False,
    }


def dashboard(
    uid: str,
    title: str,
    layout: Layout,
    *,
    variables: Sequence[g.Template] = (),
    annotations: Sequence[dict[str, Any]] = (),
    links: Sequence[tuple[str, str]] = (),
    tags: Sequence[str] = ("inferslice",),
    description: str = "",
    refresh: str = "10s",
) -> dict[str, Any]:
    dash = g.Dashboard(
        title=title,
        uid=uid,
        description=description,
        panels=layout.place(),
        templating=g.Templating(list=list(variables)),
        annotations=g.Annotations(list=list(annotations)),
        links=[g.DashboardLink(title=t, type="link", uri=u, targetBlank=True) for t, u in links]
        + [g.DashboardLink(title="InferSlice", type="dashboards", tags=["inferslice"], asDropdown=True, includeVars=False)],
        tags=list(tags),
        refresh=refresh,
        schemaVersion=39,
        graphTooltip=g.GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR,
        time=g.Time("now-30m", "now"),
    )
    data: dict[str, Any] = json.loads(json.dumps(dash.to_json_data(), cls=DashboardEncoder))
    for var in data["templating"]["list"]:
        if var.get("current", {}).get("value") == "$__all":  # how Grafana itself saves an "All" selection
            var["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
    return data
