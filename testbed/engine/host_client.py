"""The engine host's admin API as its two clients (the tier front, a Serve replica at a PoP) call it.

    entry = await create_replica(session, admin_url, body, timeout_s)   # 201, or 409 adopting the host's entry
    entries = await list_replicas(session, admin_url, timeout_s)

One place for the adoption rule: a 409 that carries the host's entry adopts that replica (a previous
front or Serve replica created it), unless the host reports it ``stopping``: it is still removing an
earlier retire's replica, and adopting it would hold the slot ``stopping`` forever.
"""

from __future__ import annotations

from typing import Any

import aiohttp


class HostRefused(aiohttp.ClientError):
    """The host answered but did not create or hand over the replica; ``retry`` when asking again later can succeed."""

    def __init__(self, message: str, status: int, retry: bool) -> None:
        super().__init__(message)
        self.status = status
        self.retry = retry


async def create_replica(session: aiohttp.ClientSession, admin_url: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """POST ``body`` to ``admin_url``/admin/replicas; the host's entry of the created or adopted replica."""
    async with session.post(f"{admin_url}/admin/replicas", json=body, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
        data = await resp.json(content_type=None)
        if resp.status == 201 and isinstance(data, dict):
            return data
        if resp.status == 409 and isinstance(data, dict) and isinstance(data.get("replica"), dict):
            entry: dict[str, Any] = data["replica"]
            if entry.get("state") == "stopping":
                raise HostRefused(f"{admin_url}: {body.get('id')} is stopping at the host", 409, retry=True)
            return entry
        raise HostRefused(f"{admin_url} refused {body.get('id')}: {resp.status} {data}", resp.status, retry=False)


async def list_replicas(session: aiohttp.ClientSession, admin_url: str, timeout_s: float) -> list[dict[str, Any]]:
    """GET ``admin_url``/admin/replicas: the host's entries (id, state, GPU share, ...)."""
    async with session.get(f"{admin_url}/admin/replicas", timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
        entries: list[dict[str, Any]] = await resp.json(content_type=None)
        return entries
