"""The kube-apiserver stand-in's vocabulary (``deploy/apiserver.py``): the resources it serves, the
calls and writes it logs, and its errors answered as kube-apiserver's ``metav1.Status`` (the messages
and details as ``k8s.io/apimachinery/pkg/api/errors`` builds them; checked against the captured
responses in ``tests/fixtures/kube-apiserver/``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ADMIN = "system:admin"  # the user of the admin token (kube-apiserver's system:masters)


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

    @property
    def qualified(self) -> str:
        """``schema.GroupResource.String()``: ``plural.group``, or ``plural`` for the core group."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


@dataclass(frozen=True)
class Call:
    verb: str
    group: str
    resource: str  # plural, or "plural/status"
    namespace: str | None
    name: str | None = None
    user: str = ADMIN
    code: int = 0  # the answer's status code (0 until answered)


@dataclass(frozen=True)
class Write:
    """A write that took effect, in the order the store applied them."""

    seq: int
    user: str
    verb: str
    group: str
    resource: str
    namespace: str | None
    name: str
    obj: dict[str, Any]  # the object after the write


class ApiError(Exception):
    """A failed request, answered as kube-apiserver's ``metav1.Status``."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": self.message}
        if self.reason:
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def status_details(res: Resource, name: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if name:
        out["name"] = name
    if res.group:
        out["group"] = res.group
    out["kind"] = res.plural
    return out


def not_found(res: Resource, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{res.qualified} "{name}" not found', status_details(res, name))


def already_exists(res: Resource, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{res.qualified} "{name}" already exists', status_details(res, name))


def conflict(res: Resource, name: str) -> ApiError:
    msg = (
        f'Operation cannot be fulfilled on {res.qualified} "{name}": the object has been modified;'
        " please apply your changes to the latest version and try again"
    )
    return ApiError(409, "Conflict", msg, status_details(res, name))


def invalid(res: Resource, name: str, field_path: str, detail: str) -> ApiError:
    """``apierrors.NewInvalid``: the kind (not the plural) qualifies the message and the details."""
    qualified = f"{res.kind}.{res.group}" if res.group else res.kind
    cause = {"reason": "FieldValueInvalid", "message": f"Invalid value: {detail}", "field": field_path}
    details: dict[str, Any] = {"name": name, **({"group": res.group} if res.group else {}), "kind": res.kind, "causes": [cause]}
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {field_path}: Invalid value: {detail}', details)


def patch_not_applicable() -> ApiError:
    # patch.go: a JSON patch that cannot be applied is NewGenericServerResponse(422, "", GroupResource{}, "", err, 0, false),
    # whose message is fixed and whose details are empty (the server drops the patch library's text).
    return ApiError(422, "Invalid", "the server rejected our request due to an error in our request", {})
