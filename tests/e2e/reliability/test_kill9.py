"""A `kill -9` loop against a real `agentd serve` process, on SQLite and on Postgres.

Each iteration starts the server on the same database, lets recording clients create
sessions and submit prompts (`_agentd/prompt/enqueue` and `session/prompt`, each with a
`requestId`), kills the process — at a random moment (seeded), or, every other life,
right after the n-th acknowledged enqueue — and starts it again. The clients reconnect,
re-attach from the last seq they saw (sending again an attach refused with a retryable
error, as the server asks) and resend what was never answered, as a real client would.
A final run lets every queue drain and a fresh client attaches from 0. Then:

- every durable event a client saw (live or replayed) is in the log at the same seq with
  the same content, and an attach from 0 replays the whole log;
- every session's seqs are 1..n without a gap;
- every acknowledged prompt ran (or its turn was cut off by a kill) — none is lost;
- no requestId ran twice;
- every retry was answered.

One campaign per database serves all the checks (a module-scoped fixture), so each
invariant is its own test and a known bug can be marked on exactly the one it breaks.
Knobs: RELIABILITY_KILL9_ITERATIONS, RELIABILITY_SEED (see README.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import signal
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentd.core.events import Event, EventKind
from agentd.protocol.agentd import ATTACH, ENQUEUE
from agentd.store.db import Store, StoredEvent
from agentd.transport.render import attach_frames, for_client, live_frames
from tests.support.client import WsClient, is_retryable, text_prompt
from tests.support.databases import postgres_database
from tests.support.proc import AgentdProcess, agentd_serve, write_script

ITERATIONS = int(os.environ.get("RELIABILITY_KILL9_ITERATIONS", "4"))
SEED = int(os.environ.get("RELIABILITY_SEED", "9"))
WORKERS = 2
MAX_SESSIONS = 4
RETRY_BOUND_S = 10.0  # a retry not answered within this (server alive) counts as unanswered
ATTACH_TRIES = 5  # a retryable attach error is retried this often (at once: the server says when not)
DRAIN_BOUND_S = 90.0  # the final run: every queue drains within this (a hang bound)

SCRIPT = [
    {
        "reasoning": "Looking around.",
        "text": "Let me look at the workspace.",
        "chunk_size": 6,
        "chunk_delay": 0.01,
        "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}],
    },
    {"text": "Done looking. All is well here.", "chunk_size": 6, "chunk_delay": 0.01},
]

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(600)]


@dataclass
class Submission:
    request_id: str
    method: str  # ENQUEUE or session/prompt
    session_id: str
    text: str

    def params(self) -> dict[str, Any]:
        return text_prompt(self.session_id, self.text, requestId=self.request_id)


@dataclass
class Seen:
    session_id: str
    seq: int
    method: str
    params: dict[str, Any]
    iteration: int


@dataclass
class Campaign:
    database: str
    iterations: int
    sessions: list[str] = field(default_factory=list)
    submitted: dict[str, Submission] = field(default_factory=dict)
    acked: set[str] = field(default_factory=set)  # requestIds the server acknowledged
    retried: set[str] = field(default_factory=set)
    unanswered_retries: set[str] = field(default_factory=set)  # timed out with the server alive
    seen: list[Seen] = field(default_factory=list)
    attach_refused: list[str] = field(default_factory=list)  # a seen cursor the server did not know
    attach_retried: list[str] = field(default_factory=list)  # retryable refusals, retried (reported)
    events: dict[str, list[StoredEvent]] = field(default_factory=dict)  # the log after the last run
    replayed: dict[str, list[int]] = field(default_factory=dict)  # seqs a fresh attach from 0 got
    kills_mid_turn: int = 0


def durable_frames(client: WsClient, iteration: int) -> list[Seen]:
    out = []
    for f in client.frames:
        if not (isinstance(f, dict) and "method" in f and "id" not in f):
            continue
        params = f.get("params")
        meta = ((params or {}).get("_meta") or {}).get("agentd") or {}
        if "seq" in meta and not meta.get("transient") and "sessionId" in params:
            out.append(Seen(params["sessionId"], meta["seq"], f["method"], params, iteration))
    return out


class Run:
    """One life of the server: recording clients doing random work until the kill."""

    def __init__(self, campaign: Campaign, server: AgentdProcess, rng: random.Random, iteration: int) -> None:
        self.c = campaign
        self.server = server
        self.rng = rng
        self.iteration = iteration
        self.clients: list[WsClient] = []
        self.tasks: list[asyncio.Task[Any]] = []
        self.ids = itertools.count()
        # Some lives end right after the n-th acknowledged enqueue: the moment an ack
        # must already be durable (R-S3), where a random kill would rarely land.
        self.kill_at_ack: int | None = None
        self.acks = 0
        self.killed = asyncio.Event()

    async def connect(self, workspace: Path) -> None:
        for _ in range(WORKERS):
            client = await WsClient.connect(self.server.base_url)
            self.clients.append(client)
            # Back to every known session from the last seq this run's client would have.
            for sid in self.c.sessions:
                after = max((s.seq for s in self.c.seen if s.session_id == sid), default=0)
                resp = await self.attach(client, sid, after)
                if "error" in resp:
                    self.c.attach_refused.append(f"{sid} afterSeq={after}: {resp['error']}")
        if not self.c.sessions:
            sid = (await self.clients[0].call("session/new", {"cwd": str(workspace), "mcpServers": []}))[
                "sessionId"
            ]
            self.c.sessions.append(sid)

    async def attach(self, client: WsClient, sid: str, after: int) -> dict[str, Any]:
        """Re-attach as a real client does: an error the server marks retryable (`data.retryable`:
        e.g. a session whose reload after the restart was refused, which the next request
        loads again) is retried, a few times; any other error is the answer."""
        for _ in range(ATTACH_TRIES):
            resp = await client.request(ATTACH, {"sessionId": sid, "afterSeq": after})
            if not (isinstance(resp.get("error"), dict) and is_retryable(resp["error"])):
                break
            self.c.attach_retried.append(f"{sid} afterSeq={after}: {resp['error']}")
        return resp

    async def submit(self, client: WsClient, sub: Submission, *, bound: float | None) -> None:
        """Send (or resend) one submission; an answer means it is acknowledged."""
        try:
            async with asyncio.timeout(bound):
                resp = await client.request(sub.method, sub.params())
        except TimeoutError:
            self.c.unanswered_retries.add(sub.request_id)
            return
        if "result" in resp:
            self.c.acked.add(sub.request_id)
            self.c.unanswered_retries.discard(sub.request_id)
            if sub.method == ENQUEUE:
                self.acks += 1
                if self.acks == self.kill_at_ack:
                    os.kill(self.server.pid, signal.SIGKILL)  # at once, before anything else runs
                    self.killed.set()

    async def resend(self, *, bound: float) -> None:
        """What clients do after reconnecting: resend every submission never answered —
        and, as a client unsure of its state would, a few that were (same requestId: each
        must be answered, and joins the original instead of running again)."""
        pending = [s for rid, s in self.c.submitted.items() if rid not in self.c.acked]
        answered = sorted(rid for rid in self.c.acked if self.c.submitted[rid].method == ENQUEUE)
        pending += [self.c.submitted[rid] for rid in self.rng.sample(answered, min(3, len(answered)))]
        self.c.retried.update(s.request_id for s in pending)
        # A resent session/prompt is answered when its turn ends, behind the whole queue.
        self.tasks += [
            asyncio.create_task(
                self.submit(
                    self.rng.choice(self.clients), s, bound=bound if s.method == ENQUEUE else DRAIN_BOUND_S
                )
            )
            for s in pending
        ]

    async def worker(self, n: int, workspace: Path) -> None:
        client = self.clients[n]
        while True:
            roll = self.rng.random()
            if roll < 0.1 and len(self.c.sessions) < MAX_SESSIONS:
                new = await client.call("session/new", {"cwd": str(workspace), "mcpServers": []})
                self.c.sessions.append(new["sessionId"])
                continue
            rid = f"it{self.iteration}-w{n}-{next(self.ids)}"
            method = ENQUEUE if roll < 0.75 else "session/prompt"
            sub = Submission(rid, method, self.rng.choice(self.c.sessions), f"task {rid}")
            self.c.submitted[rid] = sub
            if method == ENQUEUE:
                await self.submit(client, sub, bound=None)
            else:  # answered at its turn's end: do not wait for it here
                self.tasks.append(asyncio.create_task(self.submit(client, sub, bound=None)))
            # Think time: shapes the load, nothing waits on it.
            await asyncio.sleep(self.rng.uniform(0.05, 0.5))

    def start_work(self, workspace: Path) -> None:
        self.tasks += [asyncio.create_task(self.worker(n, workspace)) for n in range(WORKERS)]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for client in self.clients:
            self.c.seen += durable_frames(client, self.iteration)
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await client.close()

    def running_turns(self) -> int:
        """Turns started but not ended as far as the clients saw (so the kill lands mid-turn)."""
        seen = {(s.session_id, s.seq): s for c in self.clients for s in durable_frames(c, self.iteration)}
        kinds = Counter(s.params["kind"] for s in seen.values() if s.method == "_agentd/event")
        return kinds["turn_started"] - kinds["turn_ended"]


async def read_log(db_url: str, sessions: list[str]) -> dict[str, list[StoredEvent]]:
    store = await Store.open(db_url)
    try:
        return {sid: await store.read_events(sid) for sid in sessions}
    finally:
        await store.close()


def settled(campaign: Campaign, log: dict[str, list[StoredEvent]]) -> bool:
    """Every acknowledged prompt has ended in the log."""
    ended = {e.payload.get("requestId") for evs in log.values() for e in evs if e.kind == "turn_ended"}
    return campaign.acked <= ended


async def run_campaign(database: str, tmp: Path) -> Campaign:
    if database == "sqlite":
        return await _campaign(database, f"sqlite+aiosqlite:///{tmp / 'agentd.db'}", tmp)
    async with postgres_database() as db_url:
        return await _campaign(database, db_url, tmp)


async def _campaign(database: str, db_url: str, tmp: Path) -> Campaign:
    rng = random.Random(f"{SEED}-{database}")
    campaign = Campaign(database, ITERATIONS)
    workspace = tmp / "workspace"
    workspace.mkdir()
    script = write_script(tmp / "script.json", SCRIPT)
    settings = {"database_url": db_url, "script": str(script), "permission_mode": "bypass"}
    for iteration in range(ITERATIONS):
        async with agentd_serve(tmp / "home", f"serve-{iteration}.log", **settings) as server:
            run = Run(campaign, server, rng, iteration)
            await run.connect(workspace)
            await run.resend(bound=RETRY_BOUND_S)
            if iteration % 2:
                run.kill_at_ack = rng.randint(1, 5)
            run.start_work(workspace)
            if run.kill_at_ack is None:
                await asyncio.sleep(rng.uniform(0.3, 2.5))  # the point of the kill, not a wait
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(30):  # a hang bound: the workload acks within it
                        await run.killed.wait()
            campaign.kills_mid_turn += run.running_turns() > 0
            await server.kill9()
            await run.stop()

    # The last life: reconnect, retry, and let every queue drain (auto-resume is on).
    async with agentd_serve(tmp / "home", "serve-final.log", **settings) as server:
        run = Run(campaign, server, rng, ITERATIONS)
        await run.connect(workspace)
        await run.resend(bound=RETRY_BOUND_S)
        # A queue that never drains is left to the acknowledged-prompts check to report.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DRAIN_BOUND_S):
                while True:
                    log = await read_log(db_url, campaign.sessions)
                    retries_done = all(t.done() for t in run.tasks)
                    if retries_done and (
                        settled(campaign, log) or await queues_empty(db_url, campaign.sessions)
                    ):
                        break  # all ran, or idle everywhere: whatever is missing now is lost
                    await asyncio.sleep(0.2)  # polling the store; bounded by DRAIN_BOUND_S
        # A fresh client attaching from 0 replays every session's whole log.
        fresh = await WsClient.connect(server.base_url)
        for sid in campaign.sessions:
            resp = await run.attach(fresh, sid, 0)  # the replay precedes the answer
            assert "result" in resp, resp
        replay = durable_frames(fresh, ITERATIONS + 1)
        campaign.seen += replay
        for sid in campaign.sessions:
            campaign.replayed[sid] = sorted({s.seq for s in replay if s.session_id == sid})
        await fresh.close()
        await run.stop()
        await server.kill9()
    campaign.events = await read_log(db_url, campaign.sessions)
    return campaign


async def queues_empty(db_url: str, sessions: list[str]) -> bool:
    store = await Store.open(db_url)
    try:
        for sid in sessions:
            record = await store.get_session(sid)
            if record is None or record.queue:
                return False
            ends = await store.latest_events(sid, ["turn_started", "turn_ended"], limit=1)
            if ends and ends[-1].kind == "turn_started":
                return False  # a turn is running
        return True
    finally:
        await store.close()


def renderings(session_id: str, stored: StoredEvent) -> list[tuple[str, dict[str, Any]]]:
    """Every form the event at this seq may take on the wire: live, attach replay, and
    both with capability-gated updates downgraded to `_agentd/event`."""
    try:
        event = Event.stored(session_id, EventKind(stored.kind), stored.payload, seq=stored.seq)
    except ValueError:
        return []
    out = []
    for frames in (live_frames(event, stored.seq), attach_frames(event)):
        out += frames + for_client(frames, event, lambda _kind: False, stored.seq)
    return out


def without_meta(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k != "_meta"}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def campaign(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    # Its own event loop: one campaign (minutes of real processes) feeds several tests.
    return asyncio.run(run_campaign(request.param, tmp_path_factory.mktemp(f"kill9-{request.param}")))


def test_the_campaign_really_exercised_the_server(campaign: Campaign) -> None:
    assert campaign.seen, "no client saw any durable event"
    assert len(campaign.acked) >= campaign.iterations, campaign.acked
    assert sum(1 for evs in campaign.events.values() for e in evs if e.kind == "turn_ended") > 0
    assert campaign.kills_mid_turn > 0, "no kill landed while a turn was running"


def test_every_seen_event_is_in_the_log_with_the_same_seq_and_content(campaign: Campaign) -> None:
    assert not campaign.attach_refused, "a client's last seen seq was unknown after the restart"
    problems = []
    for seen in campaign.seen:
        by_seq = {e.seq: e for e in campaign.events[seen.session_id]}
        stored = by_seq.get(seen.seq)
        if stored is None:
            problems.append(f"iteration {seen.iteration}: seq {seen.seq} of {seen.session_id} not in the log")
            continue
        wire = [(m, without_meta(p)) for m, p in renderings(seen.session_id, stored)]
        if (seen.method, without_meta(seen.params)) not in wire:
            problems.append(
                f"iteration {seen.iteration}: seq {seen.seq} was {seen.method} {seen.params}, "
                f"the log has {stored.kind} {stored.payload}"
            )
    assert not problems, "\n".join(problems[:20])


def test_an_attach_from_zero_replays_the_whole_log(campaign: Campaign) -> None:
    for sid, events in campaign.events.items():
        assert campaign.replayed[sid] == [e.seq for e in events], sid


def test_every_session_log_is_contiguous(campaign: Campaign) -> None:
    for sid, events in campaign.events.items():
        seqs = [e.seq for e in events]
        assert seqs == list(range(1, len(seqs) + 1)), sid


def request_ids(campaign: Campaign, kind: str) -> list[Any]:
    return [e.payload.get("requestId") for evs in campaign.events.values() for e in evs if e.kind == kind]


def test_no_request_id_runs_twice(campaign: Campaign) -> None:
    started = Counter(request_ids(campaign, "turn_started"))
    assert not {rid: n for rid, n in started.items() if rid and n > 1}


def test_every_acknowledged_prompt_ran(campaign: Campaign) -> None:
    ended = set(request_ids(campaign, "turn_ended"))
    lost = sorted(campaign.acked - ended)
    assert not lost, [campaign.submitted[rid] for rid in lost]


def test_every_retry_is_answered(campaign: Campaign) -> None:
    assert campaign.retried, "no retry happened: the check would be vacuous"
    unanswered = sorted(campaign.unanswered_retries)
    assert not unanswered, [campaign.submitted[rid] for rid in unanswered]
