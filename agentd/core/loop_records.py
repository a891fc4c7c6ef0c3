"""The records the loop's retry buckets, detectors and checkpoint put on events and on the
turn's summary, with their one encoding (camelCase, as stored and sent). The loop decides; only
these functions spell the keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def retry_decision_wire(
    decision: str, bucket: str, attempt: int, limit: int, delay_s: float, reason: str
) -> dict[str, Any]:
    """A retry bucket's decision (the `retry` event's core and the summary's `retries` entry)."""
    return {
        "decision": decision,
        "bucket": bucket,
        "attempt": attempt,
        "limit": limit,
        "delaySeconds": delay_s,
        "reason": reason,
    }


def retry_bucket_wire(
    count: int, limit: int, exhausted: bool, last_failure_at: str, oldest_expires_at: str
) -> dict[str, Any]:
    """One non-empty bucket as `_agentd/usage/get` shows it."""
    return {
        "count": count,
        "limit": limit,
        "exhausted": exhausted,
        "lastFailureAt": last_failure_at,
        "oldestExpiresAt": oldest_expires_at,
    }


def retry_snapshot_wire(window_s: float, buckets: Mapping[str, Any]) -> dict[str, Any]:
    return {"windowSeconds": window_s, "buckets": dict(buckets)}


def checkpoint_wire(commit: str, result_path: str, limit: int, marker: str) -> dict[str, Any]:
    """A budget checkpoint (WIP commit and partial result) on the budget stop."""
    return {"commit": commit, "resultPath": result_path, "limit": limit, "marker": marker}


def repetition_wire(reason: str, pattern: str, repeats: int) -> dict[str, Any]:
    """Repetitive streamed text the degeneration detector caught."""
    return {"reason": reason, "pattern": pattern, "patternLength": len(pattern), "repeats": repeats}


def cycle_wire(length: int) -> dict[str, Any]:
    """A tool-call cycle's data on the loop verdict."""
    return {"cycleLength": length}


def shell_exit_code(raw_output: Mapping[str, Any] | None) -> Any:
    """The exit code a shell tool reports in its raw output (None when it reports none)."""
    return (raw_output or {}).get("exitCode")
