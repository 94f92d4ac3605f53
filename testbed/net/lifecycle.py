"""Bring the netns testbed up and down, report its state, change its client-edge caps live.

``up`` builds everything or nothing: any failure tears down what was built before re-raising.
``down`` needs no state at all: it stops every PID-file process, every process living in one of
our namespaces, deletes our root-namespace interfaces and namespaces by name prefix, and is
idempotent.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from inferslice.common.files import atomic_write_json
from inferslice.common.processes import absolute
from inferslice.common.registry import (
    DEFAULT_STATE_DIR,
    REGISTRY_FILE,
    FrontEntry,
    LinkEntry,
    Registry,
    registry_from_json,
    write_registry,
)
from inferslice.errors import NotPrivilegedError, PermanentError
from inferslice.testbed.addressing import AddressPlan
from inferslice.testbed.net import delayline, kernel, procs
from inferslice.testbed.net.htb import DIRECTIONS, HtbClassStats
from inferslice.testbed.net.plan import DEFAULT_PREFIX, EDGE_RATE_BPS, NetPlan, check_prefix, net_plan
from inferslice.topology import Topology, default_topology_path, load_topology

STATE_FILE = "net-state.json"
DELAYLINE = "delayline"
DELAYLINE_SOCKET = "delayline.sock"  # in the state dir: the delay line's control socket (live delay changes)
EXPORTER = "exporter"
EXPORTER_PORT = 9470  # the exporter's default port; loopback only
TUN_WAIT_S = 10.0  # the delay line is up in well under a second; allow for a loaded machine
UNIX_PATH_MAX = 107  # sun_path holds 108 bytes with the terminating NUL
READY_TIMEOUT_S = 60.0  # engine hosts and fronts import heavy modules on 2 shared cores
HEALTH_POLL_S = 0.2


class ServiceStartError(PermanentError):
    """A testbed service did not become healthy in time (the message names its log file)."""


@dataclass(frozen=True)
class ServiceSpec:
    """One process the testbed starts and waits for."""

    name: str  # PID file / log file name
    netns: str
    argv: tuple[str, ...]
    health_url: str  # GET must answer 200
    kind: str = "service"  # host | front | service
    key: str = ""  # the PoP or tier it serves
    # The registry's front entries of the tiers this service serves instead of their TierFronts (Ray
    # Serve: one service for several tiers); their pid is filled in with this service's.
    fronts: tuple[FrontEntry, ...] = ()


ServiceFactory = Callable[[Topology, str, Path, NetPlan], list[ServiceSpec]]


def default_services(top: Topology, topology_path: str, state_dir: Path, plan: NetPlan) -> list[ServiceSpec]:
    """An engine host per PoP (in its namespace) and a serving front per tier (in the gateway's)."""
    addr = AddressPlan(top)
    out: list[ServiceSpec] = []
    for pop in plan.pops:
        admin = addr.host_admin(pop)
        argv: tuple[str, ...] = (
            sys.executable,
            "-m",
            "inferslice.testbed.engine.host",
            "--topology",
            topology_path,
            "--pop",
            pop,
            "--admin",
            admin.listen,
            "--state-dir",
            str(state_dir),
            "--echo",
            addr.echo(pop).listen,
        )
        out.append(ServiceSpec(f"host-{pop}", plan.netns(pop), argv, f"{admin.url}/admin/health", "host", pop))
    for t in plan.tiers:
        front = addr.front(t.name)
        argv = (
            sys.executable,
            "-m",
            "inferslice.testbed.serving.front",
            "--topology",
            topology_path,
            "--tier",
            t.name,
            "--listen",
            front.listen,
            "--state-dir",
            str(state_dir),
        )
        out.append(ServiceSpec(f"front-{t.name}", plan.gateway_netns, argv, f"{front.url}/admin/state", "front", t.name))
    # The exporter for this topology runs in the root namespace (like Prometheus and the API) and
    # reaches replicas and namespaces over the management link; it follows the registry file.
    exporter = (sys.executable, "-m", "inferslice.cli", "exporter", "--registry", str(state_dir),
                "--host", "127.0.0.1", "--port", str(EXPORTER_PORT))  # fmt: skip
    out.append(ServiceSpec(EXPORTER, "", exporter, f"http://127.0.0.1:{EXPORTER_PORT}/healthz", "service", "exporter"))
    return out


# -- state ---------------------------------------------------------------------------------------
def _write_state(state_dir: Path, data: dict[str, Any]) -> None:
    atomic_write_json(state_dir / STATE_FILE, data)


def _read_state(state_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((state_dir / STATE_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def delayline_socket(state_dir: Path) -> Path:
    path = absolute(Path(state_dir)) / DELAYLINE_SOCKET
    if len(str(path)) > UNIX_PATH_MAX:
        raise PermanentError(f"state directory path too long for the delay line's control socket ({path}): use a shorter --state-dir")
    return path


def require_root() -> None:
    if os.geteuid() != 0:
        raise NotPrivilegedError("the netns testbed needs root (network namespaces, TUN devices, qdiscs); run it with sudo")


# -- registry ------------------------------------------------------------------------------------
def _links(plan: NetPlan, caps: dict[str, dict[str, float | None]], wan: dict[str, dict[str, Any]] | None = None) -> list[LinkEntry]:
    out: list[LinkEntry] = []
    for t in plan.tiers:
        for direction in DIRECTIONS:
            ns, ifname = plan.shaper(direction)
            out.append(
                LinkEntry(
                    name="client-edge",
                    kind="access",
                    netns=ns,
                    ifname=ifname,
                    pop=plan.gateway,
                    tier=t.name,
                    direction=direction,
                    htb_classid=t.classid,
                    cap_bps=caps[t.name][direction],
                    rtt_s=plan.edge_rtt_s,
                )
            )
    for w in plan.wan:
        now = (wan or {}).get(w.name, {})
        rtt, capacity = now.get("rtt_s", w.rtt_s), now.get("capacity_bps", w.rate_bps)
        for pop, peer, ns in ((w.a, w.b, w.ns_a), (w.b, w.a, w.ns_b)):
            out.append(LinkEntry(name=f"wan-{pop}-{peer}", kind="wan", netns=ns, ifname=w.ifname, pop=pop, peer_pop=peer,
                                 rtt_s=rtt, capacity_bps=capacity))  # fmt: skip
    for pop in plan.pops:
        for t in plan.tiers:
            out.append(
                LinkEntry(name=f"overlay-{t.name}-{pop}", kind="overlay", netns=plan.netns(pop), ifname=t.vxlan, pop=pop, tier=t.name)
            )
    return out


def _registry(
    top: Topology,
    topology_path: str,
    state_dir: Path,
    plan: NetPlan,
    specs: list[ServiceSpec],
    pids: dict[str, int],
    caps: dict[str, dict[str, float | None]],
) -> Registry:
    addr = AddressPlan(top)
    served = {f.tier: dataclasses.replace(f, pid=pids.get(s.name)) for s in specs for f in s.fronts}
    fronts = tuple(
        served.get(t.name)
        or FrontEntry(
            tier=t.name,
            url=addr.front(t.name).url,
            admin_url=addr.front_admin(t.name).url,
            netns=plan.gateway_netns,
            pid=pids.get(f"front-{t.name}"),
            replicas_target=max(1, top.tier(t.name).replicas_min),
        )
        for t in plan.tiers
    )
    services = {s.name: s.health_url.rsplit("/admin/", 1)[0].removesuffix("/healthz") for s in specs}
    if any(s.kind == "host" for s in specs):
        # each PoP's node agent answers RTT probes; the exporter probes PoP to PoP over the WAN
        services.update({f"echo-{pop}": f"udp://{addr.echo(pop).listen}" for pop in plan.pops})
    return Registry(
        topology_path=topology_path,
        state_dir=str(state_dir),
        updated_s=time.time(),
        fronts=fronts,
        links=tuple(_links(plan, caps)),
        services=services,
        pids=dict(pids),
    )


# -- up ------------------------------------------------------------------------------------------
def _healthy(url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
    try:
        with opener.open(url, timeout=1.0) as resp:
            return int(resp.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _log_tail(state_dir: Path, name: str, lines: int = 5) -> str:
    try:
        text = procs.log_path(state_dir, name).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def _wait_ready(specs: list[ServiceSpec], pids: dict[str, int], state_dir: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    pending = list(specs)
    while pending:
        for spec in list(pending):
            pf = procs.PidFile(spec.name, pids[spec.name], None)
            if _healthy(spec.health_url):
                pending.remove(spec)
            elif not procs.is_running(pf):
                raise ServiceStartError(
                    f"{spec.name} exited before answering {spec.health_url}; see "
                    f"{procs.log_path(state_dir, spec.name)}: {_log_tail(state_dir, spec.name)}"
                )
        if pending and time.monotonic() > deadline:
            spec = pending[0]
            raise ServiceStartError(
                f"{spec.name} did not answer {spec.health_url} within {timeout_s:g} s; see "
                f"{procs.log_path(state_dir, spec.name)}: {_log_tail(state_dir, spec.name)}"
            )
        if pending:
            time.sleep(HEALTH_POLL_S)


def up(
    topology_path: str | None,
    state_dir: Path = DEFAULT_STATE_DIR,
    services: bool = True,
    *,
    prefix: str = DEFAULT_PREFIX,
    service_factory: ServiceFactory | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
) -> Registry:
    """Build the testbed of ``topology_path`` (None: the default file) and return its registry."""
    require_root()
    check_prefix(prefix)
    state_dir = Path(state_dir)
    path = str(Path(topology_path).resolve()) if topology_path is not None else str(default_topology_path())
    top = load_topology(path)
    plan = net_plan(top, prefix)
    kernel.check_free(plan)
    caps: dict[str, dict[str, float | None]] = {t.name: {"receive": t.cap_bps, "transmit": t.cap_bps} for t in plan.tiers}
    _write_state(state_dir, {"prefix": prefix, "topology_path": path, "caps": caps, "started_s": time.time()})
    try:
        kernel.create_namespaces(plan)
        kernel.setup_nodes(plan)
        pids: dict[str, int] = {}
        # The WAN links and the client edge are TUN pairs joined by the delay line. It runs inside the
        # gateway namespace so that `down` finds it by namespace even without PID files.
        # A WAN link with a physical rate is serialised at it by the delay line, through its buffer.
        links = [f"--link={delayline.format_link(w.ns_a, w.ns_b, w.ifname, w.rtt_s, w.rate_bps, w.buffer_s)}" for w in plan.wan]
        links.append(f"--link={delayline.format_link(*plan.edge_link)}")
        control = ["--control", str(delayline_socket(state_dir))]
        pids[DELAYLINE] = procs.spawn(
            DELAYLINE, [sys.executable, "-m", "inferslice.testbed.net.delayline", *links, *control], state_dir, netns=plan.gateway_netns
        )
        dl = procs.PidFile(DELAYLINE, pids[DELAYLINE], None)
        try:
            kernel.wait_tuns(plan, TUN_WAIT_S, lambda: procs.is_running(dl))
        except kernel.NetworkBuildError as err:
            log = procs.log_path(state_dir, DELAYLINE)
            raise kernel.NetworkBuildError(f"{err}; see {log}: {_log_tail(state_dir, DELAYLINE)}") from None
        kernel.setup_underlay(plan)
        kernel.setup_overlay(plan)
        kernel.setup_edge(plan)
        kernel.setup_mgmt(plan)
        specs: list[ServiceSpec] = []
        if services:
            specs = (service_factory or default_services)(top, path, state_dir, plan)
            # A first registry before the services start: the exporter reads it at start-up.
            write_registry(_registry(top, path, state_dir, plan, specs, {}, caps), state_dir)
            for spec in specs:
                pids[spec.name] = procs.spawn(spec.name, spec.argv, state_dir, netns=spec.netns)
            _wait_ready(specs, pids, state_dir, ready_timeout_s)
        reg = _registry(top, path, state_dir, plan, specs, pids, caps)
        write_registry(reg, state_dir)
        _write_state(
            state_dir,
            {"prefix": prefix, "topology_path": path, "caps": caps, "started_s": time.time(), "services": [asdict(s) for s in specs]},
        )
        return reg
    except BaseException:
        _teardown(plan, state_dir)
        raise


def _teardown(plan: NetPlan, state_dir: Path) -> list[str]:
    """Remove exactly what one ``up`` of ``plan`` built (a failed ``up`` must not touch another
    testbed that shares the prefix's beginning)."""
    removed: list[str] = list(procs.stop_all(state_dir))
    namespaces = [ns for ns in plan.all_netns if (kernel.NETNS_DIR / ns).exists()]
    stray = [pid for pids in procs.netns_pids(namespaces).values() for pid in pids]
    if stray:
        procs.terminate(stray)
        removed += [f"process {pid}" for pid in stray]
    removed += kernel.remove_root_links(plan.mgmt_host_if)
    removed += kernel.remove_netns(namespaces)
    removed += _remove_state_files(state_dir)
    return removed


def _remove_state_files(state_dir: Path) -> list[str]:
    removed: list[str] = []
    for name in (REGISTRY_FILE, STATE_FILE):
        if (state_dir / name).exists():
            (state_dir / name).unlink()
            removed.append(f"file {state_dir / name}")
    # the fronts' replica fragments and the placements their moves left (testbed/serving/replicas.py)
    for pattern in ("replicas-*.json", "placement-*.json"):
        for frag in state_dir.glob(pattern) if state_dir.is_dir() else []:
            frag.unlink(missing_ok=True)
            removed.append(f"file {frag}")
    return removed


# -- down / status -------------------------------------------------------------------------------
def down(state_dir: Path = DEFAULT_STATE_DIR, *, prefix: str | None = None) -> list[str]:
    """Remove everything the testbed created; works with missing or partial state. Idempotent."""
    require_root()
    state_dir = Path(state_dir)
    state = _read_state(state_dir)
    if prefix is None:
        prefix = str(state["prefix"]) if state and "prefix" in state else DEFAULT_PREFIX
    check_prefix(prefix)
    removed: list[str] = list(procs.stop_all(state_dir))
    namespaces = kernel.list_netns(prefix)
    stray = [pid for pids in procs.netns_pids(namespaces).values() for pid in pids]
    if stray:
        procs.terminate(stray)
        removed += [f"process {pid}" for pid in stray]
    removed += kernel.remove_root_links(prefix)
    removed += kernel.remove_netns(namespaces)
    removed += _remove_state_files(state_dir)
    return removed


def status(state_dir: Path = DEFAULT_STATE_DIR, *, prefix: str | None = None) -> dict[str, Any]:
    state_dir = Path(state_dir)
    state = _read_state(state_dir) or {}
    prefix = str(state.get("prefix", prefix or DEFAULT_PREFIX))
    processes = {
        pf.name: {"pid": pf.pid, "running": procs.is_running(pf), "log": str(procs.log_path(state_dir, pf.name))}
        for pf in procs.read_pidfiles(state_dir)
    }
    namespaces = kernel.list_netns(prefix)
    return {
        "up": bool(state) and bool(namespaces) and all(p["running"] for p in processes.values()),
        "state_dir": str(state_dir),
        "prefix": prefix,
        "topology_path": state.get("topology_path"),
        "namespaces": namespaces,
        "processes": processes,
        "caps_bps": state.get("caps", {}),
    }


# -- caps and counters ---------------------------------------------------------------------------
def plan_from_state(state_dir: Path) -> tuple[NetPlan, dict[str, Any]]:
    state = _read_state(state_dir)
    if not state:
        raise PermanentError(f"no testbed state in {state_dir} (is the testbed up?)")
    return net_plan(load_topology(state["topology_path"]), str(state["prefix"])), state


def set_cap(tier: str, cap_bps: float | None, direction: str = "receive", state_dir: Path = DEFAULT_STATE_DIR) -> None:
    """Change a tier's client-edge cap live (None: uncapped, i.e. the 10 Gbit/s line rate)."""
    require_root()
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
    if cap_bps is not None and cap_bps <= 0:
        raise ValueError("cap_bps must be positive or None")
    state_dir = Path(state_dir)
    plan, state = plan_from_state(state_dir)
    t = plan.tier(tier)
    ns, ifname = plan.shaper(direction)
    rate = cap_bps if cap_bps is not None else EDGE_RATE_BPS
    burst_s, buffer_s = plan.edge_shape(rate)
    kernel.set_class_rate(ns, ifname, t.classid_int, rate, buffer_s, burst_s)
    caps = state.setdefault("caps", {})
    caps.setdefault(tier, {})[direction] = cap_bps
    _write_state(state_dir, state)
    def change(lk: LinkEntry) -> LinkEntry:
        return dataclasses.replace(lk, cap_bps=cap_bps) if lk.kind == "access" and lk.tier == tier and lk.direction == direction else lk

    update_registry_links(state_dir, change)


def update_registry_links(state_dir: Path, change: Callable[[LinkEntry], LinkEntry]) -> None:
    """Rewrite the registry's link entries through ``change`` (the registry is ours: it must stay
    truthful about caps, rates and delays changed live); nothing to do without a registry."""
    try:
        reg_text = (Path(state_dir) / REGISTRY_FILE).read_text()
    except OSError:
        return
    reg = registry_from_json(reg_text)
    write_registry(dataclasses.replace(reg, links=tuple(change(lk) for lk in reg.links), updated_s=time.time()), state_dir)


def read_state(state_dir: Path) -> dict[str, Any] | None:
    """The testbed's state file (prefix, topology, caps, WAN changes), None when there is none."""
    return _read_state(Path(state_dir))


def write_state(state_dir: Path, data: dict[str, Any]) -> None:
    _write_state(Path(state_dir), data)


@dataclass(frozen=True)
class EdgeCounters:
    """Kernel byte counters of a tier on the client edge (HTB classes)."""

    tier: str
    receive_bytes: int  # towards the clients (gateway end egress)
    transmit_bytes: int  # from the clients (client end egress)
    receive: HtbClassStats
    transmit: HtbClassStats


def edge_counters(state_dir: Path = DEFAULT_STATE_DIR, plan: NetPlan | None = None) -> dict[str, EdgeCounters]:
    """Per-tier receive/transmit counters of the client edge, read from the kernel's HTB classes."""
    if plan is None:
        plan, _ = plan_from_state(Path(state_dir))
    rx = kernel.read_edge_classes(*plan.shaper("receive"))
    tx = kernel.read_edge_classes(*plan.shaper("transmit"))
    out: dict[str, EdgeCounters] = {}
    for t in plan.tiers:
        r, x = rx[t.classid], tx[t.classid]
        out[t.name] = EdgeCounters(t.name, r.bytes, x.bytes, r, x)
    return out
