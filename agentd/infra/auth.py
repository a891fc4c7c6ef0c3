"""Bearer-token auth (R-X1): who a request acts as.

Tokens are random strings shown once at creation (`agentd token create`); the store
keeps only their SHA-256. A request presents one as `Authorization: Bearer <token>`; a
browser, which cannot set headers on a WebSocket or an EventSource, may instead offer
the WebSocket subprotocol `agentd.bearer.<token>` or add `?token=<token>`.

With `AGENTD_AUTH=none` (the default) every caller is the local user — fine on the
loopback interface, refused anywhere else (`insecure_bind`).
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import secrets
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from agentd.infra.config import AuthMode
from agentd.infra.overload import overload_error
from agentd.infra.setting_choices import LOCAL_PRINCIPAL

if TYPE_CHECKING:  # the store (SQLAlchemy's ORM) is not for `insecure_bind` at start-up
    from agentd.store import Store, TokenRecord

TOKEN_PREFIX = "agentd_"
SUBPROTOCOL_PREFIX = "agentd.bearer."
CHALLENGE = {"WWW-Authenticate": "Bearer"}  # headers of every 401


__all__ = [
    "AuthError",
    "AuthMode",
    "AuthUnavailable",
    "Authenticator",
    "Identity",
    "create_token",
    "insecure_bind",
    "team_names",
]

# A team name: what `--team` accepts (it is shown in listings and compared verbatim).
_TEAM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class AuthError(Exception):
    """No usable credentials; the message says what was wrong (never the token)."""


class AuthUnavailable(Exception):
    """The token could not be looked up now — no database connection free in time, or the
    database busy (issue 28 item 7): the caller is told to retry (503 with `Retry-After`),
    never a 500, and never a 401 that would make a client drop a good token."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(max(1, round(self.retry_after)))}


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def bearer_token(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """The token a request presents: header first, then subprotocol, then `?token=`."""
    auth = headers.get("authorization")
    if auth:
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    for proto in (p.strip() for p in headers.get("sec-websocket-protocol", "").split(",")):
        if proto.startswith(SUBPROTOCOL_PREFIX) and len(proto) > len(SUBPROTOCOL_PREFIX):
            return proto[len(SUBPROTOCOL_PREFIX) :]
    return query.get("token") or None


def chosen_subprotocol(headers: Mapping[str, str]) -> str | None:
    """The subprotocol to accept: the client's first one that is not a credential, or
    none. The credential is never echoed: the response header ends up in proxy and
    browser logs. (A browser fails the handshake when it offered protocols and the server
    picks none, so a page offers a real one too: `["acp", "agentd.bearer.<token>"]`.)"""
    offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
    plain = [p for p in offered if not p.startswith(SUBPROTOCOL_PREFIX)]
    return plain[0] if plain else None


def insecure_bind(host: str, mode: AuthMode) -> str | None:
    """Why serving on `host` without auth is refused, or None when it is fine."""
    if mode is not AuthMode.NONE:
        return None
    if host == "localhost":
        return None
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        pass  # a hostname: it may resolve to anything
    return (
        f"refusing to listen on {host} without authentication: anyone who can reach it could "
        "run commands in your workspaces. Set AGENTD_AUTH=token and create a token with "
        "`agentd token create --principal NAME`, or bind to 127.0.0.1."
    )


@dataclass(frozen=True)
class Identity:
    """Who a request acts as, and the hash of the token that said so (None without
    auth): a long-lived connection keeps it to notice when that token is revoked. `teams`
    are the token's (R-X2): the sessions shared with them are open to the request too."""

    principal: str
    token_hash: str | None = None
    teams: frozenset[str] = field(default_factory=frozenset)


class Authenticator:
    def __init__(self, store: Store, mode: AuthMode) -> None:
        self._store = store
        self.mode = mode

    async def identify(self, headers: Mapping[str, str], query: Mapping[str, str]) -> Identity:
        """Who the request acts as; raises AuthError when auth is on and fails."""
        if self.mode is AuthMode.NONE:
            return Identity(LOCAL_PRINCIPAL)
        token = bearer_token(headers, query)
        if token is None:
            raise AuthError("authentication required: send Authorization: Bearer <token>")
        digest = hash_token(token)
        try:
            found = await self._store.identity_for_token(digest)
        except Exception as exc:
            overloaded = overload_error(exc)
            if overloaded is None:
                raise
            retry_after = float((overloaded.data or {}).get("retryAfter", 1.0))
            raise AuthUnavailable(overloaded.message, retry_after) from None
        if found is None:
            raise AuthError("invalid or revoked token")
        principal, teams = found
        return Identity(principal, digest, frozenset(teams))

    async def principal(self, headers: Mapping[str, str], query: Mapping[str, str]) -> str:
        return (await self.identify(headers, query)).principal


def team_names(teams: Iterable[str]) -> tuple[str, ...]:
    """`teams` checked and deduplicated (in order); ValueError names a bad one."""
    out: list[str] = []
    for team in teams:
        if not _TEAM.fullmatch(team):
            raise ValueError(
                f"bad team name {team!r}: letters, digits, '.', '_' and '-', starting with a letter "
                "or digit, at most 64 characters"
            )
        if team not in out:
            out.append(team)
    return tuple(out)


async def create_token(
    store: Store,
    principal: str,
    name: str | None = None,
    teams: Iterable[str] = (),
    expires_in: timedelta | None = None,
) -> tuple[str, TokenRecord]:
    """A new token for `principal`, a member of `teams`, accepted for `expires_in` (None:
    until revoked): (the token itself — shown once — and its record)."""
    checked = team_names(teams)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    expires_at = datetime.now(UTC) + expires_in if expires_in is not None else None
    record = await store.create_token(
        f"tok_{uuid.uuid4().hex[:16]}", principal, name, hash_token(token), checked, expires_at
    )
    return token, record


_DURATION = re.compile(r"(\d+)([smhd])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta:
    """`90s`, `30m`, `12h`, `7d` → the timedelta; ValueError otherwise."""
    m = _DURATION.fullmatch(text.strip())
    if m is None or int(m.group(1)) == 0:
        raise ValueError(f"bad duration {text!r}: a positive number with s, m, h or d (e.g. 12h, 30d)")
    return timedelta(seconds=int(m.group(1)) * _UNIT_S[m.group(2)])
