"""The chaos suite's invariant checker (tests/support/chaos_check.py) over hand-made logs and
client records: each invariant flags the fault it exists for, and passes a clean record."""

from __future__ import annotations

from typing import Any

from tests.support.chaos_check import (
    ClientRecord,
    FaultAt,
    LeaseSeen,
    Notice,
    Received,
    SeqFaultKind,
    Stored,
    behind_at_end,
    double_runs,
    first_arrivals,
    log_gaps,
    lost_acks,
    seq_faults,
    strandings,
    takeovers,
)


def frame(seq: int, kind: str, **extra: Any) -> dict[str, Any]:
    return {"method": "_agentd/event", "params": {"kind": kind, "_meta": {"agentd": {"seq": seq, **extra}}}}


def started(seq: int, request_id: str | None) -> Stored:
    return Stored(seq, "turn_started", {"requestId": request_id} if request_id else {})


# seq → forms: 1, 2 and 4 one frame each; 3 (a message) live as an event or replayed as a chunk.
LIVE3 = frame(3, "agent_message")
REPLAY3 = frame(3, "chunk", final=True)
FORMS: dict[int, list[list[dict[str, Any]]]] = {
    1: [[frame(1, "a")]],
    2: [[frame(2, "b")]],
    3: [[LIVE3], [REPLAY3]],
    4: [[frame(4, "d")]],
}


def record(*seqs: int, start: int = 0, t0: float = 0.0, notices: tuple[Notice, ...] = ()) -> ClientRecord:
    frames = [Received(t0 + i * 0.1, s, FORMS[s][0][0]) for i, s in enumerate(seqs)]
    return ClientRecord("c", "s1", start, frames, list(notices))


def test_an_acked_prompt_with_no_turn_and_no_queue_row_is_lost() -> None:
    logs = {"s1": [started(1, "r1")], "s2": [started(1, "r3")]}
    acked = {"r1": "s1", "r2": "s1", "r3": "s1", "r4": "s2"}
    # r2 never started and is not queued; r3 started, but in another session; r4 waits queued.
    assert lost_acks(acked, logs, queued=["r4"]) == ["r2", "r3"]
    assert lost_acks({"r1": "s1"}, logs, queued=[]) == []


def test_a_request_id_that_started_two_turns_ran_twice() -> None:
    logs = {"s1": [started(1, "r1"), started(2, "r2"), started(3, "r1"), started(4, None), started(5, None)]}
    assert double_runs(logs) == {"r1": 2}
    assert double_runs({"s1": [started(1, "r1")], "s2": [started(1, "r1")]}) == {}  # different sessions


def test_a_hole_in_the_log_is_a_gap() -> None:
    assert log_gaps({"s1": [started(1, None), started(3, None)], "s2": []}) == [("s1", 2)]


def test_a_clean_record_in_either_form_has_no_seq_fault() -> None:
    assert seq_faults(record(1, 2, 3, 4), FORMS) == []
    replayed = record(1, 2)
    replayed.frames += [Received(1.0, 3, REPLAY3), Received(1.1, 4, FORMS[4][0][0])]
    assert seq_faults(replayed, FORMS) == []


def test_a_seq_received_again_after_a_reattach_is_a_duplicate() -> None:
    faults = seq_faults(record(1, 2, 3, 2, 4), FORMS)
    assert [(f.seq, f.kind) for f in faults] == [(2, SeqFaultKind.DUPLICATE)]
    # Before its cursor: it had that one already when it attached.
    assert [f.kind for f in seq_faults(record(2, 3, start=2), FORMS)] == [SeqFaultKind.DUPLICATE]


def test_a_message_sent_as_its_final_chunk_and_as_its_event_under_one_seq_is_a_duplicate() -> None:
    rec = record(1, 2)
    rec.frames += [Received(1.0, 3, REPLAY3), Received(1.0, 3, LIVE3)]
    (fault,) = seq_faults(rec, FORMS)
    assert (fault.seq, fault.kind) == (3, SeqFaultKind.DUPLICATE)


def test_other_content_under_a_seq_is_divergent_and_an_unknown_seq_is_flagged() -> None:
    rec = record(1)
    rec.frames += [Received(1.0, 2, frame(2, "something else")), Received(1.1, 9, frame(9, "x"))]
    assert [(f.seq, f.kind) for f in seq_faults(rec, FORMS)] == [
        (2, SeqFaultKind.DIVERGENT),
        (9, SeqFaultKind.UNKNOWN),
        (3, SeqFaultKind.GAP),
        (4, SeqFaultKind.GAP),
    ]


def test_a_skipped_seq_is_a_gap_unless_it_has_no_frame_to_send() -> None:
    assert [(f.seq, f.kind) for f in seq_faults(record(1, 3, 4), FORMS)] == [(2, SeqFaultKind.GAP)]
    silent = {**FORMS, 2: [[frame(2, "b")], []]}  # e.g. an empty message: nothing in replay
    assert seq_faults(record(1, 3, 4), silent) == []


def test_a_lower_seq_after_a_higher_one_is_out_of_order() -> None:
    kinds = [(f.seq, f.kind) for f in seq_faults(record(1, 3, 2, 4), FORMS)]
    assert (2, SeqFaultKind.OUT_OF_ORDER) in kinds


def test_a_client_that_gets_a_seq_late_without_being_told_is_stranded() -> None:
    on_time = record(1, 2, 3, 4)
    late = ClientRecord("late", "s1", 0, [Received(0.0, 1, frame(1, "a")), Received(9.0, 2, frame(2, "b"))])
    first = first_arrivals([on_time, late])
    assert strandings(on_time, FORMS, first, bound=4) == []
    found = strandings(late, FORMS, first, bound=4)
    assert [(s.seq, s.delay) for s in found] == [(2, 8.9), (3, None), (4, None)]
    assert behind_at_end(late, FORMS) == 2 and behind_at_end(on_time, FORMS) == 0


def test_a_client_told_to_resync_in_time_is_not_stranded() -> None:
    on_time = record(1, 2)
    on_time.frames += [Received(10.0, 3, LIVE3), Received(10.1, 4, FORMS[4][0][0])]
    late = [Received(0.0, 1, frame(1, "a")), Received(9.0, 2, frame(2, "b"))]
    told = ClientRecord("told", "s1", 0, late, [Notice(3.0, "lease_lost")])
    first = first_arrivals([on_time, told])
    assert [s.seq for s in strandings(told, FORMS, first, bound=4)] == [3, 4]  # 2 excused, not 3 and 4
    told.notices.append(Notice(8.0, "disconnected"))
    assert strandings(told, FORMS, first, bound=4) == []


def test_takeover_time_is_until_a_new_token_holds_each_session_the_faulted_replica_held() -> None:
    leases = [
        LeaseSeen(0.0, "s1", "a", 1),
        LeaseSeen(0.0, "s2", "b", 1),
        LeaseSeen(0.0, "s3", "a", 1),
        LeaseSeen(1.0, "s3", "c", 2),  # s3 moved away before the fault
        LeaseSeen(6.5, "s1", "b", 2),
    ]
    (t,) = takeovers([FaultAt(2.0, "a", "kill9")], leases)
    assert (t.session_id, t.seconds) == ("s1", 4.5)
    (never,) = takeovers([FaultAt(2.0, "b", "sigstop")], leases)
    assert (never.session_id, never.seconds) == ("s2", None)
    # Only until the next fault: a change after it is that fault's doing.
    first, second = takeovers([FaultAt(2.0, "a", "sigstop"), FaultAt(5.0, "c", "kill9")], leases)
    assert (first.session_id, first.seconds) == ("s1", None) and second.session_id == "s3"
