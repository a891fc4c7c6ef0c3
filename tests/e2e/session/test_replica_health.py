"""What a replica tells its operator (R-C1, issue 15 item 6): `/readyz` names the replica and
reports its session leases (owned, renewals, failures, losses), and is not ready while its
lease renewals fail; `/metrics` carries the same figures labelled with the replica id. A
lease is lost for real (another owner written into the lease row, as a replica taking the
session over does) and renewals fail for real (the lease table locked away from them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.support.databases import postgres_database
from tests.support.metrics import scrape
from tests.support.polling import until, value_of
from tests.support.server import scripted

pytestmark = pytest.mark.timeout(120)


def _dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


async def readyz(base_url: str) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        resp = await http.get("/readyz")
    return resp.status_code, resp.json()


async def _new_session(server: Any, workspace: Path) -> tuple[Any, str]:
    client = await server.client()
    sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
    return client, sid


async def test_readyz_names_the_replica_and_its_leases(server_factory, db_url: str, workspace: Path) -> None:
    postgres = db_url.startswith("postgresql")
    async with server_factory(
        scripted({"text": "ok"}), database_url=db_url, replica_id="replica-r", lease_ttl_s=3.0
    ) as server:
        status, body = await readyz(server.base_url)
        assert status == 200 and body["status"] == "ok", body
        assert body["replica"] == "replica-r"
        if not postgres:  # one process owns every session: nothing to renew
            assert body["leases"] == {"mode": "single_process", "healthy": True}
            metrics = await scrape(server.base_url)
            info = ("agentd_replica_info", (("leases", "single_process"), ("replica", "replica-r")))
            assert metrics[info] == 1
            assert not any(name.startswith("agentd_lease_") for name, _ in metrics)
            return
        assert body["leases"]["mode"] == "postgres" and body["leases"]["owned"] == 0
        client, _sid = await _new_session(server, workspace)
        _, body = await readyz(server.base_url)
        assert body["leases"]["owned"] == 1

        async def renewed() -> dict[str, Any] | None:
            status, body = await readyz(server.base_url)
            return body if status == 200 and body["leases"]["renewals"] >= 1 else None

        body = await value_of(renewed, what="a lease renewal")
        leases = body["leases"]
        assert leases["healthy"] and leases["consecutiveFailures"] == 0 and leases["lost"] == 0
        assert leases["ttlS"] == 3.0 and 0 <= leases["lastRenewalAgeS"] <= 3.0
        await client.close()


async def test_a_lost_lease_is_counted_per_replica_in_the_metrics(server_factory, workspace: Path) -> None:
    async with postgres_database() as url:
        async with server_factory(
            # A lease long enough that a loaded machine never runs it out by the replica's
            # own clock first: the loss counted is the renewal finding the newer token.
            scripted({"text": "ok"}),
            database_url=url,
            replica_id="replica-m",
            lease_ttl_s=10.0,
        ) as server:
            client, sid = await _new_session(server, workspace)
            before = await scrape(server.base_url)
            replica = (("replica", "replica-m"),)
            assert before[("agentd_replica_info", (("leases", "postgres"), *replica))] == 1
            assert before[("agentd_lease_owned_sessions", replica)] == 1
            assert before.get(("agentd_lease_losses_total", replica)) == 0

            # Another replica takes the session over (a newer token, a live lease).
            conn = await asyncpg.connect(_dsn(url))
            try:
                await conn.execute(
                    "UPDATE session_leases SET owner = 'replica-x', token = token + 1, "
                    "expires_at = now() + interval '1 hour' WHERE session_id = $1",
                    sid,
                )
            finally:
                await conn.close()

            async def lost() -> dict[Any, float] | None:
                got = await scrape(server.base_url)
                return got if got[("agentd_lease_losses_total", replica)] > 0 else None

            after = await value_of(lost, what="the renewal finding the lease gone")
            assert after[("agentd_lease_losses_total", replica)] == 1
            assert after[("agentd_lease_owned_sessions", replica)] == 0
            assert after[("agentd_lease_renewals_total", replica)] >= 1  # the round that found it gone
            assert after[("agentd_lease_healthy", replica)] == 1  # a loss is no failing renewer
            status, body = await readyz(server.base_url)
            assert status == 200 and body["leases"]["lost"] == 1 and body["leases"]["owned"] == 0
            await client.close()


async def test_a_replica_whose_renewals_fail_is_not_ready_until_they_succeed(
    server_factory, workspace: Path
) -> None:
    async with postgres_database() as url:
        async with server_factory(
            scripted({"text": "ok"}), database_url=url, replica_id="replica-f", lease_ttl_s=1.5
        ) as server:
            client, _sid = await _new_session(server, workspace)
            await until(lambda: _ready(server.base_url), what="ready")
            # The lease table locked away: every renewal round times out (ttl/3).
            locker = await asyncpg.connect(_dsn(url))
            try:
                tx = locker.transaction()
                await tx.start()
                await locker.execute("LOCK TABLE session_leases IN ACCESS EXCLUSIVE MODE")

                async def failing() -> dict[str, Any] | None:
                    status, body = await readyz(server.base_url)
                    return body if status == 503 and body["leases"]["consecutiveFailures"] >= 2 else None

                body = await value_of(failing, what="readyz to report failing renewals")
                assert body["status"] == "unavailable" and body["database"] == "ok", body
                assert body["replica"] == "replica-f"
                assert body["leases"]["healthy"] is False
                assert "lease renewals failing" in body["detail"]
                metrics = await scrape(server.base_url)
                assert metrics[("agentd_lease_healthy", (("replica", "replica-f"),))] == 0
                assert metrics[("agentd_lease_renewal_failures_total", (("replica", "replica-f"),))] >= 2
                await tx.rollback()
            finally:
                await locker.close()
            await until(lambda: _ready(server.base_url), what="ready again once renewals go through")
            _, body = await readyz(server.base_url)
            assert body["leases"]["consecutiveFailures"] == 0 and body["leases"]["renewalFailures"] >= 2
            await client.close()


async def _ready(base_url: str) -> bool:
    status, _ = await readyz(base_url)
    return status == 200
