"""A prompt's answer, rendered once from its turn's end (issue 27 item 4): the direct
`session/prompt` answer and the one rebuilt from a stored `turn_ended` event (a routed or
queued prompt, a retried request after a restart) both come from a `TurnEnded` update,
through these functions — so the two paths cannot drift apart."""

from __future__ import annotations

from typing import Any

from agentd.core.updates import TurnEnded

FAILED = "failed"  # the outcome kind a failed turn records: answered with an error instead


def _meta(ended: TurnEnded) -> dict[str, Any]:
    meta: dict[str, Any] = {"promptId": ended.prompt_id, "outcome": ended.outcome}
    if ended.turn_id:
        meta["turnId"] = ended.turn_id
    if ended.reason is not None:
        meta["reason"] = ended.reason
    if ended.structured_output is not None:
        meta["structuredOutput"] = ended.structured_output
    if ended.turn is not None and "usage" in ended.turn:
        meta["usage"] = ended.turn["usage"]  # this prompt's tokens and cost (R-R4)
    return meta


def prompt_result(ended: TurnEnded) -> dict[str, Any]:
    """The `session/prompt` result: the ACP stop reason and `_meta.agentd`."""
    return {"stopReason": ended.stop_reason, "_meta": {"agentd": _meta(ended)}}


def prompt_failure(ended: TurnEnded) -> tuple[str, dict[str, Any]] | None:
    """(message, error data) when the turn failed (the prompt is answered with an error)."""
    if ended.outcome != FAILED:
        return None
    error = ended.error or {}
    message = f"The turn failed: {error.get('message') or 'unknown error'}"
    return message, {"kind": error.get("kind", "internal"), **_meta(ended)}


def enqueue_result(ended: TurnEnded) -> dict[str, Any]:
    """An enqueue's answer when a repeated requestId names a prompt that already ended."""
    out: dict[str, Any] = {
        "promptId": ended.prompt_id,
        "stopReason": ended.stop_reason,
        "outcome": ended.outcome,
    }
    if ended.turn_id:
        out["turnId"] = ended.turn_id
    if ended.reason is not None:
        out["reason"] = ended.reason
    return out
