"""A local HTTP server that STANDS IN FOR kube-apiserver in tests and benchmarks. It is not an
apiserver: no kube-apiserver (kind, k3s, envtest) can run on the machines this project is built
on, so this implements exactly the endpoints and semantics our components use, no more:

- paths: ``/api/v1/namespaces/{ns}/pods[/{name}]``, ``/api/v1/pods`` (list), and
  ``/apis/{group}/{version}[/namespaces/{ns}]/{plural}[/{name}[/status]]`` for the custom kinds of
  the bundled and our own CRDs plus ``coordination.k8s.io/v1`` leases;
- verbs: get, list (``labelSelector`` equality terms, ``fieldSelector`` on ``spec.nodeName`` and
  ``metadata.name``), create (POST; 409 AlreadyExists), update (PUT; 409 Conflict on a stale
  ``metadata.resourceVersion``), patch (``application/merge-patch+json`` and
  ``application/json-patch+json``; ``strategic-merge-patch`` only for built-in kinds, 415 for custom
  resources as kube-apiserver answers);
- the status subresource: for kinds that declare it, writes to the main resource keep the stored
  status (and a create drops the body's status), writes to ``/status`` change only the status;
  ``metadata.generation`` moves with spec changes only, ``resourceVersion`` with every write;
- validation of every stored object: custom resources against their CRD's schema
  (``schemas.validate_object``), built-in kinds with ``kubernetes-validate --strict`` when installed;
  an invalid object is a 422 ``Invalid`` Status naming the field;
- a bearer token on every request (401 without it), and a log of (verb, group, resource,
  namespace) for each request, from which the RBAC test checks the roles grant exactly what is used.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from . import schemas
from .patches import PatchError, json_patch, merge_patch

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    has_status: bool
    custom: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


_BUILTIN = {
    ("", "v1", "pods"): Resource("", "v1", "pods", "Pod", True, True, False),
    ("coordination.k8s.io", "v1", "leases"): Resource("coordination.k8s.io", "v1", "leases", "Lease", True, False, False),
}

_CORE = re.compile(r"^/api/v1(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>pods)(?:/(?P<name>[^/]+))?(?:/(?P<sub>status))?$")
_GROUP = re.compile(
    r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>status))?$"
)


@dataclass(frozen=True)
class Call:
    verb: str
    group: str
    resource: str  # plural, or "plural/status"
    namespace: str | None


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def status(self) -> dict[str, Any]:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


def _resource(group: str, version: str, plural: str) -> Resource:
    builtin = _BUILTIN.get((group, version, plural))
    if builtin:
        return builtin
    kind = schemas.by_plural(group, version, plural)
    if kind is None:
        raise ApiError(404, "NotFound", f"the server could not find the requested resource {group}/{version} {plural}")
    return Resource(group, version, plural, kind.kind, kind.namespaced, kind.has_status, True)


def _validate(res: Resource, obj: dict[str, Any]) -> None:
    try:
        if res.custom:
            schemas.validate_object(obj)
            return
        import kubernetes_validate
    except schemas.SchemaError as err:
        raise ApiError(422, "Invalid", f"{res.kind} {obj['metadata'].get('name')!r} is invalid: {err}") from None
    except ImportError:
        return  # built-in validation needs the test extra; custom resources are always validated
    try:
        kubernetes_validate.validate(obj, "1.32.0", strict=True)
    except kubernetes_validate.ValidationError as err:
        where = ".".join(str(p) for p in err.path)
        raise ApiError(422, "Invalid", f"{res.kind} {obj['metadata'].get('name')!r} is invalid: {where}: {err.message}") from None


def _matches(obj: dict[str, Any], label_selector: str, field_selector: str) -> bool:
    labels = obj.get("metadata", {}).get("labels", {}) or {}
    for term in filter(None, label_selector.split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value.lstrip("="):
            return False
    for term in filter(None, field_selector.split(",")):
        key, _, value = term.partition("=")
        node: Any = obj
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node != value:
            return False
    return True


class Store:
    """The objects, keyed by (group, plural, namespace, name); one lock serialises every write."""

    def __init__(self) -> None:
        self._objects: dict[tuple[str, str, str | None, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._rv = itertools.count(1)
        self.calls: list[Call] = []

    def _stamp(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._rv))

    def create(self, res: Resource, ns: str | None, body: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name")
        if not name:
            raise ApiError(422, "Invalid", "metadata.name: Required value")
        if res.namespaced:
            meta["namespace"] = ns
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
        if res.has_status and res.custom:
            obj.pop("status", None)  # a create never sets the status of a kind with a status subresource
        meta.update({"uid": str(uuid.uuid4()), "generation": 1, "creationTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")})
        with self._lock:
            key = (res.group, res.plural, ns, name)
            if key in self._objects:
                raise ApiError(409, "AlreadyExists", f'{res.plural}.{res.group} "{name}" already exists')
            _validate(res, obj)
            self._stamp(obj)
            self._objects[key] = obj
            return copy.deepcopy(obj)

    def get(self, res: Resource, ns: str | None, name: str) -> dict[str, Any]:
        with self._lock:
            obj = self._objects.get((res.group, res.plural, ns, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{res.plural}.{res.group} "{name}" not found')
            return copy.deepcopy(obj)

    def list(self, res: Resource, ns: str | None, label_selector: str = "", field_selector: str = "") -> dict[str, Any]:
        with self._lock:
            items = [
                copy.deepcopy(o)
                for (g, p, n, _), o in sorted(self._objects.items(), key=lambda kv: str(kv[0]))
                if (g, p) == (res.group, res.plural) and (ns is None or n == ns) and _matches(o, label_selector, field_selector)
            ]
            rv = str(next(self._rv))
        return {"apiVersion": res.api_version, "kind": f"{res.kind}List", "metadata": {"resourceVersion": rv}, "items": items}

    def write(
        self, res: Resource, ns: str | None, name: str, new: dict[str, Any], status_only: bool, expect_rv: str | None
    ) -> dict[str, Any]:
        """Store ``new`` in place of the current object with the subresource rules (see module doc)."""
        with self._lock:
            key = (res.group, res.plural, ns, name)
            old = self._objects.get(key)
            if old is None:
                raise ApiError(404, "NotFound", f'{res.plural}.{res.group} "{name}" not found')
            if expect_rv is not None and expect_rv != old["metadata"]["resourceVersion"]:
                raise ApiError(
                    409, "Conflict", f'Operation cannot be fulfilled on {res.plural}.{res.group} "{name}": the object has been modified'
                )
            if res.has_status and status_only:
                obj = copy.deepcopy(old)
                if "status" in new:
                    obj["status"] = copy.deepcopy(new["status"])
                else:
                    obj.pop("status", None)
            else:
                obj = copy.deepcopy(new)
                for fixed in ("uid", "creationTimestamp", "generation", "namespace", "name"):
                    if fixed in old["metadata"]:
                        obj.setdefault("metadata", {})[fixed] = old["metadata"][fixed]
                obj["apiVersion"], obj["kind"] = old["apiVersion"], old["kind"]
                if res.has_status:
                    if "status" in old:
                        obj["status"] = copy.deepcopy(old["status"])
                    else:
                        obj.pop("status", None)
                if obj.get("spec") != old.get("spec"):
                    obj["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
            _validate(res, obj)
            self._stamp(obj)
            self._objects[key] = obj
            return copy.deepcopy(obj)

    def seed(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Test setup: store an object as a controller (KubeRay, the kubelet) would have, status included."""
        api_version = obj["apiVersion"]
        group, _, version = api_version.rpartition("/")
        res = _resource(group, version, _plural_of(obj["kind"], group, version))
        ns = obj["metadata"].get("namespace") if res.namespaced else None
        status = obj.get("status")
        created = self.create(res, ns, obj)
        if status is not None and res.has_status and res.custom:
            created["status"] = status
            created = self.write(res, ns, created["metadata"]["name"], created, status_only=True, expect_rv=None)
        return created


def _plural_of(kind: str, group: str, version: str) -> str:
    for (g, v, plural), res in _BUILTIN.items():
        if (g, v, res.kind) == (group, version, kind):
            return plural
    for k in schemas.registry().values():
        if (k.group, k.version, k.kind) == (group, version, kind):
            return k.plural
    raise KeyError(kind)


class _Handler(BaseHTTPRequestHandler):
    server: StandIn

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        return

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            return json.loads(self.rfile.read(length) or b"null")
        except json.JSONDecodeError as err:
            raise ApiError(400, "BadRequest", f"body is not JSON: {err}") from None

    def _route(self) -> tuple[Resource, str | None, str | None, bool, dict[str, list[str]]]:
        url = urlsplit(self.path)
        m = _CORE.match(url.path)
        group, version = "", "v1"
        if m is None:
            m = _GROUP.match(url.path)
            if m is None:
                raise ApiError(404, "NotFound", f"no route {url.path}")
            group, version = m["group"], m["version"]
        res = _resource(group, version, m["plural"])
        return res, m["ns"], m["name"], m["sub"] == "status", parse_qs(url.query)

    def _handle(self, method: str) -> None:
        try:
            if self.headers.get("Authorization") != f"Bearer {self.server.token}":
                raise ApiError(401, "Unauthorized", "Unauthorized")
            res, ns, name, status, query = self._route()
            verb = {"GET": "get" if name else "list", "POST": "create", "PUT": "update", "PATCH": "patch"}[method]
            self.server.store.calls.append(Call(verb, res.group, f"{res.plural}/status" if status else res.plural, ns))
            self._send(200 if method != "POST" else 201, self._do(method, res, ns, name, status, query))
        except ApiError as err:
            self._send(err.code, err.status())

    def _do(self, method: str, res: Resource, ns: str | None, name: str | None, status: bool, q: dict[str, list[str]]) -> dict[str, Any]:
        store = self.server.store
        if method == "GET":
            if name is None:
                return store.list(res, ns, q.get("labelSelector", [""])[0], q.get("fieldSelector", [""])[0])
            return store.get(res, ns, name)
        if name is None:
            if method != "POST":
                raise ApiError(405, "MethodNotAllowed", f"{method} needs an object name")
            body = self._body()
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "body is not an object")
            return store.create(res, ns, body)
        if method == "PUT":
            body = self._body()
            return store.write(res, ns, name, body, status, body.get("metadata", {}).get("resourceVersion"))
        return self._patch(res, ns, name, status)

    def _patch(self, res: Resource, ns: str | None, name: str, status: bool) -> dict[str, Any]:
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        body = self._body()
        current = self.server.store.get(res, ns, name)
        try:
            if content_type == JSON_PATCH:
                new = json_patch(current, body)
            elif content_type == MERGE or (content_type == STRATEGIC and not res.custom):
                new = merge_patch(current, body)
            elif content_type == STRATEGIC:
                raise ApiError(415, "UnsupportedMediaType", "strategic merge patch is not supported for custom resources")
            else:
                raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {content_type}")
        except PatchError as err:
            raise ApiError(409 if err.conflict else 422, "Conflict" if err.conflict else "Invalid", str(err)) from None
        # A resourceVersion inside a merge patch is a precondition, as in kube-apiserver.
        expect = body.get("metadata", {}).get("resourceVersion") if isinstance(body, dict) else None
        return self.server.store.write(res, ns, name, new, status, expect)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")


class StandIn(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, token: str, store: Store | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.token = token
        self.store = store or Store()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


@contextmanager
def serve(token: str = "stand-in-token", store: Store | None = None) -> Iterator[StandIn]:
    """Run a stand-in on a free loopback port in a thread; stopped and closed on exit."""
    server = StandIn(token, store)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="apiserver-stand-in", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
