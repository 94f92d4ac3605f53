"""The console in a real browser (headless Debian chromium) against an API fed by a recorded session.

Screenshots of each state are written to ``$INFERSLICE_ARTEFACTS/console`` (default: the test's
temporary directory) for a person to look at; the assertions read the DOM.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import Depends

from inferslice.bench.cdp import Browser, chromium_path
from inferslice.service.app import create_app
from inferslice.service.console.server import ThreadedServer
from inferslice.service.controller.api import mount_control
from inferslice.service.controller.audit import AuditLog
from inferslice.service.http import BearerAuth
from inferslice.service.store import Store

from .session import Clock, load_session, recorded_links, session, session_topology

pytestmark = pytest.mark.skipif(chromium_path() is None, reason="Debian chromium not installed (make apt installs it)")

TOKEN = "console-test-token"


@pytest.fixture(scope="module")
def artefacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = os.environ.get("INFERSLICE_ARTEFACTS")
    out = Path(root) / "console" if root else tmp_path_factory.mktemp("console-shots")
    out.mkdir(parents=True, exist_ok=True)
    return out


class Api:
    def __init__(self, db: Path) -> None:
        self.topology = session_topology()
        self.clock = Clock(0.0)
        self.db = db
        self.audit = AuditLog(db.with_name("control.db"))  # the controller's audit log, as `inferslice api --control-db`
        store = Store(db)
        self.last_window_s = load_session(create_app(store, self.topology, clock=self.clock).state.service, store, self.audit)
        store.close()
        self.clock.t = self.last_window_s + 1.0
        self.stores: list[Store] = []
        self.server = ThreadedServer(self._make_app)

    def _make_app(self) -> Any:
        store = Store(self.db)  # a restart opens the database afresh, as `inferslice api` does
        self.stores.append(store)
        app = create_app(store, self.topology, clock=self.clock, token=TOKEN, console_links=recorded_links())
        mount_control(app, self.audit, [Depends(BearerAuth(TOKEN))], self.clock)
        app.state.control_audit = self.audit  # the console reads the controller's actions from it
        return app

    def close(self) -> None:
        self.server.stop()
        for s in self.stores:
            s.close()
        self.audit.close()


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    a = Api(tmp_path_factory.mktemp("console-db") / "session.db")
    a.server.start()
    yield a
    a.close()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _open(url: str) -> tuple[Browser, float]:
    b = Browser(1440, 1000)
    await b.__aenter__()
    load_s = await b.goto(url + "/console")
    await b.wait_for("window.inferslice && window.inferslice.last !== null")
    return b, load_s


def test_topology_renders_every_pop_and_link_and_each_tier_its_regime_and_attribution(api: Api, artefacts: Path) -> None:
    async def go() -> dict[str, Any]:
        b, _ = await _open(api.server.url)
        try:
            await b.wait_for("document.querySelectorAll('article.tier').length === 3")
            await b.screenshot(artefacts / "01-live.png")
            return dict(
                await b.eval(
                    """(() => ({
                    pops: [...document.querySelectorAll('#topo-svg [data-pop]')].map(n => n.dataset.pop),
                    links: [...document.querySelectorAll('#topo-svg [data-link]')].map(n => n.dataset.link),
                    linkRows: [...document.querySelectorAll('#links-table tbody tr')].map(r => r.innerText),
                    replicas: [...document.querySelectorAll('#topo-svg rect.replica')].map(n => n.dataset.tier),
                    regimes: Object.fromEntries([...document.querySelectorAll('article.tier')].map(a =>
                        [a.dataset.tier, a.querySelector('[data-regime]').dataset.regime])),
                    attribution: Object.fromEntries([...document.querySelectorAll('article.tier')].map(a =>
                        [a.dataset.tier, a.querySelector('[data-attribution="ttft_p99"]')?.innerText || null])),
                    charts: document.querySelectorAll('article.tier .uplot').length,
                    tpotView: (() => {
                        const radio = document.querySelector("article[data-tier='standard'] input[value='tpot_attribution']");
                        radio.click();
                        const c = window.inferslice.charts.get('standard');
                        return { stat: c.stat, network: Math.max(...c.raw[1].filter(v => v !== null)) };
                    })(),
                    errors: [],
                }))()"""
                )
            ) | {"console": b.console}
        finally:
            await b.__aexit__(None, None, None)

    page = run(go())
    assert sorted(page["pops"]) == sorted(p.name for p in api.topology.pops)
    assert sorted(page["links"]) == sorted(f"{lk.a}-{lk.b}" for lk in api.topology.links)
    assert len(page["linkRows"]) == len(api.topology.links)
    assert any("3.10 Mbit/s / 1.00 Gbit/s" in r for r in page["linkRows"])  # recorded rate against declared capacity
    assert sorted(set(page["replicas"])) == ["free", "premium", "standard"]
    # the regimes the API diagnosed for the session's last windows, read back through the API
    with httpx.Client(base_url=api.server.url) as c:
        expected = {t.name: c.get(f"/v1/slices/{t.name}").json()["diagnosis"] for t in api.topology.tiers}
    assert page["regimes"] == {name: d["regime"] for name, d in expected.items()}
    assert page["regimes"]["free"] == "queue_limited"  # the recorded load step on free, past its one replica
    for name, d in expected.items():
        queue_ms = d["attribution"]["ttft_p99"]["queue_s"] * 1000
        assert page["attribution"][name] is not None
        assert "queue" in page["attribution"][name]
        if name == "free":
            assert f"{queue_ms:.0f}" in page["attribution"][name].replace(" ", "") or f"{queue_ms / 1000:.2f}" in page["attribution"][name]
    assert page["charts"] == 6  # attribution over time and latency vs SLO, per tier
    # the stacked chart switched to P99 TPOT: standard's network share is its TPOT's, not its TTFT's
    tpot_network = max(
        w["attribution"]["tpot_p99"]["network_s"]
        for w in httpx.get(f"{api.server.url}/v1/slices/standard/diagnoses").json()
        if w.get("attribution") and w["attribution"].get("tpot_p99")
    )
    assert page["tpotView"]["stat"] == "tpot_attribution"
    assert abs(page["tpotView"]["network"] - tpot_network) < 1e-9
    assert not [m for m in page["console"] if m.startswith("EXCEPTION")]


def test_approving_needs_the_token_and_changes_the_action_through_the_api(api: Api, artefacts: Path) -> None:
    pending = [a["action"]["id"] for a in session()["actions"] if a["outcome"] == "pending"]
    [ineffective] = [a["action"]["id"] for a in session()["actions"] if a["outcome"] == "ineffective"]

    async def go() -> dict[str, Any]:
        b, _ = await _open(api.server.url)
        try:
            row = f"#pending-table tr[data-action='{pending[0]}']"
            await b.wait_for(f'document.querySelector("{row}") !== null')
            # The timeline shows the outcome check's verdict as such (the session's compute scale-out was ineffective).
            judged = f"#timeline-table tr[data-action='{ineffective}']"
            await b.wait_for(f'document.querySelector("{judged}") !== null')
            verdict = await b.eval(f'(() => {{ const r = document.querySelector("{judged}"); return [r.className, r.innerText]; }})()')
            await b.eval(f'document.querySelector("{row} button.approve").click()')
            await b.wait_for("document.querySelector('#ctl-msg').classList.contains('error')")
            no_token = await b.eval("document.querySelector('#ctl-msg').innerText")
            await b.screenshot(artefacts / "02-approve-without-token.png")
            await b.eval(
                f"(() => {{ const t = document.querySelector('#token'); t.value = '{TOKEN}'; t.dispatchEvent(new Event('input')); "
                f'document.querySelector("{row} button.approve").click(); }})()'
            )
            await b.wait_for("document.querySelector('#ctl-msg').classList.contains('ok')")
            ok = await b.eval("document.querySelector('#ctl-msg').innerText")
            await b.wait_for(f"document.querySelector(\"#pending-table tr[data-action='{pending[0]}']\") === null")
            await b.screenshot(artefacts / "03-approved.png")
            return {"no_token": no_token, "ok": ok, "verdict": verdict}
        finally:
            await b.__aexit__(None, None, None)

    with httpx.Client(base_url=api.server.url) as c:
        before = {a["id"]: a for a in c.get("/v1/actions", params={"state": "pending"}).json()}
        assert pending[0] in before
        page = run(go())
        after = {a["id"]: a for a in c.get("/v1/actions").json() if a.get("id")}
    assert "Not authorised (401)" in page["no_token"]
    assert (
        page["verdict"][0] == "verdict-ineffective"
        and "· INEFFECTIVE" in page["verdict"][1]
        and "ineffective (checked" in page["verdict"][1]
    )
    assert "Approved" in page["ok"]
    assert after[pending[0]]["state"] != "pending"
    assert after[pending[1]]["state"] == "pending"  # the other one untouched


def test_stale_data_and_a_restarting_api_are_flagged(api: Api, artefacts: Path) -> None:
    async def go() -> dict[str, Any]:
        b, _ = await _open(api.server.url)
        try:
            api.clock.t = api.last_window_s + 60.0  # no window for 60 s: the loop or its source is down
            await b.wait_for("document.querySelectorAll('[data-stale]').length === 3")
            stale_banner = await b.eval("document.querySelector('#banner').innerText")
            windows_source = await b.eval("document.querySelector(\"[data-source='diagnosis windows']\").innerText")
            await b.screenshot(artefacts / "04-stale.png")
            api.server.stop()
            await b.wait_for("document.querySelector('#conn').innerText.startsWith('API unreachable')", timeout_s=30)
            down = await b.eval("document.querySelector(\"[data-source='API']\").innerText")
            kept = await b.eval("document.querySelectorAll('article.tier').length")
            await b.screenshot(artefacts / "05-api-down.png")
            api.clock.t = api.last_window_s + 1.0
            api.server.start()
            await b.wait_for("document.querySelector('#conn').innerText === 'live'", timeout_s=40)
            back = await b.eval("document.querySelectorAll('[data-stale]').length")
            return {"stale_banner": stale_banner, "windows": windows_source, "down": down, "kept": kept, "back": back}
        finally:
            await b.__aexit__(None, None, None)

    page = run(go())
    assert "Stale data" in page["stale_banner"] and "Free" in page["stale_banner"]
    assert "DOWN" in page["windows"]
    assert "DOWN" in page["down"] and "unreachable" in page["down"]
    assert page["kept"] == 3  # the last data stays on screen while the API is away
    assert page["back"] == 0


def test_keyboard_reaches_every_control_and_every_control_has_a_name(api: Api, artefacts: Path) -> None:
    async def go() -> dict[str, Any]:
        b, _ = await _open(api.server.url)
        try:
            await b.wait_for("document.querySelectorAll('#pending-table button').length >= 2")
            unnamed = await b.eval(
                """[...document.querySelectorAll('button, input, select, [role=img]')].filter(n => {
                    const label = n.id && document.querySelector(`label[for='${n.id}']`);
                    const wrapped = n.closest('label');
                    return !(n.getAttribute('aria-label') || n.getAttribute('aria-labelledby') || label || wrapped || n.innerText.trim());
                }).map(n => n.outerHTML.slice(0, 80))"""
            )
            reached = []
            for _ in range(40):
                await b.press_tab()
                reached.append(await b.eval("(() => { const a = document.activeElement; return a.id || a.className || a.tagName; })()"))
            return {"unnamed": unnamed, "reached": reached}
        finally:
            await b.__aexit__(None, None, None)

    page = run(go())
    assert page["unnamed"] == []
    assert page["reached"][0] == "skip"  # the first Tab offers the skip link
    for control in ("tier-filter", "token", "remember", "approve", "reject"):
        assert control in page["reached"], page["reached"]


@pytest.mark.parametrize(("name", "width", "height"), [("laptop", 1366, 768), ("wall", 2560, 1440)])
def test_the_page_fits_a_laptop_and_a_wall_display(api: Api, artefacts: Path, name: str, width: int, height: int) -> None:
    async def go() -> dict[str, Any]:
        async with Browser(width, height) as b:
            await b.goto(api.server.url + "/console")
            await b.wait_for("window.inferslice && window.inferslice.last !== null && document.querySelectorAll('.uplot').length === 6")
            await b.screenshot(artefacts / f"06-{name}.png")
            return dict(
                await b.eval(
                    """({ overflow: document.documentElement.scrollWidth - window.innerWidth,
                         font: parseFloat(getComputedStyle(document.documentElement).fontSize),
                         columns: new Set([...document.querySelectorAll('article.tier')]
                             .map(a => a.getBoundingClientRect().left)).size })"""
                )
            )

    page = run(go())
    assert page["overflow"] <= 0  # no horizontal scrolling
    if name == "wall":
        assert page["font"] >= 20 and page["columns"] == 3  # larger type, every tier side by side
    else:
        assert page["font"] >= 14


def test_a_tier_page_shows_that_tier_alone(api: Api, artefacts: Path) -> None:
    async def go() -> list[str]:
        async with Browser(1440, 1000) as b:
            await b.goto(api.server.url + "/console?tier=standard")
            await b.wait_for("window.inferslice?.last && document.querySelectorAll('article.tier').length === 3")
            await b.screenshot(artefacts / "07-tier-standard.png")
            return list(await b.eval("[...document.querySelectorAll('article.tier')].filter(a => !a.hidden).map(a => a.dataset.tier)"))

    assert run(go()) == ["standard"]


def test_an_api_without_any_window_yet_renders_every_tier_as_stale(tmp_path: Path) -> None:
    store = Store(tmp_path / "empty.db")
    server = ThreadedServer(lambda: create_app(store, session_topology(), clock=lambda: 1_800_000_000.0))
    server.start()

    async def go() -> dict[str, Any]:
        async with Browser(1440, 1000) as b:
            await b.goto(server.url + "/console")
            await b.wait_for("window.inferslice?.last && document.querySelectorAll('article.tier').length === 3")
            page = await b.eval(
                """({ stale: document.querySelectorAll('[data-stale]').length,
                     regimes: [...document.querySelectorAll('[data-regime]')].map(n => n.innerText),
                     windows: document.querySelector("[data-source='diagnosis windows']").innerText })"""
            )
            return {**page, "errors": [m for m in b.console if m.startswith("EXCEPTION")]}

    try:
        page = run(go())
    finally:
        server.stop()
        store.close()
    assert page["stale"] == 3 and page["errors"] == []
    assert page["regimes"] == ["no verdict"] * 3
    assert "no window recorded yet" in page["windows"]
