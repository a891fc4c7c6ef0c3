"""When an idle session actor is unloaded (R-S5; issue 32 item 3): a pure decision.

An actor is idle when it has no client, no queued or running turn, no pending permission
and no running background child (`SessionActor.idle_since`). One that holds nothing else
is cheap to bring back — its next request reloads it from the store — so it goes after
the short `detached_evict_s`: after a load, the memory of the sessions whose clients left
returns within a minute instead of ten. One that keeps processes (a background shell
task, MCP servers) waits the long `idle_evict_s`: unloading it stops them.
"""

from __future__ import annotations


def eviction_grace(*, keeps_processes: bool, idle_evict_s: float, detached_evict_s: float) -> float:
    """Seconds an idle actor stays loaded. The short grace never exceeds the long one."""
    return idle_evict_s if keeps_processes else min(detached_evict_s, idle_evict_s)


def evictable(
    idle_since: float | None,
    now: float,
    *,
    keeps_processes: bool,
    idle_evict_s: float,
    detached_evict_s: float,
) -> bool:
    """Whether an actor idle since `idle_since` (None: not idle) is unloaded at `now`."""
    if idle_since is None:
        return False
    grace = eviction_grace(
        keeps_processes=keeps_processes, idle_evict_s=idle_evict_s, detached_evict_s=detached_evict_s
    )
    # Compared as a deadline, not as an elapsed time: `now - idle_since` can come out one
    # float ulp short of `grace` at the very instant `idle_since + grace`.
    return now >= idle_since + grace
