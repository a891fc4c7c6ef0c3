from agentd.core import (
    checkpoint_wire,
    cycle_wire,
    repetition_wire,
    retry_bucket_wire,
    retry_decision_wire,
    retry_snapshot_wire,
    shell_exit_code,
)


def test_a_retry_decision_spells_its_delay_in_seconds() -> None:
    assert list(retry_decision_wire("continue", "rate_limit", 1, 5, 2.5, "backoff").items()) == [
        ("decision", "continue"),
        ("bucket", "rate_limit"),
        ("attempt", 1),
        ("limit", 5),
        ("delaySeconds", 2.5),
        ("reason", "backoff"),
    ]


def test_the_retry_snapshot_nests_its_buckets() -> None:
    bucket = retry_bucket_wire(2, 3, False, "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z")
    assert retry_snapshot_wire(3600.0, {"tool": bucket}) == {
        "windowSeconds": 3600.0,
        "buckets": {
            "tool": {
                "count": 2,
                "limit": 3,
                "exhausted": False,
                "lastFailureAt": "2026-01-01T00:00:00Z",
                "oldestExpiresAt": "2026-01-01T01:00:00Z",
            }
        },
    }


def test_detector_and_checkpoint_records() -> None:
    assert checkpoint_wire("abc", "/w/r.md", 40, "budget_exhausted:40") == {
        "commit": "abc",
        "resultPath": "/w/r.md",
        "limit": 40,
        "marker": "budget_exhausted:40",
    }
    assert repetition_wire("repetitive_text", "ab", 9) == {
        "reason": "repetitive_text",
        "pattern": "ab",
        "patternLength": 2,
        "repeats": 9,
    }
    assert cycle_wire(3) == {"cycleLength": 3}


def test_the_shell_exit_code_is_read_from_the_raw_output() -> None:
    assert shell_exit_code({"exitCode": 2}) == 2
    assert shell_exit_code({}) is None
    assert shell_exit_code(None) is None
