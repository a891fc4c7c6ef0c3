"""The routed-vs-direct rounds of bench/replicas.py (issue 26 item 5): `clients` sessions owned
by a cluster's first replica, each prompted at once by its own client — on the owner (direct)
and through the second replica (routed) — with the latency and the CPU per prompt of every
process (the replicas, the database's backends, this client) for each kind."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from proc_cpu import CpuSplit, per_prompt_ms
from turnkit import pct

from tests.support.client import WsClient, text_prompt

if TYPE_CHECKING:
    from replicas import Cluster


LIVE: dict[str, list[int]] = {}  # kind → [prompts whose client got streamed text, prompts]


def _streamed(client: WsClient, sid: str) -> bool:
    """Whether the client got any of the answer's text as it streamed (a chunk that is not
    the message's whole text sent with its end)."""
    for f in client.frames:
        params = f.get("params") if isinstance(f, dict) and "id" not in f else None
        if not isinstance(params, dict) or params.get("sessionId") != sid:
            continue
        update = params.get("update") or {}
        final = ((params.get("_meta") or {}).get("agentd") or {}).get("final")
        if update.get("sessionUpdate") == "agent_message_chunk" and not final:
            return True
    return False


async def _timed_prompt(client: WsClient, sid: str, start: asyncio.Barrier, kind: str) -> float | str:
    """Seconds to the prompt's answer, or its error code (as text)."""
    await start.wait()
    t0 = time.perf_counter()
    resp = await client.request("session/prompt", text_prompt(sid, "hi"))
    elapsed = time.perf_counter() - t0
    counts = LIVE.setdefault(kind, [0, 0])
    counts[0] += _streamed(client, sid)
    counts[1] += 1
    client.frames.clear()
    while not client.notifications.empty():  # bounded: the figures need no updates
        client.notifications.get_nowait()
    return str(resp["error"].get("code")) if "error" in resp else elapsed


async def _round(pairs: list[tuple[WsClient, str]], kind: str = "") -> tuple[list[float], list[str]]:
    start = asyncio.Barrier(len(pairs))
    results = await asyncio.gather(*(_timed_prompt(client, sid, start, kind) for client, sid in pairs))
    return [r for r in results if isinstance(r, float)], [r for r in results if isinstance(r, str)]


Pairs = list[tuple[WsClient, str]]
KINDS = ("direct", "routed")


async def _comparison_clients(c: Cluster, clients: int) -> tuple[Pairs, Pairs]:
    """`clients` sessions owned by the cluster's first replica, each with a client on it
    (direct) and one on the second replica (routed)."""
    owner_replica, other = c.live[0], c.live[1]
    direct: Pairs = []
    for start in range(0, clients, 50):  # created a few at a time
        direct += await asyncio.gather(
            *(c.new_session(owner_replica) for _ in range(start, min(clients, start + 50)))
        )
    routed: Pairs = []
    for start in range(0, clients, 50):
        more = await asyncio.gather(
            *(WsClient.connect(other.base) for _ in range(start, min(clients, start + 50)))
        )
        routed += [(client, sid) for client, (_, sid) in zip(more, direct[start : start + 50], strict=True)]
    return direct, routed


async def routed_vs_direct(
    c: Cluster, clients: int, rounds: int, baseline: Cluster | None = None, kinds: tuple[str, ...] = KINDS
) -> list[str]:
    """`clients` sessions owned by the first replica, each prompted at once by its own
    client: on the owner (direct) and through the second replica (routed), round after
    round alternately, side by side in one run; p50/p99 of each and the p50 ratio. With a
    `baseline` cluster, its rounds alternate with these: one line per cluster."""
    LIVE.clear()
    setups = [await _comparison_clients(c, clients)]
    if baseline is not None:
        setups.append(await _comparison_clients(baseline, clients))
    try:
        # Warm-up, every client once: the actors, the routing rows, and each routed client's
        # watch of its session (its first prompt through a replica not yet watching the
        # session subscribes it there: a set-up cost, as an attach is, printed on its own;
        # the direct clients are already attached, having created their sessions).
        first: list[list[float]] = []
        for direct, routed in setups:
            await _round(direct)
            first.append((await _round(routed))[0] if "routed" in kinds else [])
        times: list[dict[str, list[float]]] = [{"direct": [], "routed": []} for _ in setups]
        errors: list[dict[str, list[str]]] = [{"direct": [], "routed": []} for _ in setups]
        # CPU per process per kind (the replicas, the database's backends, this client)
        cpu: list[dict[str, dict[str, float]]] = [{"direct": {}, "routed": {}} for _ in setups]
        splits = [_cpu_split(cl) for cl in [c, baseline] if cl is not None]
        for _ in range(rounds):
            for i, (direct, routed) in enumerate(setups):
                for kind, pairs in (("direct", direct), ("routed", routed)):
                    if kind not in kinds:
                        continue
                    splits[i].start()
                    ok, failed = await _round(pairs, f"{i}:{kind}")
                    for name, s in splits[i].stop().items():
                        cpu[i][kind][name] = cpu[i][kind].get(name, 0.0) + s
                    times[i][kind] += ok
                    errors[i][kind] += failed
        return [
            _figures(clients, t, e)
            + "".join(f"\n  CPU per {k} prompt: {per_prompt_ms(u[k], len(t[k]))}" for k in kinds)
            + "\n  prompts whose client saw the answer stream (live text): "
            + ", ".join(
                f"{k} {LIVE.get(f'{i}:{k}', [0, 0])[0]}/{LIVE.get(f'{i}:{k}', [0, 0])[1]}" for k in kinds
            )
            + (
                f"\n  first routed prompt of a client (its watch set up; not in the figures above): "
                f"p50={pct(f, 50):.1f} p99={pct(f, 99):.1f} ms"
                if f
                else ""
            )
            for i, (t, e, u, f) in enumerate(zip(times, errors, cpu, first, strict=True))
        ]
    finally:
        for direct, routed in setups:
            for client, _ in direct + routed:
                await client.close()


def _cpu_split(c: Cluster) -> CpuSplit:
    return CpuSplit({r.name: r.proc.pid for r in c.live}, c.db_url.rsplit("/", 1)[1])


def _figures(clients: int, times: dict[str, list[float]], errors: dict[str, list[str]]) -> str:
    if not times["direct"] or not times["routed"]:  # one kind only (`--kinds`)
        return f"clients={clients} " + " | ".join(
            f"{k} p50={pct(v, 50):.1f} ms errors={_codes(errors[k])}" for k, v in times.items() if v
        )
    d50, r50 = pct(times["direct"], 50), pct(times["routed"], 50)
    return (
        f"clients={clients} direct p50={d50:.1f} p99={pct(times['direct'], 99):.1f} ms "
        f"errors={_codes(errors['direct'])} | routed p50={r50:.1f} p99={pct(times['routed'], 99):.1f} ms "
        f"errors={_codes(errors['routed'])} | routed/direct p50 = {r50 / d50:.2f}"
    )


def _codes(codes: list[str]) -> str:
    return "0" if not codes else ",".join(f"{code}x{codes.count(code)}" for code in sorted(set(codes)))
