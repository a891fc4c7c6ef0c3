"""The lease keeper's own logic (R-C1), without a database: which sessions a renewal
loses, our own clock when the database cannot be reached, the replica id kept in the home
directory. The SQL itself runs against Postgres in tests/unit/store/test_fencing.py."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from agentd.session.errors import SessionError, SessionErrorKind
from agentd.session.replicas import leases as session_leases
from agentd.session.replicas.health import LeaseMode
from agentd.session.replicas.identity import home_replica_id
from agentd.session.replicas.leases import PostgresLeases, SessionLeases
from agentd.store import leases as store_leases
from tests.support.polling import until


class _Engine:
    async def dispose(self) -> None:
        return None


@pytest.fixture
def db(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A stand-in for the lease table: session → (owner, token); `down` fails every call."""

    async def no_wait() -> None:
        return None

    # `pool_wait`: what acquiring waits before it has a connection
    state: dict[str, Any] = {"rows": {}, "down": False, "pool_wait": no_wait}

    async def acquire(
        _e: Any, sid: str, owner: str, _ttl: float, _wait: float, *, connected: Any = None
    ) -> int | store_leases.Holder:
        await state["pool_wait"]()
        if connected is not None:
            connected()
        holder, token = state["rows"].get(sid, (None, 0))
        if holder not in (None, owner):
            return store_leases.Holder(holder, 5.0)
        state["rows"][sid] = (owner, token + 1)
        return int(token + 1)

    async def renew(_e: Any, owner: str, tokens: dict[str, int], _ttl: float) -> set[str]:
        if state["down"]:
            raise ConnectionError("database unreachable")
        return {s for s, t in tokens.items() if state["rows"].get(s) == (owner, t)}

    async def ping(_e: Any) -> None:
        if state["down"]:
            raise ConnectionError("database unreachable")

    monkeypatch.setattr(store_leases, "acquire", acquire)
    monkeypatch.setattr(store_leases, "renew", renew)
    monkeypatch.setattr(store_leases, "ping", ping)
    monkeypatch.setattr(store_leases, "renewal_engine", lambda *_a: _Engine())
    return state


async def test_a_session_taken_over_is_lost_and_reported(db: dict[str, Any]) -> None:
    keeper = PostgresLeases(_Engine(), "A", ttl_s=9.0)
    lost: list[str] = []
    keeper._on_lost = lost.append
    await keeper.acquire("s1")
    await keeper.acquire("s2")
    assert keeper.fences == {"s1": 1, "s2": 1}
    db["rows"]["s2"] = ("B", 2)  # B took s2 over
    assert await keeper.renew() == ["s2"]
    assert lost == ["s2"] and keeper.fences == {"s1": 1}  # no more writes stamped for s2
    with pytest.raises(SessionError) as err:
        await keeper.acquire("s2")
    assert err.value.kind is SessionErrorKind.OWNED_ELSEWHERE
    assert err.value.data is not None and err.value.data["owner"] == "B"


async def test_a_holder_seen_is_remembered_until_its_lease_ends_and_forgotten_when_gone(
    db: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A non-owner asks the database once per lease seen, not once per routed command."""
    asked: list[str] = []
    acquire = store_leases.acquire

    async def counting(*args: Any, **kw: Any) -> int | store_leases.Holder | None:
        asked.append(args[1])
        return await acquire(*args, **kw)

    monkeypatch.setattr(store_leases, "acquire", counting)
    db["rows"]["s1"] = ("B", 1)  # B holds it (5 s left, as the stand-in says)
    keeper = PostgresLeases(_Engine(), "A", ttl_s=9.0)
    for _ in range(3):
        with pytest.raises(SessionError) as err:
            await keeper.acquire("s1")
        assert err.value.data is not None and err.value.data["owner"] == "B"
    assert asked == ["s1"]  # remembered
    keeper.forget_holder("s1")  # the router found B gone: ask again
    db["rows"]["s1"] = (None, 1)  # (its lease ran out)
    await keeper.acquire("s1")
    assert asked == ["s1", "s1"] and keeper.fences == {"s1": 2}


async def test_an_owner_says_how_long_it_holds_and_a_caller_takes_its_word_for_that_long(
    db: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner's `held_for` is its own view of the lease (none for a session it does not
    hold); a caller told so (`held_elsewhere`) refuses the session as the owner's until then
    without asking the database, and asks again afterwards (issue 26 item 5)."""
    asked: list[str] = []
    acquire = store_leases.acquire

    async def counting(*args: Any, **kw: Any) -> int | store_leases.Holder | None:
        asked.append(args[1])
        return await acquire(*args, **kw)

    monkeypatch.setattr(store_leases, "acquire", counting)
    loop = asyncio.get_running_loop()
    owner = PostgresLeases(_Engine(), "B", ttl_s=9.0)
    assert owner.held_for("s1") is None
    await owner.acquire("s1")
    left = owner.held_for("s1")
    assert left is not None and 8.0 < left <= 9.0
    owner.release("s1")
    assert owner.held_for("s1") is None
    caller = PostgresLeases(_Engine(), "A", ttl_s=9.0)
    caller.held_elsewhere("s1", "B", loop.time() + 0.2)
    with pytest.raises(SessionError) as err:
        await caller.acquire("s1")
    assert err.value.data is not None and err.value.data["owner"] == "B"
    assert asked == ["s1"]  # (the owner's own acquisition only)
    await until(lambda: loop.time() > caller._holders["s1"][1], what="the owner's word ran out")
    db["rows"]["s1"] = ("B", 1)
    with pytest.raises(SessionError):
        await caller.acquire("s1")
    assert asked == ["s1", "s1"]  # asked the database again
    caller.fences["s2"] = 1  # a session the caller holds itself is never taken as another's
    caller.held_elsewhere("s2", "B", loop.time() + 60)
    assert "s2" not in caller._holders


async def test_unreachable_database_loses_leases_only_once_they_ran_out(
    db: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    keeper = PostgresLeases(_Engine(), "A", ttl_s=9.0)
    lost: list[str] = []
    keeper._on_lost = lost.append
    await keeper.acquire("s1")
    db["down"] = True
    assert await keeper.renew() == []  # still within its lease by our own clock
    assert keeper.fences == {"s1": 1}
    keeper._valid_until["s1"] = 0.0  # ...and now it has run out
    assert await keeper.renew() == ["s1"]
    assert lost == ["s1"] and keeper.fences == {}


async def test_health_counts_losses_once_and_turns_unready_after_two_failed_rounds(
    db: dict[str, Any],
) -> None:
    keeper = PostgresLeases(_Engine(), "A", ttl_s=9.0)
    keeper._on_lost = lambda _s: None
    await keeper.acquire("s1")
    await keeper.acquire("s2")
    first = keeper.health()
    assert (first.replica_id, first.mode, first.owned, first.healthy) == ("A", LeaseMode.POSTGRES, 2, True)
    assert first.last_renewal_age_s is None  # no round yet
    # s1: a write refused for its stale token, then the renewal finds it gone: one loss.
    keeper.fenced_out("s1")
    keeper.fenced_out("s1")
    db["rows"]["s1"] = ("B", 2)
    assert await keeper.renew() == ["s1"]
    h = keeper.health()
    assert (h.lost, h.owned, h.renewals, h.healthy) == (1, 1, 1, True)
    assert h.last_renewal_age_s is not None and h.last_renewal_age_s >= 0
    db["down"] = True
    await keeper.renew()
    assert keeper.health().healthy and keeper.health().consecutive_failures == 1  # one more to go
    await keeper.renew()
    h = keeper.health()
    assert not h.healthy and h.consecutive_failures == 2 and "2 in a row" in h.detail
    assert h.as_json()["healthy"] is False and h.as_json()["renewalFailures"] == 2
    db["down"] = False
    await keeper.renew()
    h = keeper.health()
    assert h.healthy and h.consecutive_failures == 0 and h.renewal_failures == 2


async def test_health_without_leases_still_checks_the_connection(db: dict[str, Any]) -> None:
    keeper = PostgresLeases(_Engine(), "A", ttl_s=9.0)
    db["down"] = True
    for _ in range(2):
        assert await keeper.renew() == []
    assert not keeper.health().healthy and keeper.health().owned == 0
    db["down"] = False
    await keeper.renew()
    assert keeper.health().healthy


async def test_a_renewer_with_no_round_ended_for_a_lease_time_is_unhealthy(db: dict[str, Any]) -> None:
    keeper = PostgresLeases(_Engine(), "A", ttl_s=9.0)
    await keeper.renew()
    assert keeper.health().healthy
    keeper._last_round = time.monotonic() - 10  # stuck in a round (or not scheduled) for 10 s
    h = keeper.health()
    assert not h.healthy and "no lease renewal round ended" in h.detail


def test_one_process_reports_its_replica_and_no_leases() -> None:
    h = SessionLeases("solo").health()
    assert (h.replica_id, h.mode, h.healthy) == ("solo", LeaseMode.SINGLE_PROCESS, True)
    assert h.as_json() == {"mode": "single_process", "healthy": True}
    assert SessionLeases().replica_id  # hostname-pid-random when not configured


async def test_a_release_forgets_the_token_at_once(
    db: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    released: list[dict[str, int]] = []

    async def release_many(_e: Any, _owner: str, tokens: dict[str, int]) -> None:
        released.append(tokens)

    monkeypatch.setattr(store_leases, "release_many", release_many)
    keeper = PostgresLeases(_Engine(), "A", ttl_s=9.0)
    await keeper.acquire("s1")
    keeper.release("s1")
    assert keeper.fences == {}
    await keeper.stop()
    assert released == [{"s1": 1}]


async def test_sessions_released_at_once_go_out_in_one_statement(
    db: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32 item 4: a server stopping after a 1,000-session burst released each lease
    on its own, queued on the renewals' two connections; most waited past the pool's
    timeout ("releasing its lease failed") and stayed held for a whole lease time."""
    statements: list[dict[str, int]] = []

    async def release_many(_e: Any, _owner: str, tokens: dict[str, int]) -> None:
        statements.append(dict(tokens))

    monkeypatch.setattr(store_leases, "release_many", release_many)
    keeper = PostgresLeases(_Engine(), "A", ttl_s=9.0)
    sids = [f"s{i}" for i in range(1000)]
    for sid in sids:
        await keeper.acquire(sid)
    for sid in sids:
        keeper.release(sid)
    await keeper.stop()
    assert statements == [dict.fromkeys(sids, 1)]


async def test_without_leases_everything_is_ours() -> None:
    keeper = SessionLeases()
    await keeper.acquire("s1")
    keeper.release("s1")
    assert keeper.fences == {}
    assert type(session_leases.session_leases(None, postgres=False, replica_id="", ttl_s=1, home=Path())) is (
        SessionLeases
    )


def test_the_replica_id_is_kept_in_the_home_and_never_shared_by_live_processes(tmp_path: Path) -> None:
    first, lock = home_replica_id(tmp_path)
    assert lock is not None and first
    second, other = home_replica_id(tmp_path)  # a second live holder: an id of its own
    assert other is None and second != first
    lock.close()  # the first process ended (even by kill -9: the kernel drops the lock)
    again, lock = home_replica_id(tmp_path)
    assert again == first
    assert lock is not None
    lock.close()


async def test_a_lease_past_its_end_is_lost_at_once_while_the_renewal_hangs(
    db: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26 item 2: the renewal statement hangs (a dead connection): the lease is
    dropped by this process's own clock when it ends, not when the statement gives up."""
    never = asyncio.Event()

    async def hung(*_a: Any) -> set[str]:
        await never.wait()
        return set()

    monkeypatch.setattr(store_leases, "renew", hung)
    keeper = PostgresLeases(_Engine(), "A", ttl_s=0.6)
    lost: list[str] = []
    await keeper.acquire("s1")
    keeper.start(lost.append)
    try:
        await until(lambda: lost == ["s1"], what="the lease lost at its end")
        assert keeper.fences == {} and keeper.health().lost == 1
    finally:
        await keeper.stop()


async def test_a_renewal_that_comes_too_late_loses_the_lease_whatever_the_database_says(
    db: dict[str, Any],
) -> None:
    """The process was paused (SIGSTOP) or starved past its lease: even though nobody took
    the session and the database would renew it, its clients are told (`lease_lost`)."""
    keeper = PostgresLeases(_Engine(), "A", ttl_s=9.0)
    lost: list[str] = []
    keeper._on_lost = lost.append
    await keeper.acquire("s1")
    await keeper.acquire("s2")
    # It ran out (and the grace for a merely busy machine too) while the process was paused.
    keeper._valid_until["s1"] = asyncio.get_running_loop().time() - session_leases.LATE_GRACE_S - 0.1
    assert await keeper.renew() == ["s1"]
    assert lost == ["s1"] and keeper.fences == {"s2": 1} and keeper.health().lost == 1


async def test_a_lease_acquired_after_a_long_wait_for_a_connection_runs_from_the_connection(
    db: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32 item 4: in a burst, `session/new` waits for a pooled connection up to its
    deadline, longer than a lease lasts. The lease starts with the statement (the
    database's `now()`), so by our own clock it runs from when the connection was ours —
    not from when we asked for one, which would drop the new session at once."""
    monkeypatch.setattr(session_leases, "LATE_GRACE_S", 0.05)
    ttl = 0.2

    async def longer_than_a_lease() -> None:
        await asyncio.sleep(ttl + 0.1)  # the burst ahead of it holds every connection

    db["pool_wait"] = longer_than_a_lease
    keeper = PostgresLeases(_Engine(), "A", ttl_s=ttl)
    lost: list[str] = []
    keeper._on_lost = lost.append
    await keeper.acquire("s1")
    assert keeper.expire_overdue() == []
    assert lost == [] and keeper.fences == {"s1": 1}


async def test_a_renewal_is_not_held_back_by_a_burst_that_saturates_the_servers_loop(
    db: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32 item 4: 1,000 sessions at once kept the server's loop so busy that each step
    of a renewal statement (checkout, BEGIN, UPDATE, COMMIT) waited its turn behind them,
    past the lease, and every session was dropped. Once started, the renewals' statements
    run on a loop of their own: the renewal ends within a few turns of the server's loop,
    however many steps its statement takes."""
    steps = 50
    renew = store_leases.renew

    async def many_steps(*args: Any) -> set[str]:
        for _ in range(steps):  # a statement's round trips, each a turn of the loop it runs on
            await asyncio.sleep(0)
        return await renew(*args)

    monkeypatch.setattr(store_leases, "renew", many_steps)
    keeper = PostgresLeases(_Engine(), "A", ttl_s=9.0)  # no round of its own during the test
    await keeper.acquire("s1")
    keeper.start(lambda _s: None)
    turns, renewed = 0, asyncio.Event()

    async def burst() -> None:  # one turn of the server's loop per pass, each a while long
        nonlocal turns
        while not renewed.is_set():
            turns += 1
            time.sleep(0.02)  # noqa: ASYNC251 - the burst's own work, blocking the loop (the GIL is free)
            await asyncio.sleep(0)

    hog = asyncio.create_task(burst())
    try:
        await asyncio.sleep(0)  # the burst is running
        assert await keeper.renew() == []
        renewed.set()
        assert turns < steps // 5, turns  # on the server's loop it would take `steps` turns
        assert keeper.fences == {"s1": 1}
    finally:
        renewed.set()
        await hog
        await keeper.stop()
