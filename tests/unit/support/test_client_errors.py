"""The test client's reading of a refusal: retry it (`data.retryable`) or take it as final."""

from __future__ import annotations

from tests.support.client import is_retryable


def test_only_a_refusal_marked_retryable_is_retried() -> None:
    failed = {"code": -32603, "message": "the database refused its recovery writes; retry"}
    assert is_retryable({**failed, "data": {"reason": "session_failed", "retryable": True}})
    assert not is_retryable({**failed, "data": {"reason": "internal", "retryable": False}})
    assert not is_retryable({**failed, "data": {"reason": "resync_required"}})
    assert not is_retryable(failed)
    assert not is_retryable({**failed, "data": "retryable"})
