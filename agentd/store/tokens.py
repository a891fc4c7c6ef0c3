"""API tokens (R-X1): each stored as its hash with its principal and teams, revoked by
setting `revoked_at`. The `Store` inherits these queries (db.py)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, insert, or_, select, update

from agentd.store.aio import AsyncEngine
from agentd.store.models import ApiTokenRow, utcnow
from agentd.store.records import TokenRecord, utc


def _live() -> ColumnElement[bool]:
    """Not revoked and not expired (on this process's clock, as `revoked_at` is written)."""
    return ApiTokenRow.revoked_at.is_(None) & or_(
        ApiTokenRow.expires_at.is_(None), ApiTokenRow.expires_at > utcnow()
    )


class ApiTokens:
    engine: AsyncEngine

    async def create_token(
        self,
        id: str,
        principal: str,
        name: str | None,
        token_hash: str,
        teams: Sequence[str] = (),
        expires_at: datetime | None = None,
    ) -> TokenRecord:
        now = utcnow()
        async with self.engine.begin() as conn:
            await conn.execute(
                insert(ApiTokenRow).values(
                    id=id,
                    principal=principal,
                    name=name,
                    token_hash=token_hash,
                    created_at=now,
                    teams=list(teams) or None,
                    expires_at=expires_at,
                )
            )
        return TokenRecord(id, principal, name, now, None, tuple(teams), expires_at)

    async def identity_for_token(self, token_hash: str) -> tuple[str, tuple[str, ...]] | None:
        """The principal and teams of a live (not revoked, not expired) token with this hash."""
        q = select(ApiTokenRow.principal, ApiTokenRow.teams).where(
            ApiTokenRow.token_hash == token_hash, _live()
        )
        async with self.engine.connect() as conn:
            row = (await conn.execute(q)).first()
        return None if row is None else (row.principal, tuple(row.teams or ()))

    async def principal_for_token(self, token_hash: str) -> str | None:
        """The principal of a live (not revoked, not expired) token with this hash."""
        q = select(ApiTokenRow.principal).where(ApiTokenRow.token_hash == token_hash, _live())
        async with self.engine.connect() as conn:
            return (await conn.execute(q)).scalar()

    async def live_token_hashes(self, token_hashes: Collection[str]) -> set[str]:
        """Those of `token_hashes` that still exist, are not revoked and not expired (one query)."""
        if not token_hashes:
            return set()
        q = select(ApiTokenRow.token_hash).where(ApiTokenRow.token_hash.in_(list(token_hashes)), _live())
        async with self.engine.connect() as conn:
            return set((await conn.execute(q)).scalars())

    async def list_tokens(self) -> list[TokenRecord]:
        q = select(ApiTokenRow).order_by(ApiTokenRow.created_at)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(q)).all()
        return [
            TokenRecord(
                r.id,
                r.principal,
                r.name,
                utc(r.created_at),
                utc(r.revoked_at) if r.revoked_at else None,
                tuple(r.teams or ()),
                utc(r.expires_at) if r.expires_at else None,
            )
            for r in rows
        ]

    async def revoke_token(self, id: str) -> bool:
        """False when there is no such live token."""
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(ApiTokenRow)
                .where(ApiTokenRow.id == id, ApiTokenRow.revoked_at.is_(None))
                .values(revoked_at=utcnow())
            )
        return bool(result.rowcount)
