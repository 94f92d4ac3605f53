"""A local HTTP server that STANDS IN FOR kube-apiserver in tests and benchmarks. It is not an
apiserver: no kube-apiserver (kind, k3s, envtest) can run on the machines this project is built
on, so this implements exactly the endpoints and semantics our components use, no more, answering
as kube-apiserver does (status codes and ``Status`` bodies are checked against captured
kube-apiserver responses in ``tests/fixtures/kube-apiserver/``):

- paths: ``/api/v1/namespaces/{ns}/pods[/{name}]``, ``/api/v1/pods`` (list), and
  ``/apis/{group}/{version}[/namespaces/{ns}]/{plural}[/{name}[/status]]`` for the custom kinds of
  the bundled and our own CRDs plus ``coordination.k8s.io/v1`` leases;
- verbs: get, list (``labelSelector`` equality terms, ``fieldSelector`` on ``spec.nodeName`` and
  ``metadata.name``), create (POST; 409 ``AlreadyExists``), update (PUT) and patch
  (``application/merge-patch+json``, ``application/json-patch+json``; ``strategic-merge-patch``
  for built-in kinds only, 415 for custom resources). A ``metadata.resourceVersion`` in the object an
  update or patch produces is a precondition: 409 ``Conflict`` if the object moved on. A JSON patch
  that cannot be applied (a failed ``test`` op, a missing path) is 422 ``Invalid`` with the generic
  message kube-apiserver gives (``patch.go``: ``NewGenericServerResponse(422, ...)``). A patch is
  applied to the stored object and written back under one lock (kube-apiserver's GuaranteedUpdate);
- the status subresource: for kinds that declare it, writes to the main resource keep the stored
  status (and a create drops the body's status), writes to ``/status`` change only the status;
  ``metadata.generation`` moves with spec changes only, ``resourceVersion`` with every write;
- validation of every stored object: custom resources against their CRD's schema
  (``schemas.validate_object``), built-in kinds with ``kubernetes-validate --strict`` when installed;
  an invalid object is a 422 ``Invalid`` Status naming the field;
- authentication by bearer token (401 without a known one): the admin token may do anything; other
  tokens map to users (``system:serviceaccount:NS:NAME``) whose requests are authorized, when RBAC
  objects are given, exactly as the RBAC authorizer would from the rendered Roles and bindings
  (403 ``Forbidden`` otherwise);
- a log of every request (``calls``: verb, group, resource, namespace, name, user, code) and of every
  write that took effect (``writes``: who, what, the object after), from which the RBAC test checks
  the roles grant exactly what is used and the HA tests check who acted;
- faults for tests (``faults``, ``apiserver_faults``): hold or delay a request before it is processed (it arrives late), or
  its answer after it was processed (the answer arrives late), or drop it (a partition).
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from . import rbac, schemas
from .apiserver_faults import Drop, Fault, Faults, wait
from .apiserver_status import (
    ADMIN,
    ApiError,
    Call,
    Resource,
    Write,
    already_exists,
    conflict,
    invalid,
    not_found,
    patch_not_applicable,
    status_details,
)
from .patches import PatchError, json_patch, merge_patch

__all__ = ["ApiError", "Call", "Fault", "StandIn", "Store", "serve"]  # what tests and benches use from here

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


_BUILTIN = {
    ("", "v1", "pods"): Resource("", "v1", "pods", "Pod", True, True, False),
    ("coordination.k8s.io", "v1", "leases"): Resource("coordination.k8s.io", "v1", "leases", "Lease", True, False, False),
}

_CORE = re.compile(r"^/api/v1(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>pods)(?:/(?P<name>[^/]+))?(?:/(?P<sub>status))?$")
_GROUP = re.compile(
    r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>status))?$"
)


def _resource(group: str, version: str, plural: str) -> Resource:
    builtin = _BUILTIN.get((group, version, plural))
    if builtin:
        return builtin
    kind = schemas.by_plural(group, version, plural)
    if kind is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
    return Resource(group, version, plural, kind.kind, kind.namespaced, kind.has_status, True)


def _validate(res: Resource, obj: dict[str, Any]) -> None:
    name = obj["metadata"].get("name") or ""
    try:
        if res.custom:
            schemas.validate_object(obj)
            return
        import kubernetes_validate
    except schemas.SchemaError as err:
        where = err.field or ""
        raise invalid(res, name, where, str(err).removeprefix(f"{where}: ")) from None
    except ImportError:
        return  # built-in validation needs the test extra; custom resources are always validated
    try:
        kubernetes_validate.validate(obj, "1.32.0", strict=True)
    except kubernetes_validate.ValidationError as err:
        raise invalid(res, name, ".".join(str(p) for p in err.path), err.message) from None


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
    """The objects, keyed by (group, plural, namespace, name); one lock serialises every write, and a
    patch reads and writes under it."""

    def __init__(self) -> None:
        self._objects: dict[tuple[str, str, str | None, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._rv = itertools.count(1)
        self._seq = itertools.count(1)
        self.calls: list[Call] = []
        self.writes: list[Write] = []

    def _stamp(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._rv))

    def _log(self, user: str, verb: str, res: Resource, ns: str | None, name: str, obj: dict[str, Any], status: bool) -> None:
        resource = f"{res.plural}/status" if status else res.plural
        self.writes.append(Write(next(self._seq), user, verb, res.group, resource, ns, name, copy.deepcopy(obj)))

    def create(self, res: Resource, ns: str | None, body: dict[str, Any], user: str = ADMIN) -> dict[str, Any]:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name")
        if not name:
            raise invalid(res, "", "metadata.name", "Required value: name or generateName is required")
        if res.namespaced:
            meta["namespace"] = ns
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
        if res.has_status and res.custom:
            obj.pop("status", None)  # a create never sets the status of a kind with a status subresource
        meta.update({"uid": str(uuid.uuid4()), "generation": 1, "creationTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")})
        meta.pop("resourceVersion", None)
        with self._lock:
            key = (res.group, res.plural, ns, name)
            if key in self._objects:
                raise already_exists(res, name)
            _validate(res, obj)
            self._stamp(obj)
            self._objects[key] = obj
            self._log(user, "create", res, ns, name, obj, False)
            return copy.deepcopy(obj)

    def get(self, res: Resource, ns: str | None, name: str) -> dict[str, Any]:
        with self._lock:
            obj = self._objects.get((res.group, res.plural, ns, name))
            if obj is None:
                raise not_found(res, name)
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
        self,
        res: Resource,
        ns: str | None,
        name: str,
        new: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]],
        status_only: bool,
        expect_rv: str | None = None,
        user: str = ADMIN,
        verb: str = "update",
    ) -> dict[str, Any]:
        """Store ``new`` (an object, or a function of the current one: a patch) in place of the current
        object with the subresource rules (see module doc). A ``resourceVersion`` in ``expect_rv`` or
        in the new object that is not the stored one is a 409 Conflict."""
        with self._lock:
            key = (res.group, res.plural, ns, name)
            old = self._objects.get(key)
            if old is None:
                raise not_found(res, name)
            current_rv = old["metadata"]["resourceVersion"]
            candidate = new(copy.deepcopy(old)) if callable(new) else copy.deepcopy(new)
            wanted_rv = expect_rv if expect_rv is not None else (candidate.get("metadata") or {}).get("resourceVersion")
            if verb == "update" and res.plural == "leases" and wanted_rv in (None, ""):
                # the Lease strategy allows no unconditional update (kube-apiserver's answer, captured)
                msg = f'{res.qualified} "{name}" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update'
                cause = {
                    "reason": "FieldValueInvalid",
                    "message": "Invalid value: 0: must be specified for an update",
                    "field": "metadata.resourceVersion",
                }
                raise ApiError(422, "Invalid", msg, {**status_details(res, name), "causes": [cause]})
            if wanted_rv not in (None, "") and str(wanted_rv) != current_rv:
                raise conflict(res, name)
            if res.has_status and status_only:
                obj = copy.deepcopy(old)
                if "status" in candidate:
                    obj["status"] = copy.deepcopy(candidate["status"])
                else:
                    obj.pop("status", None)
            else:
                obj = candidate
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
            self._log(user, verb, res, ns, name, obj, status_only and res.has_status)
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


# -- HTTP ------------------------------------------------------------------------------------------


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
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"null")
        except json.JSONDecodeError as err:
            raise ApiError(400, "BadRequest", f"error decoding request body: {err}") from None

    def _route(self) -> tuple[Resource, str | None, str | None, bool, dict[str, list[str]]]:
        url = urlsplit(self.path)
        m = _CORE.match(url.path)
        group, version = "", "v1"
        if m is None:
            m = _GROUP.match(url.path)
            if m is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
            group, version = m["group"], m["version"]
        res = _resource(group, version, m["plural"])
        return res, m["ns"], m["name"], m["sub"] == "status", parse_qs(url.query)

    def _handle(self, method: str) -> None:
        srv = self.server
        call: Call | None = None
        try:
            scheme, _, credentials = (self.headers.get("Authorization") or "").strip().partition(" ")
            token = (
                credentials.strip() if scheme.lower() == "bearer" else None
            )  # the scheme is case-insensitive, as kube-apiserver reads it
            user = ADMIN if token == srv.token else srv.users.get(token or "")
            if user is None:
                raise ApiError(401, "Unauthorized", "Unauthorized")
            res, ns, name, status, query = self._route()
            verb = {"GET": "get" if name else "list", "POST": "create", "PUT": "update", "PATCH": "patch"}[method]
            resource = f"{res.plural}/status" if status else res.plural
            call = Call(verb, res.group, resource, ns, name, user)
            fault = srv.faults.pick(call)
            if fault is not None:
                wait(fault.hold_before, fault.delay_before_s)
                if fault.drop:
                    raise Drop
                if fault.answer is not None:
                    raise fault.answer
            if (
                user != ADMIN
                and srv.rbac_objects is not None
                and not rbac.authorize(srv.rbac_objects, user, verb, res.group, resource, ns, name)
            ):
                message = rbac.forbidden_message(user, verb, res.group, resource, ns, name)
                raise ApiError(403, "Forbidden", message, status_details(res, name))
            try:
                code, body = (200 if method != "POST" else 201), self._do(method, res, ns, name, status, query, user)
            except ApiError as err:
                code, body = err.code, err.status()
            srv.store.calls.append(Call(verb, res.group, resource, ns, name, user, code))
            if fault is not None:
                wait(fault.hold_after, fault.delay_after_s)
            self._send(code, body)
        except Drop:
            self.close_connection = True
        except ApiError as err:
            if call is not None:
                srv.store.calls.append(Call(call.verb, call.group, call.resource, call.namespace, call.name, call.user, err.code))
            self._send(err.code, err.status())
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (its request timeout): nothing to answer

    def _do(
        self, method: str, res: Resource, ns: str | None, name: str | None, status: bool, q: dict[str, list[str]], user: str
    ) -> dict[str, Any]:
        store = self.server.store
        if method == "GET":
            if name is None:
                return store.list(res, ns, q.get("labelSelector", [""])[0], q.get("fieldSelector", [""])[0])
            return store.get(res, ns, name)
        if name is None:
            if method != "POST":
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
            body = self._body()
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request is not a JSON object")
            return store.create(res, ns, body, user)
        if method == "PUT":
            body = self._body()
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request is not a JSON object")
            return store.write(res, ns, name, body, status, user=user, verb="update")
        return self._patch(res, ns, name, status, user)

    def _patch(self, res: Resource, ns: str | None, name: str, status: bool, user: str) -> dict[str, Any]:
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        accepted = [JSON_PATCH, MERGE, APPLY] if res.custom else [JSON_PATCH, MERGE, STRATEGIC, APPLY]
        if content_type not in accepted or content_type == APPLY:
            # negotiation.NewUnsupportedMediaTypeError: CRDs accept no strategic merge patch
            message = "the body of the request was in an unknown format - accepted media types include: " + ", ".join(accepted)
            raise ApiError(415, "UnsupportedMediaType", message)
        body = self._body()
        if content_type == JSON_PATCH and not isinstance(body, list):
            raise ApiError(400, "BadRequest", "json: cannot unmarshal object into Go value of type jsonpatch.Patch")

        def apply(current: dict[str, Any]) -> dict[str, Any]:
            try:
                patched: dict[str, Any] = json_patch(current, body) if content_type == JSON_PATCH else merge_patch(current, body)
            except PatchError:
                raise patch_not_applicable() from None
            return patched

        return self.server.store.write(res, ns, name, apply, status, user=user, verb="patch")

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
    # socketserver's default listen backlog is 5: concurrent clients on a loaded machine found it full
    # and were reset. kube-apiserver's (Go's net.Listen) is the kernel's somaxconn.
    request_queue_size = 128

    def __init__(
        self,
        token: str,
        store: Store | None = None,
        users: dict[str, str] | None = None,
        rbac_objects: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.token = token
        self.store = store or Store()
        self.users = dict(users or {})  # token -> user name
        self.rbac_objects = rbac_objects  # rendered Roles/bindings: authorize non-admin users (None: allow all)
        self.faults = Faults()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


@contextmanager
def serve(
    token: str = "stand-in-token",
    store: Store | None = None,
    users: dict[str, str] | None = None,
    rbac_objects: list[dict[str, Any]] | None = None,
) -> Iterator[StandIn]:
    """Run a stand-in on a free loopback port in a thread; stopped and closed on exit."""
    server = StandIn(token, store, users, rbac_objects)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="apiserver-stand-in", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.faults.clear()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
