"""Live text on every replica (issue 26 item 4): two real `agentd serve` replicas on one
Postgres, the OpenAI provider of both pointed at a fake model that streams the first half of
its answer and then holds (a gate the test opens). A client on the owner (A) prompts; a
client attached through the other replica (B) gets the streamed text while the model is
still held — before anything of the answer is in the log — and at the end the very frames
the owner's client got, its text once. Once with Redis as the broker, once with NOTIFY.

The faults: Redis's connections of B's broker killed mid-stream — B's client misses what was
sent meanwhile, never gets a text twice, its text is whole when the message ends and the next
answer streams live again; and a broker that is not there at all — the owner's clients stream
as ever, B's client gets each message whole at its end."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.fakes.openai_server import Completion, FakeOpenAI
from tests.support.metrics import scrape
from tests.support.polling import until
from tests.support.proc import AgentdProcess, agentd_serve, free_port
from tests.support.redis import kill_clients, redis_url, subscribed_clients
from tests.support.replicas import Replicas, two_replicas
from tests.support.session import new_session

pytestmark = pytest.mark.timeout(120)

FIRST = ["Streaming ", "live ", "through ", "the ", "broker, "]
REST = ["then ", "the ", "rest ", "of ", "it."]
ANSWER = "".join(FIRST + REST)


def gated_answer(gate: threading.Event) -> Completion:
    # Blocks: the role chunk, then one per piece; the gate holds the block after FIRST.
    return Completion(content=FIRST + REST, gate_after=1 + len(FIRST), gate=gate)


async def cluster_settings(broker: str, fake: FakeOpenAI, **more: str) -> dict[str, str]:
    settings = {
        "provider": "openai",
        "openai_base_url": fake.base_url,
        "openai_api_key": "sk-test",
        "model": "fake-model",
        "permission_mode": "bypass",
    }
    if broker == "redis":
        settings["redis_url"] = await redis_url()
    return settings | more


@asynccontextmanager
async def cluster(tmp_path: Path, broker: str, fake: FakeOpenAI, **more: str) -> AsyncIterator[Replicas]:
    settings = await cluster_settings(broker, fake, **more)
    async with two_replicas(tmp_path, [{"text": "unused"}], **settings) as replicas:
        yield replicas


async def live_figures(server: AgentdProcess) -> tuple[float, float]:
    """The owner's (transient events sent toward the broker, sessions it sees watched elsewhere)."""
    got = await scrape(server.base_url)
    return got[("agentd_live_events_published_total", ())], got[("agentd_live_watched_sessions", ())]


async def heard_watching(owner: AgentdProcess, sessions: int = 1) -> None:
    """Until the owner has heard another replica's watch of `sessions` sessions: it sends
    their live events only from then on (agentd/session/replicas/live_watch.py)."""

    async def heard() -> bool:
        return (await live_figures(owner))[1] == sessions

    await until(heard, what=f"the owner hearing {sessions} watched session(s)")


def session_frames(client: WsClient, sid: str) -> list[dict[str, Any]]:
    """The notifications of session `sid` the client got, as sent (but the prompt's own
    user message — its sender is not sent it back — and the commands list)."""
    out = []
    for f in client.frames:
        params = f.get("params") if isinstance(f, dict) and "id" not in f else None
        if (
            not isinstance(params, dict)
            or params.get("sessionId") != sid
            or f["method"].endswith("/snapshot")
        ):
            continue  # (the attach's snapshot: B's own)
        update = params.get("update") or {}
        if update.get("sessionUpdate") in ("user_message_chunk", "available_commands_update"):
            continue
        if f["method"] == "_agentd/event" and params.get("kind") == "user_message":
            continue
        out.append({"method": f["method"], "params": params})
    return out


def ended(client: WsClient, sid: str) -> bool:
    return any(
        f["method"] == "_agentd/event" and f["params"]["kind"] == "turn_ended"
        for f in session_frames(client, sid)
    )


def finals(client: WsClient, sid: str) -> list[dict[str, Any]]:
    """The agent_message events (a message's end, durable) the client got."""
    return [
        f
        for f in session_frames(client, sid)
        if f["method"] == "_agentd/event" and f["params"]["kind"] == "agent_message"
    ]


def shown_texts(client: WsClient, sid: str) -> list[str]:
    """Each answer's text as a client shows it: chunks appended, a `final` one (the whole
    text of its message) replacing what it had."""
    texts: dict[str, str] = {}
    for f in session_frames(client, sid):
        update = f["params"].get("update") or {}
        if update.get("sessionUpdate") != "agent_message_chunk":
            continue
        mid, text = update["messageId"], update["content"]["text"]
        final = f["params"]["_meta"]["agentd"].get("final")
        texts[mid] = text if final else texts.get(mid, "") + text
    return list(texts.values())


def chunks_after_final(client: WsClient, sid: str) -> list[str]:
    """Text chunks that came after their message's end (its text a second time)."""
    done: set[str] = set()
    late = []
    for f in session_frames(client, sid):
        params = f["params"]
        if f["method"] == "_agentd/event" and params["kind"] == "agent_message":
            done.add(params["event"]["messageId"])
        update = params.get("update") or {}
        if update.get("sessionUpdate") == "agent_message_chunk" and update["messageId"] in done:
            late.append(update["content"]["text"])
    return late


async def watched_elsewhere(tmp_path: Path, broker: str) -> None:
    gate = threading.Event()
    async with FakeOpenAI([gated_answer(gate)]) as fake, cluster(tmp_path, broker, fake) as replicas:
        owner = await WsClient.connect(replicas.a.base_url)
        sid = await new_session(owner, tmp_path)
        watcher = await WsClient.connect(replicas.b.base_url)
        attached = await watcher.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
        assert attached["snapshot"]["ownedBy"] == "replica-a"
        await heard_watching(replicas.a)
        prompt = asyncio.create_task(owner.call("session/prompt", text_prompt(sid, "go")))
        try:
            held = "".join(FIRST)
            await until(lambda: agent_text(watcher.updates(sid)) == held, what="the first half live on B")
            # The model is still held: nothing of the answer is in the log yet.
            assert not gate.is_set() and not finals(watcher, sid) and not finals(owner, sid)
            assert agent_text(owner.updates(sid)) == held
            gate.set()
            assert (await prompt)["stopReason"] == "end_turn"
        finally:
            gate.set()
        await until(lambda: ended(watcher, sid), what="the turn's end on B")
        assert agent_text(watcher.updates(sid)) == ANSWER  # the text once, whole
        # Exactly the frames the owner's client got (seqs, transient marks, order).
        assert session_frames(watcher, sid) == session_frames(owner, sid)
        await owner.close()
        await watcher.close()


async def test_live_text_reaches_a_client_on_another_replica_through_redis(tmp_path: Path) -> None:
    await watched_elsewhere(tmp_path, "redis")


async def test_live_text_reaches_a_client_on_another_replica_through_notify(tmp_path: Path) -> None:
    await watched_elsewhere(tmp_path, "notify")


async def test_redis_connections_of_the_watching_replica_killed_mid_stream(tmp_path: Path) -> None:
    gates = [threading.Event(), threading.Event()]
    script = [gated_answer(g) for g in gates]
    async with FakeOpenAI(script) as fake, cluster(tmp_path, "redis", fake) as replicas:
        owner = await WsClient.connect(replicas.a.base_url)
        sid = await new_session(owner, tmp_path)
        watcher = await WsClient.connect(replicas.b.base_url)
        await watcher.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
        await heard_watching(replicas.a)
        held = "".join(FIRST)
        b_name = f"agentd-replica-b-{replicas.b.pid}"
        for n, gate in enumerate(gates):
            prompt = asyncio.create_task(owner.call("session/prompt", text_prompt(sid, f"go {n}")))
            try:
                await until(
                    lambda n=n: shown_texts(watcher, sid)[n:] == [held], what="the first half live on B"
                )
                if n == 0:  # B's broker loses its connections mid-stream (only B's: by name)
                    assert await kill_clients(b_name) >= 1
                gate.set()
                assert (await prompt)["stopReason"] == "end_turn"
            finally:
                gate.set()
            await until(lambda n=n: len(finals(watcher, sid)) == n + 1, what="the answer's end on B")
            # B subscribed again before the next answer (what is sent meanwhile is lost).
            await until(lambda: subscribed_clients(b_name), what="B's broker subscribed again")
        # What went by during the reconnect is missed; the text is whole anyway, never
        # twice; and the second answer streamed live again: the broker reconnected.
        assert shown_texts(watcher, sid) == [ANSWER, ANSWER] == shown_texts(owner, sid)
        assert chunks_after_final(watcher, sid) == []
        await owner.close()
        await watcher.close()


async def test_with_the_broker_unreachable_the_text_still_arrives_whole_at_the_end(tmp_path: Path) -> None:
    gate = threading.Event()
    nobody = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    async with (
        FakeOpenAI([gated_answer(gate)]) as fake,
        cluster(tmp_path, "notify", fake, redis_url=nobody) as replicas,
    ):
        owner = await WsClient.connect(replicas.a.base_url)
        sid = await new_session(owner, tmp_path)
        watcher = await WsClient.connect(replicas.b.base_url)
        await watcher.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
        prompt = asyncio.create_task(owner.call("session/prompt", text_prompt(sid, "go")))
        try:  # the owner's own clients stream as ever
            await until(
                lambda: agent_text(owner.updates(sid)) == "".join(FIRST), what="the owner's client live"
            )
            gate.set()
            assert (await prompt)["stopReason"] == "end_turn"
        finally:
            gate.set()
        await until(lambda: ended(watcher, sid), what="the turn's end on B")
        # No live chunk reached B; the durable end brought the whole text, once.
        assert shown_texts(watcher, sid) == [ANSWER] == shown_texts(owner, sid)
        assert agent_text(watcher.updates(sid)) == ANSWER
        await owner.close()
        await watcher.close()


async def published_only_while_watched(tmp_path: Path, broker: str) -> None:
    """Live events go to the broker only while another replica watches the session (issue
    32, hpg): none while nobody does; a watch announced on B starts them (its client gets
    the text live); once B's client is gone, B stops announcing and within 2W they stop."""
    gate = threading.Event()
    script = [Completion(content=FIRST + REST), gated_answer(gate), Completion(content=FIRST + REST)]
    async with (
        FakeOpenAI(script) as fake,
        cluster(tmp_path, broker, fake, live_watch_interval_s="0.5") as replicas,
    ):
        owner = await WsClient.connect(replicas.a.base_url)
        sid = await new_session(owner, tmp_path)
        assert (await owner.call("session/prompt", text_prompt(sid, "one")))["stopReason"] == "end_turn"
        assert await live_figures(replicas.a) == (0, 0)  # streamed, and nothing to the broker
        watcher = await WsClient.connect(replicas.b.base_url)
        await watcher.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
        await heard_watching(replicas.a)
        prompt = asyncio.create_task(owner.call("session/prompt", text_prompt(sid, "two")))
        try:
            held = "".join(FIRST)
            await until(lambda: shown_texts(watcher, sid) == [ANSWER, held], what="the first half live on B")
            assert not gate.is_set()
            gate.set()
            assert (await prompt)["stopReason"] == "end_turn"
        finally:
            gate.set()
        await until(lambda: len(finals(watcher, sid)) == 1, what="the answer's end on B (live)")
        assert shown_texts(watcher, sid) == [ANSWER, ANSWER] and chunks_after_final(watcher, sid) == []
        sent, _ = await live_figures(replicas.a)
        assert sent > 0
        await watcher.close()  # B's watch ends: no more announcements
        await heard_watching(replicas.a, 0)
        assert (await owner.call("session/prompt", text_prompt(sid, "three")))["stopReason"] == "end_turn"
        assert await live_figures(replicas.a) == (sent, 0)  # streamed to A's client only
        await owner.close()


async def test_live_events_go_through_redis_only_while_another_replica_watches(tmp_path: Path) -> None:
    await published_only_while_watched(tmp_path, "redis")


async def test_live_events_go_through_notify_only_while_another_replica_watches(tmp_path: Path) -> None:
    await published_only_while_watched(tmp_path, "notify")


async def test_a_restarted_owner_learns_of_the_watchers_already_there(tmp_path: Path) -> None:
    """The owner killed and restarted (the same replica, its sessions back at once): it asks
    who watches, B answers — with W an hour, no periodic announcement could have told it —
    and B's client gets the next answer live."""
    gate = threading.Event()
    async with FakeOpenAI([gated_answer(gate)]) as fake:
        settings = await cluster_settings("notify", fake, live_watch_interval_s="3600")
        async with two_replicas(tmp_path, [{"text": "unused"}], **settings) as replicas:
            owner = await WsClient.connect(replicas.a.base_url)
            sid = await new_session(owner, tmp_path)
            watcher = await WsClient.connect(replicas.b.base_url)
            await watcher.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
            await heard_watching(replicas.a)
            await owner.close()
            await replicas.a.kill9()
            again = dict(settings, replica_id="replica-a", database_url=replicas.url)
            again["script"] = str(tmp_path / "script.json")
            async with agentd_serve(tmp_path / "replica-a", "replica-a-again.log", **again) as a2:
                await heard_watching(a2)  # asked at its start: B answered
                owner = await WsClient.connect(a2.base_url)
                prompt = asyncio.create_task(owner.call("session/prompt", text_prompt(sid, "go")))
                try:
                    held = "".join(FIRST)
                    await until(lambda: shown_texts(watcher, sid) == [held], what="the first half live on B")
                    gate.set()
                    assert (await prompt)["stopReason"] == "end_turn"
                finally:
                    gate.set()
                await until(lambda: ended(watcher, sid), what="the turn's end on B")
                assert shown_texts(watcher, sid) == [ANSWER] and chunks_after_final(watcher, sid) == []
                await owner.close()
            await watcher.close()


async def test_a_watch_that_starts_mid_message_gets_its_text_once_at_the_end(tmp_path: Path) -> None:
    """B's client attaches while the owner's answer is half streamed, nothing of it sent to
    the broker (nobody watched). Once the owner hears the watch, the rest streams to B — but
    B's client missed the start: it gets no part of this message twice, and its whole text
    once with the final event; the next answer streams live from its start."""
    gate, gate2 = threading.Event(), threading.Event()
    script = [gated_answer(gate), gated_answer(gate2)]
    async with FakeOpenAI(script) as fake, cluster(tmp_path, "notify", fake) as replicas:
        owner = await WsClient.connect(replicas.a.base_url)
        sid = await new_session(owner, tmp_path)
        prompt = asyncio.create_task(owner.call("session/prompt", text_prompt(sid, "one")))
        watcher = await WsClient.connect(replicas.b.base_url)
        try:
            held = "".join(FIRST)
            await until(lambda: agent_text(owner.updates(sid)) == held, what="the first half on A")
            assert await live_figures(replicas.a) == (0, 0)
            await watcher.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
            await heard_watching(replicas.a)
            gate.set()  # the rest: to A's client, and now to the broker too
            assert (await prompt)["stopReason"] == "end_turn"
        finally:
            gate.set()
        await until(lambda: ended(watcher, sid), what="the turn's end on B")
        assert (await live_figures(replicas.a))[0] >= len(REST)  # the rest did go to the broker
        assert agent_text(watcher.updates(sid)) == ANSWER  # no chunk of it before its end
        assert shown_texts(watcher, sid) == [ANSWER] and chunks_after_final(watcher, sid) == []
        watcher.frames.clear()
        owner.frames.clear()
        prompt = asyncio.create_task(owner.call("session/prompt", text_prompt(sid, "two")))
        try:
            await until(lambda: agent_text(watcher.updates(sid)) == held, what="the next answer live on B")
            gate2.set()
            assert (await prompt)["stopReason"] == "end_turn"
        finally:
            gate2.set()
        await until(lambda: ended(watcher, sid), what="the second turn's end on B")
        assert shown_texts(watcher, sid) == [ANSWER] == shown_texts(owner, sid)
        assert session_frames(watcher, sid) == session_frames(owner, sid)  # streamed live, as on A
        await owner.close()
        await watcher.close()
