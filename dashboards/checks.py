"""Grafana-free and Prometheus-free checks of the generated artefacts.

Structural dashboard checks (uids, panel ids, grid, datasource, units, template variables) are
pure; PromQL parsing and rule checks call ``promtool``, Alertmanager config checks ``amtool``,
PrometheusRule objects are validated with jsonschema against the CRD's openAPIV3Schema.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from inferslice.dashboards.panels import DATASOURCE_UID, GRID_COLUMNS
from inferslice.errors import ConfigError, SourceUnavailable

_VAR = re.compile(r"\$\{(\w+)(?::[\w]+)?\}|\$(\w+)|\[\[(\w+)\]\]")
_RULE_ERROR = re.compile(r'group "[^"]*", rule (\d+), ')
NO_QUERY_TYPES = frozenset({"row", "text", "dashlist", "news"})
PROMTOOL_TIMEOUT_S = 120.0  # one batch of a few hundred expressions parses in well under a second


@dataclass(frozen=True)
class PanelQuery:
    """One PromQL expression of a dashboard: a panel target (panel_id > 0) or an annotation (0)."""

    dashboard: str
    panel_id: int
    panel: str
    ref: str
    expr: str
    instant: bool = False


def iter_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])  # collapsed rows hold their panels


def iter_queries(dashboard: dict[str, Any]) -> Iterator[PanelQuery]:
    uid = str(dashboard.get("uid"))
    for panel in iter_panels(dashboard):
        for target in panel.get("targets") or []:
            if target.get("expr"):
                yield PanelQuery(
                    uid,
                    int(panel.get("id") or 0),
                    str(panel.get("title", "")),
                    str(target.get("refId", "")),
                    target["expr"],
                    bool(target.get("instant")),
                )
    for ann in dashboard.get("annotations", {}).get("list", []):
        if ann.get("expr"):
            yield PanelQuery(uid, 0, f"annotation {ann.get('name', '')}", "", ann["expr"])


def variables_in(text: str) -> set[str]:
    return {next(x for x in mt.groups() if x) for mt in _VAR.finditer(text)}


def _texts_of_dashboard(dashboard: dict[str, Any]) -> Iterator[str]:
    """Every string where Grafana interpolates variables."""
    for panel in iter_panels(dashboard):
        for target in panel.get("targets") or []:
            yield str(target.get("expr", ""))
            yield str(target.get("legendFormat", ""))
        for link in panel.get("links") or []:
            yield str(link.get("url", ""))
        yield str(panel.get("title", ""))
    for ann in dashboard.get("annotations", {}).get("list", []):
        yield str(ann.get("expr", ""))
    for var in dashboard.get("templating", {}).get("list", []):
        query = var.get("query")
        yield query if isinstance(query, str) else str((query or {}).get("query", ""))


def _overlap(a: dict[str, int], b: dict[str, int]) -> bool:
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def _datasource_ok(ds: Any, uid: str) -> bool:
    return isinstance(ds, dict) and ds.get("uid") == uid and ds.get("type") == "prometheus"


def dashboard_problems(dashboard: dict[str, Any], datasource_uid: str = DATASOURCE_UID) -> list[str]:
    """Everything structurally wrong with one dashboard (an empty list when it is sound)."""
    uid = dashboard.get("uid")
    problems: list[str] = []
    if not uid or not isinstance(uid, str) or len(uid) > 40:
        problems.append(f"dashboard {dashboard.get('title')!r}: uid {uid!r} missing or longer than 40 characters")
    seen_ids: set[int] = set()
    placed: list[tuple[str, dict[str, int]]] = []
    for panel in iter_panels(dashboard):
        title, kind = panel.get("title", "?"), panel.get("type", "?")
        where = f"{uid} panel {panel.get('id')} {title!r}"
        pid = panel.get("id")
        if not isinstance(pid, int) or pid in seen_ids:
            problems.append(f"{where}: panel id missing or duplicated")
        else:
            seen_ids.add(pid)
        grid = panel.get("gridPos") or {}
        if not all(isinstance(grid.get(k), int) for k in ("x", "y", "w", "h")):
            problems.append(f"{where}: gridPos incomplete {grid}")
        else:
            if grid["x"] < 0 or grid["y"] < 0 or grid["w"] <= 0 or grid["h"] <= 0 or grid["x"] + grid["w"] > GRID_COLUMNS:
                problems.append(f"{where}: gridPos out of the 24-column grid {grid}")
            problems += [f"{where}: overlaps {other!r}" for other, og in placed if _overlap(grid, og)]
            placed.append((str(title), grid))
        if kind in NO_QUERY_TYPES:
            continue
        if not _datasource_ok(panel.get("datasource"), datasource_uid):
            problems.append(f"{where}: panel datasource is not uid {datasource_uid}")
        targets = panel.get("targets") or []
        if not targets:
            problems.append(f"{where}: no targets")
        for target in targets:
            if not _datasource_ok(target.get("datasource"), datasource_uid):
                problems.append(f"{where} target {target.get('refId')}: datasource is not uid {datasource_uid}")
            if not str(target.get("expr", "")).strip():
                problems.append(f"{where} target {target.get('refId')}: empty expr")
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
        if not unit:
            problems.append(f"{where}: no unit")
    for ann in dashboard.get("annotations", {}).get("list", []):
        if ann.get("expr") and not _datasource_ok(ann.get("datasource"), datasource_uid):
            problems.append(f"{uid} annotation {ann.get('name')!r}: datasource is not uid {datasource_uid}")
    defined = {str(v.get("name")) for v in dashboard.get("templating", {}).get("list", [])}
    for var in dashboard.get("templating", {}).get("list", []):
        if not _datasource_ok(var.get("datasource"), datasource_uid) and var.get("type") == "query":
            problems.append(f"{uid} variable {var.get('name')!r}: datasource is not uid {datasource_uid}")
    used_in_queries: set[str] = set()
    for query in iter_queries(dashboard):
        used_in_queries |= variables_in(query.expr)
    used_anywhere: set[str] = set()
    for text in _texts_of_dashboard(dashboard):
        used_anywhere |= variables_in(text)
    problems += [f"{uid}: variable ${name} is defined but no query uses it" for name in sorted(defined - used_in_queries)]
    problems += [f"{uid}: ${name} is used but not defined" for name in sorted(used_anywhere - defined) if not name.startswith("__")]
    return problems


def dashboards_problems(dashboards: Sequence[dict[str, Any]], datasource_uid: str = DATASOURCE_UID) -> list[str]:
    """Per-dashboard problems plus uids unique across the set."""
    problems: list[str] = []
    uids = [d.get("uid") for d in dashboards]
    problems += [f"uid {u!r} used by more than one dashboard" for u in sorted({u for u in uids if uids.count(u) > 1}, key=str)]
    for dash in dashboards:
        problems += dashboard_problems(dash, datasource_uid)
    return problems


# -- PromQL ------------------------------------------------------------------------------------
_DURATION_VARS = {"__rate_interval": "1m", "__interval": "1m", "__range": "1h"}


def substitute(expr: str, values: dict[str, str] | None = None, default: str = "x") -> str:
    """Replace Grafana variables with concrete text: duration built-ins with durations, others with ``values`` or ``default``."""
    values = values or {}

    def one(mt: re.Match[str]) -> str:
        name = next(x for x in mt.groups() if x)
        return values.get(name) or _DURATION_VARS.get(name) or default

    return _VAR.sub(one, expr)


def rule_exprs(rule_file: dict[str, Any]) -> list[str]:
    return [str(rule["expr"]) for group in rule_file["groups"] for rule in group["rules"]]


def dashboard_exprs(dashboards: Iterable[dict[str, Any]]) -> list[str]:
    return [substitute(qr.expr) for dash in dashboards for qr in iter_queries(dash)]


def promtool_path() -> str:
    path = shutil.which("promtool") or ("/usr/bin/promtool" if Path("/usr/bin/promtool").exists() else None)
    if path is None:
        raise SourceUnavailable("promtool is not installed (Debian package prometheus)")
    return path


def run_tool(argv: Sequence[str], timeout_s: float = PROMTOOL_TIMEOUT_S) -> tuple[int, str]:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError as err:
        raise SourceUnavailable(f"{argv[0]} not found") from err
    except subprocess.TimeoutExpired as err:
        raise SourceUnavailable(f"{argv[0]} timed out after {timeout_s:g} s") from err
    return done.returncode, done.stdout + done.stderr


def promql_errors(exprs: Sequence[str], promtool: str | None = None) -> dict[str, str]:
    """Parse every expression in one promtool run (each as a throwaway recording rule); expr -> error."""
    unique = list(dict.fromkeys(exprs))
    if not unique:
        return {}
    doc = {"groups": [{"name": "parse", "rules": [{"record": f"parse_check_{i}", "expr": e} for i, e in enumerate(unique)]}]}
    with tempfile.TemporaryDirectory(prefix="inferslice-promql-") as tmp:
        path = Path(tmp) / "exprs.yml"
        path.write_text(yaml.safe_dump(doc, width=10_000))
        rc, out = run_tool([promtool or promtool_path(), "check", "rules", "--lint=none", str(path)])
    if rc == 0:
        return {}
    errors: dict[str, str] = {}
    for line in out.splitlines():
        mt = _RULE_ERROR.search(line)
        if mt:
            errors[unique[int(mt.group(1)) - 1]] = line[mt.end() :].strip()
    if not errors:  # the file itself failed (YAML): report it against every expression
        return dict.fromkeys(unique, out.strip())
    return errors


def check_rule_file(path: Path, promtool: str | None = None) -> tuple[bool, str]:
    rc, out = run_tool([promtool or promtool_path(), "check", "rules", str(path)])
    return rc == 0, out


def run_rule_tests(path: Path, promtool: str | None = None) -> tuple[bool, str]:
    rc, out = run_tool([promtool or promtool_path(), "test", "rules", str(path)], timeout_s=300.0)
    return rc == 0, out


def check_alertmanager_config(path: Path, amtool: str | None = None) -> tuple[bool, str]:
    tool = amtool or shutil.which("amtool") or "/usr/bin/amtool"
    rc, out = run_tool([tool, "check-config", str(path)])
    return rc == 0, out


# -- Prometheus Operator -------------------------------------------------------------------------
def crd_schema(crd_path: Path, version: str = "v1") -> dict[str, Any]:
    try:
        crd = yaml.safe_load(crd_path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"cannot read CRD {crd_path}: {err}") from None
    for ver in crd["spec"]["versions"]:
        if ver["name"] == version:
            schema: dict[str, Any] = ver["schema"]["openAPIV3Schema"]
            return schema
    raise ConfigError(f"CRD {crd_path} has no version {version}")


def custom_object_errors(obj: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """jsonschema errors of a custom object against its CRD schema (OpenAPI v3 is close to draft 7)."""
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'/'.join(str(x) for x in err.absolute_path) or '<root>'}: {err.message}" for err in validator.iter_errors(obj)]
