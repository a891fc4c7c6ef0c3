"""The lean transport closes kept-alive connections once idle past the keep-alive expiry,
on a timer of its own, not only when their origin is called again (issue 32 item 3: after a
load they stayed for the server's life and pinned the memory the load had used)."""

from __future__ import annotations

import httpx

from agentd.providers.http.common import default_ssl_context
from agentd.providers.http.conn import Connection
from agentd.providers.http.lean import LeanTransport

EXPIRY = 4.0
A, B = ("http", "a.test", 80), ("http", "b.test", 80)


def transport() -> LeanTransport:
    limits = httpx.Limits(max_connections=10, max_keepalive_connections=10, keepalive_expiry=EXPIRY)
    return LeanTransport(default_ssl_context(), limits)


async def kept(t: LeanTransport, key: tuple[str, str, int], idle_since: float) -> Connection:
    """A connection handed back after its exchange, idle since `idle_since` (monotonic)."""
    await t._slots.acquire()
    t.active += 1
    conn = Connection(key)
    t._finished(conn, reuse=True)
    conn.idle_since = idle_since
    return conn


async def test_expired_connections_are_closed_and_their_origin_forgotten() -> None:
    t = transport()
    old_a, fresh_a = await kept(t, A, 100.0), await kept(t, A, 103.0)
    old_b = await kept(t, B, 101.0)
    assert t.close_expired(105.0) == 103.0 + EXPIRY  # when the one left expires
    assert old_a.closed and old_b.closed and not fresh_a.closed
    assert t._idle == {A: [fresh_a]} and t.idle_count == 1
    assert t.close_expired(107.0) is None
    assert fresh_a.closed and t._idle == {} and t.idle_count == 0
    await t.aclose()


async def test_a_connection_the_server_closed_goes_at_the_sweep() -> None:
    t = transport()
    conn = await kept(t, A, 100.0)
    conn.connection_lost(None)
    assert t.close_expired(100.5) is None and t._idle == {} and t.idle_count == 0
    await t.aclose()


async def test_one_timer_for_the_pool_sweeps_and_rearms_while_any_is_left() -> None:
    t = transport()
    assert t._sweep is None
    first = await kept(t, A, 0.0)  # long expired by the time the timer fires
    timer = t._sweep
    assert timer is not None
    second = await kept(t, A, 1e12)  # idle "forever from now": still kept at the sweep
    assert t._sweep is timer  # not one timer per connection
    t._swept()  # what the timer runs
    assert first.closed and not second.closed and t.idle_count == 1
    assert t._sweep is not None and t._sweep is not timer  # re-armed for the one left
    second.idle_since = 0.0
    t._swept()
    assert second.closed and t._sweep is None and t._idle == {}


async def test_closing_the_transport_cancels_its_timer() -> None:
    t = transport()
    await kept(t, A, 0.0)
    timer = t._sweep
    assert timer is not None
    await t.aclose()
    assert t._sweep is None and timer.cancelled()
