"""The read-only OVSDB proxy against a real ovsdb-server (Debian's openvswitch, a private database in
a temporary directory): the exporter's own transaction passes, a write is refused and changes
nothing, and as a non-root user with no capabilities the exporter reaches OVSDB only through it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inferslice.deploy.ovsdb_proxy import OvsdbProxy, refusal
from inferslice.exporters.network.ovs import OvsdbConnection

SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")


@contextlib.contextmanager
def _ovsdb_server(directory: Path) -> Iterator[Path]:
    server, tool = shutil.which("ovsdb-server"), shutil.which("ovsdb-tool")
    if server is None or tool is None or not SCHEMA.exists():
        pytest.skip("Debian's openvswitch (ovsdb-server, ovsdb-tool, vswitch.ovsschema) is not installed")
    db, sock = directory / "conf.db", directory / "db.sock"
    subprocess.run([tool, "create", str(db), str(SCHEMA)], check=True, capture_output=True, timeout=30)
    proc = subprocess.Popen(
        [server, str(db), f"--remote=punix:{sock}", f"--unixctl={directory / 'ctl'}", "--no-chdir", f"--log-file={directory / 'log'}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            if sock.exists():
                break
            time.sleep(0.05)
        else:
            pytest.fail("ovsdb-server did not create its socket")
        yield sock
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.contextmanager
def _proxy(listen: Path, upstream: Path) -> Iterator[Path]:
    proxy = OvsdbProxy(listen, upstream)
    proxy.bind()
    stop = threading.Event()
    thread = threading.Thread(target=proxy.serve_forever, args=(stop,), daemon=True)
    thread.start()
    try:
        yield listen
    finally:
        stop.set()
        thread.join(5)


@pytest.fixture
def ovsdb(tmp_path: Path) -> Iterator[Path]:
    with _ovsdb_server(tmp_path) as sock:
        yield sock


@pytest.fixture
def proxied(ovsdb: Path, tmp_path: Path) -> Iterator[Path]:
    with _proxy(tmp_path / "proxy" / "db.sock", ovsdb) as listen:
        yield listen


def _rpc(path: Path, message: dict[str, Any]) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(str(path))
        s.sendall(json.dumps(message).encode())
        buf, decoder = "", json.JSONDecoder()
        while True:
            buf += s.recv(1 << 16).decode()
            try:
                obj, _ = decoder.raw_decode(buf.lstrip())
            except ValueError:
                continue
            assert isinstance(obj, dict)
            return obj


def test_the_exporters_transaction_passes(proxied: Path, ovsdb: Path) -> None:
    vsctl = shutil.which("ovs-vsctl")
    if vsctl is None:
        pytest.skip("ovs-vsctl is not installed")
    subprocess.run([vsctl, f"--db=unix:{ovsdb}", "--no-wait", "add-br", "br-test"], check=True, capture_output=True, timeout=30)
    snap = OvsdbConnection(str(proxied)).snapshot()
    assert "br-test" in {i.name for i in snap.interfaces}
    assert "Open_vSwitch" in _rpc(proxied, {"method": "list_dbs", "params": [], "id": 1})["result"]


def test_a_write_is_refused_and_changes_nothing(proxied: Path, ovsdb: Path) -> None:
    insert = {"op": "insert", "table": "Bridge", "row": {"name": "br-evil"}}
    answer = _rpc(proxied, {"method": "transact", "params": ["Open_vSwitch", insert], "id": 7})
    assert answer["id"] == 7 and answer["result"] is None and "only select" in answer["error"]
    select = {"op": "select", "table": "Bridge", "where": [], "columns": ["name"]}
    direct = _rpc(ovsdb, {"method": "transact", "params": ["Open_vSwitch", select], "id": 8})
    assert direct["result"] == [{"rows": []}], "the refused insert never reached ovsdb-server"
    assert "not allowed" in _rpc(proxied, {"method": "monitor", "params": ["Open_vSwitch", None, {}], "id": 9})["error"]


def test_refusal_rules() -> None:
    assert refusal({"method": "transact", "params": ["Open_vSwitch", {"op": "select", "table": "Interface", "where": []}]}) is None
    assert refusal({"id": 3, "result": [], "error": None}) is None  # our answer to the server's echo
    assert refusal({"method": "transact", "params": ["Open_vSwitch", {"op": "select"}, {"op": "delete", "table": "Port"}]})
    assert refusal({"method": "transact", "params": []})
    assert refusal(["not", "an", "object"])


def test_non_root_exporter_reaches_ovsdb_only_through_the_proxy(unprivileged_argv: list[str]) -> None:
    top = Path(tempfile.mkdtemp(prefix="ovsdb-proxy-test-"))  # world-traversable, as /var/run is
    try:
        os.chmod(top, 0o755)
        (top / "ovs").mkdir(mode=0o755)
        with _ovsdb_server(top / "ovs") as upstream, _proxy(top / "shared" / "db.sock", upstream) as listen:
            os.chmod(upstream, 0o750)  # as on a node: the socket is root's
            os.chmod(listen.parent, 0o755)
            code = (
                "from inferslice.exporters.network.ovs import OvsdbConnection\n"
                "from inferslice.errors import SourceUnavailable\n"
                "try:\n"
                f"    OvsdbConnection({str(upstream)!r}).snapshot(); print('direct: ok')\n"
                "except SourceUnavailable as err:\n"
                "    print('direct: refused', err)\n"
                f"OvsdbConnection({str(listen)!r}).snapshot(); print('proxied: ok')\n"
            )
            out = subprocess.run([*unprivileged_argv, sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    assert out.returncode == 0, out.stderr
    assert "direct: refused" in out.stdout and "Permission denied" in out.stdout, out.stdout
    assert "proxied: ok" in out.stdout
