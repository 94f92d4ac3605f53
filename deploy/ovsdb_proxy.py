"""``inferslice deploy ovsdb-proxy``: a read-only door to OVSDB, so the exporter runs as a non-root user.

On a node, ``/var/run/openvswitch/db.sock`` belongs to root (mode 0750 or stricter): connecting
needs its owner's write permission, which a non-root process only gets with CAP_DAC_OVERRIDE, and
Kubernetes gives a non-root container no effective capabilities. Everything else the exporter reads
needs no privilege (netlink dumps, NVML's device nodes, ``/proc/<pid>/cgroup``), so only this
sidecar runs as uid 0 (every capability dropped: owner permission suffices) and the exporter reaches
OVSDB through it. It forwards what reading needs and refuses the rest, answered with a JSON-RPC
error:

- client -> OVSDB: ``transact`` whose operations are all ``select`` (or ``comment``), ``list_dbs``,
  ``get_schema``, ``echo``, and replies (the client answering the server's inactivity ``echo``);
- OVSDB -> client: everything (answers and the server's ``echo``).

The listening socket lives in an ``emptyDir`` the two containers share and nobody else mounts; it is
mode 0666 because the proxy (root without CAP_CHOWN) cannot give it the exporter's group.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from contextlib import suppress
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

READ_METHODS = frozenset({"list_dbs", "get_schema", "echo"})
READ_OPS = frozenset({"select", "comment"})
MAX_MESSAGE_BYTES = 64 << 20  # one select of a large Interface table is a few MiB; anything bigger is not OVSDB


def refusal(message: Any) -> str | None:
    """Why a client message must not reach OVSDB (None: it may)."""
    if not isinstance(message, dict):
        return "not a JSON-RPC object"
    method = message.get("method")
    if method is None:
        return None  # a reply (to the server's echo)
    if method in READ_METHODS:
        return None
    if method == "transact":
        params = message.get("params")
        if not isinstance(params, list) or not params:
            return "transact without a database"
        ops = params[1:]
        bad = [op.get("op") if isinstance(op, dict) else op for op in ops if not (isinstance(op, dict) and op.get("op") in READ_OPS)]
        return None if not bad else f"transact with {bad} (only select is allowed)"
    return f"{method} is not allowed (read-only)"


class _Stream:
    """Complete JSON values out of a byte stream (OVSDB's JSON-RPC has no framing)."""

    def __init__(self) -> None:
        self._buf = ""
        self._decoder = json.JSONDecoder()

    def feed(self, chunk: bytes) -> list[Any]:
        self._buf += chunk.decode("utf-8")
        if len(self._buf) > MAX_MESSAGE_BYTES:
            raise ValueError("message too large")
        out: list[Any] = []
        while True:
            text = self._buf.lstrip()
            if not text:
                self._buf = ""
                return out
            try:
                obj, end = self._decoder.raw_decode(text)
            except ValueError:
                self._buf = text
                return out  # incomplete: wait for more
            out.append(obj)
            self._buf = text[end:]


class _Session:
    def __init__(self, client: socket.socket, upstream_path: str) -> None:
        self.client = client
        self.upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        self.upstream.connect(upstream_path)
        self._client_lock = threading.Lock()  # answers from OVSDB and our refusals must not interleave

    def _to_client(self, message: Any) -> None:
        with self._client_lock:
            self.client.sendall(json.dumps(message).encode())

    def client_to_upstream(self) -> None:
        stream = _Stream()
        try:
            while chunk := self.client.recv(1 << 16):
                for message in stream.feed(chunk):
                    why = refusal(message)
                    if why is None:
                        self.upstream.sendall(json.dumps(message).encode())
                        continue
                    log.warning("ovsdb-proxy: refused %s", why)
                    ident = message.get("id") if isinstance(message, dict) else None
                    if ident is not None:
                        self._to_client({"id": ident, "result": None, "error": f"inferslice ovsdb-proxy: {why}"})
        except (OSError, ValueError) as err:
            log.info("ovsdb-proxy: client session ends: %s", err)
        finally:
            self.close()

    def upstream_to_client(self) -> None:
        stream = _Stream()
        try:
            while chunk := self.upstream.recv(1 << 16):
                for message in stream.feed(chunk):
                    self._to_client(message)
        except (OSError, ValueError) as err:
            log.info("ovsdb-proxy: upstream session ends: %s", err)
        finally:
            self.close()

    def close(self) -> None:
        for s in (self.client, self.upstream):
            with suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


class OvsdbProxy:
    def __init__(self, listen: Path, upstream: Path, mode: int = 0o666) -> None:
        self.listen, self.upstream, self.mode = Path(listen), Path(upstream), mode
        self._sock: socket.socket | None = None

    def bind(self) -> None:
        self.listen.parent.mkdir(parents=True, exist_ok=True)
        with suppress(FileNotFoundError):
            self.listen.unlink()  # a socket left by a previous run of this container
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        sock.bind(str(self.listen))
        os.chmod(self.listen, self.mode)
        sock.listen(16)
        sock.settimeout(0.5)
        self._sock = sock

    def serve_forever(self, stop: threading.Event) -> None:
        if self._sock is None:
            self.bind()
        assert self._sock is not None
        while not stop.is_set():
            try:
                client, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError as err:
                if stop.is_set():
                    break
                raise err
            client.settimeout(None)
            try:
                session = _Session(client, str(self.upstream))
            except OSError as err:  # OVSDB is down: the exporter reports the source unavailable and reconnects
                log.warning("ovsdb-proxy: cannot reach %s: %s", self.upstream, err)
                client.close()
                continue
            for pump in (session.client_to_upstream, session.upstream_to_client):
                threading.Thread(target=pump, name="ovsdb-proxy", daemon=True).start()
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            with suppress(FileNotFoundError):
                self.listen.unlink()
