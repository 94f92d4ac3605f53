"""The two patch formats the apiserver stand-in applies, as kube-apiserver does for custom resources:
JSON merge patch (RFC 7386) and JSON patch (RFC 6902: add, remove, replace, test). Pure functions on
copies; a malformed or failing patch raises ``PatchError`` (the apiserver's 422, or 409 for a
failed ``test``).
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    def __init__(self, message: str, conflict: bool = False) -> None:
        super().__init__(message)
        self.conflict = conflict  # a failed "test": the object is not what the patch expected


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces (lists included)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"JSON pointer {pointer!r} does not start with '/'")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _index(container: list[Any], token: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit():
        raise PatchError(f"{token!r} is not an array index")
    i = int(token)
    if i > len(container) or (i == len(container) and not allow_end):
        raise PatchError(f"index {i} out of range")
    return i


def _parent(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict):
            if token not in node:
                raise PatchError(f"path component {token!r} does not exist")
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, allow_end=False)]
        else:
            raise PatchError(f"path component {token!r} is not inside an object or array")
    return node


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"{last!r} does not exist")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, allow_end=False)]
    raise PatchError(f"{last!r} is not inside an object or array")


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 on a copy of ``target``; the whole patch applies or none of it."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch is an array of operations")
    doc = copy.deepcopy(target)
    for n, op in enumerate(ops):
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"operation {n} needs op and path")
        kind, tokens = op["op"], _tokens(op["path"])
        if kind == "test":
            if _get(doc, tokens) != op.get("value"):
                raise PatchError(f"test failed at {op['path']}", conflict=True)
            continue
        if not tokens:
            if kind in ("add", "replace"):
                doc = copy.deepcopy(op["value"])
                continue
            raise PatchError("cannot remove the whole document")
        parent, last = _parent(doc, tokens), tokens[-1]
        if kind == "add":
            if isinstance(parent, list):
                parent.insert(_index(parent, last, allow_end=True), copy.deepcopy(op["value"]))
            else:
                parent[last] = copy.deepcopy(op["value"])
        elif kind == "replace":
            _get(doc, tokens)  # must exist
            if isinstance(parent, list):
                parent[_index(parent, last, allow_end=False)] = copy.deepcopy(op["value"])
            else:
                parent[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            _get(doc, tokens)
            if isinstance(parent, list):
                del parent[_index(parent, last, allow_end=False)]
            else:
                del parent[last]
        else:
            raise PatchError(f"operation {n}: unsupported op {kind!r} (add, remove, replace, test)")
    return doc
