"""The bridge's bookkeeping (agentd/transport/relay.py), without a server: duplicates of
durable seqs are dropped, re-sent text is cut to what the editor lacks, and a durable final
event the editor has every character of still goes on as an empty chunk carrying its seq
and its `interrupted` mark (issue 29, item 9)."""

from __future__ import annotations

from typing import Any

from agentd.transport.relay import RelayState, Verdict


def chunk(
    text: str, *, seq: int | None = None, final: bool = False, interrupted: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"transient": True} if seq is None else {"seq": seq}
    if final:
        meta["final"] = True
    if interrupted:
        meta["interrupted"] = True
    update = {
        "sessionUpdate": "agent_message_chunk",
        "messageId": "m1",
        "content": {"type": "text", "text": text},
    }
    return {"sessionId": "s1", "update": update, "_meta": {"agentd": meta}}


def text_of(params: dict[str, Any]) -> str:
    return str(params["update"]["content"]["text"])


def streamed(state: RelayState, *texts: str) -> None:
    for t in texts:
        verdict, _ = state.notification("session/update", chunk(t))
        assert verdict is Verdict.FORWARD


def test_a_final_event_whose_text_the_editor_has_goes_on_empty_with_its_seq_and_mark() -> None:
    state = RelayState()
    state.track("s1")
    streamed(state, "hello ", "wor")  # the editor has 9 characters; the server then died
    state.reconnected()
    verdict, params = state.notification(
        "session/update", chunk("hello ", seq=7, final=True, interrupted=True)
    )
    assert verdict is Verdict.FORWARD
    assert text_of(params) == ""  # streamed past the checkpoint: nothing new to show
    assert params["_meta"]["agentd"] == {"seq": 7, "final": True, "interrupted": True}
    assert state.notification("session/update", chunk("hello ", seq=7, final=True))[0] is Verdict.DROP  # once


def test_a_final_event_with_more_text_forwards_only_the_rest() -> None:
    state = RelayState()
    state.track("s1")
    streamed(state, "hel")
    state.reconnected()
    verdict, params = state.notification("session/update", chunk("hello", seq=3, final=True))
    assert verdict is Verdict.FORWARD and text_of(params) == "lo"


def test_a_transient_resend_with_nothing_new_is_dropped() -> None:
    state = RelayState()
    state.track("s1")
    streamed(state, "hello")
    state.reconnected()
    verdict, _ = state.notification("session/update", chunk("hello"))  # the partial, re-sent
    assert verdict is Verdict.DROP
