"""Team access to sessions (R-X2): who may do what with a session they do not own.

A token names its principal's teams (`agentd token create --team core`). A session's owner
may share it with one of its own teams, `watch` (read: load, attach, SSE, goal/usage/queue
reads) or `drive` (also prompt, cancel, queue edits, permission answers, mode/config, goal,
compact, rewind, close). Deleting, forking and sharing stay with the owner. Someone with no
access gets the very "not found" a missing session gets (no existence leak); a member whose
access is too low gets PERMISSION_DENIED, naming what it has and what it needs.

A watcher's connection is subscribed through a `WatchSink`: it is sent what the session
shows but never asked anything — no permission questions, no files, no terminal.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from agentd.protocol import ErrorCode, RpcError

if TYPE_CHECKING:
    from agentd.transport.state import Peer


class Access(StrEnum):
    NONE = "none"
    WATCH = "watch"
    DRIVE = "drive"
    OWNER = "owner"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Access.NONE: 0, Access.WATCH: 1, Access.DRIVE: 2, Access.OWNER: 3}


def holder(sink: object) -> tuple[str, frozenset[str]] | None:
    """Who a subscribed sink acts as (principal, teams), if it says."""
    inner = getattr(sink, "_conn", sink)
    principal = getattr(inner, "principal", None)
    teams: frozenset[str] = frozenset(getattr(inner, "teams", ()))
    return (principal, teams) if isinstance(principal, str) else None


def access_of(principal: str, teams: Collection[str], owner: str, shares: Mapping[str, str]) -> Access:
    """The caller's access to a session of `owner` shared as `shares` (team -> access):
    the highest any of its teams has."""
    if principal == owner:
        return Access.OWNER
    best = Access.NONE
    for team in teams:
        level = shares.get(team)
        if level in (Access.WATCH, Access.DRIVE) and Access(level).rank > best.rank:
            best = Access(level)
    return best


def denied(session_id: str, has: Access, needs: Access) -> RpcError:
    if needs is Access.OWNER:
        msg = f"only the owner of session {session_id} may do this (you have {has.value} access)"
    else:
        msg = f"session {session_id} is shared with you to {has.value}; this needs {needs.value} access"
    return RpcError(ErrorCode.PERMISSION_DENIED, msg, {"access": has.value, "needs": needs.value})


class WatchSink:
    """A connection subscribed as a watcher: frames pass, server→client requests do not
    (it has no `request`, so the session never asks it anything)."""

    def __init__(self, conn: Peer) -> None:
        self._conn = conn
        self.id = conn.id

    @property
    def sessions(self) -> set[str]:
        return self._conn.sessions

    def send_notification(self, method: str, params: dict[str, Any]) -> bool:
        return self._conn.send_notification(method, params)

    async def send_replay(self, method: str, params: dict[str, Any]) -> bool:
        return await self._conn.send_replay(method, params)

    def send_encoded(self, text: bytes) -> bool:
        return self._conn.send_encoded(text)

    def send_urgent(self, method: str, params: dict[str, Any]) -> None:
        self._conn.send_urgent(method, params)

    def supports_update(self, session_update: str) -> bool:
        return self._conn.supports_update(session_update)
