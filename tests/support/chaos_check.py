"""The invariants a multi-replica deployment promises (issue 26), checked after the fact over
what the database holds and what every client recorded — pure functions over plain data,
so each is unit-tested with hand-made records (tests/unit/support/) and reused by the chaos
driver (tests/support/chaos.py), its CI short mode (tests/e2e/chaos/) and bench/chaos.py.

- no acknowledged prompt lost: every acked `requestId` started a turn or is still queued;
- no prompt ran twice: one `turn_started` per `requestId`;
- the log has no gap;
- each client got each seq once, in order, in one of the forms the stored event renders to
  (live or replay), with no seq skipped;
- no client stranded: each seq reached each client within `bound` of its first arrival at
  any client, or the client was told (`_agentd/resync_required`, or its connection ended)
  around then; and every client reached the end of the log;
- takeover time: per session whose owner was killed or stopped, seconds until another lease
  token held it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Frame = dict[str, Any]  # a JSON-RPC notification as the client received it


@dataclass(frozen=True)
class Stored:
    """One row of the events table."""

    seq: int
    kind: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class Received:
    """A durable frame a client received (it carries `_meta.agentd.seq`, not `transient`)."""

    t: float
    seq: int
    frame: Frame


@dataclass(frozen=True)
class Notice:
    """The client was told its stream ended: `resync_required`, or its connection closed."""

    t: float
    reason: str


@dataclass
class ClientRecord:
    name: str
    session_id: str
    start_seq: int = 0  # it first attached after this seq
    frames: list[Received] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)

    @property
    def last_seq(self) -> int:
        return self.frames[-1].seq if self.frames else self.start_seq


class SeqFaultKind(enum.Enum):
    DUPLICATE = "duplicate"  # the seq again, later or in two forms at once
    OUT_OF_ORDER = "out_of_order"  # a lower seq after a higher one, never seen before
    DIVERGENT = "divergent"  # frames that are not what the stored event renders to
    UNKNOWN = "unknown"  # a seq the log does not hold
    GAP = "gap"  # a seq skipped


@dataclass(frozen=True)
class SeqFault:
    client: str
    session_id: str
    seq: int
    kind: SeqFaultKind
    detail: str = ""


@dataclass(frozen=True)
class Stranding:
    """A client that got a seq late (or never) without being told."""

    client: str
    session_id: str
    seq: int
    delay: float | None  # None: never received


@dataclass(frozen=True)
class FaultAt:
    t: float
    replica: str
    kind: str  # kill9, sigstop, …


@dataclass(frozen=True)
class LeaseSeen:
    t: float
    session_id: str
    owner: str
    token: int


@dataclass(frozen=True)
class Takeover:
    session_id: str
    fault: FaultAt
    seconds: float | None  # None: never taken over while observed


def lost_acks(
    acked: Mapping[str, str], logs: Mapping[str, Sequence[Stored]], queued: Iterable[str]
) -> list[str]:
    """Acked requestIds (→ session) with no `turn_started` in their session's log and no
    queue row left."""
    still_queued = set(queued)
    started = {
        (sid, e.payload.get("requestId"))
        for sid, log in logs.items()
        for e in log
        if e.kind == "turn_started"
    }
    return sorted(r for r, sid in acked.items() if (sid, r) not in started and r not in still_queued)


def double_runs(logs: Mapping[str, Sequence[Stored]]) -> dict[str, int]:
    """requestIds that started more than one turn, with how many."""
    counts: dict[tuple[str, str], int] = {}
    for sid, log in logs.items():
        for e in log:
            rid = e.payload.get("requestId") if e.kind == "turn_started" else None
            if rid is not None:
                counts[sid, rid] = counts.get((sid, rid), 0) + 1
    return {rid: n for (_, rid), n in counts.items() if n > 1}


def log_gaps(logs: Mapping[str, Sequence[Stored]]) -> list[tuple[str, int]]:
    """(session, seq) missing from a log that should run 1, 2, … without a hole."""
    out = []
    for sid, log in logs.items():
        seqs = {e.seq for e in log}
        out += [(sid, s) for s in range(1, max(seqs, default=0) + 1) if s not in seqs]
    return out


Forms = Mapping[int, Sequence[Sequence[Frame]]]  # seq → every frame list it may arrive as


def _runs(frames: Sequence[Received]) -> list[tuple[int, list[Frame]]]:
    """Consecutive frames of one seq, grouped (a user message of two blocks: two frames)."""
    runs: list[tuple[int, list[Frame]]] = []
    for r in frames:
        if runs and runs[-1][0] == r.seq:
            runs[-1][1].append(r.frame)
        else:
            runs.append((r.seq, [r.frame]))
    return runs


def _concatenation(run: Sequence[Frame], forms: Sequence[Sequence[Frame]]) -> bool:
    """Whether `run` is two or more of `forms` one after the other (one seq sent twice)."""
    if not run:
        return True
    return any(
        len(f) and list(run[: len(f)]) == list(f) and _concatenation(run[len(f) :], forms) for f in forms
    )


def seq_faults(record: ClientRecord, forms: Forms) -> list[SeqFault]:
    """Each seq once, in order, in one form, nothing skipped — for one client."""
    out: list[SeqFault] = []

    def fault(seq: int, kind: SeqFaultKind, detail: str = "") -> None:
        out.append(SeqFault(record.name, record.session_id, seq, kind, detail))

    seen: set[int] = set()
    last = record.start_seq
    for seq, run in _runs(record.frames):
        if seq in seen or seq <= record.start_seq:
            fault(seq, SeqFaultKind.DUPLICATE, "received again")
            continue
        if seq < last:
            fault(seq, SeqFaultKind.OUT_OF_ORDER, f"after {last}")
        seen.add(seq)
        if seq not in forms:
            fault(seq, SeqFaultKind.UNKNOWN)
        elif not any(list(run) == list(f) for f in forms[seq]):
            if _concatenation(run, forms[seq]):
                fault(seq, SeqFaultKind.DUPLICATE, f"{len(run)} frames: the event in two forms")
            else:
                fault(seq, SeqFaultKind.DIVERGENT, f"got {run!r}")
        skipped = [s for s in range(last + 1, seq) if s in forms and not any(len(f) == 0 for f in forms[s])]
        for s in skipped:
            fault(s, SeqFaultKind.GAP, f"between {last} and {seq}")
        last = max(last, seq)
    return out


def first_arrivals(records: Iterable[ClientRecord]) -> dict[tuple[str, int], float]:
    """(session, seq) → when the first client got it: the time it was out."""
    first: dict[tuple[str, int], float] = {}
    for rec in records:
        for r in rec.frames:
            key = (rec.session_id, r.seq)
            if key not in first or r.t < first[key]:
                first[key] = r.t
    return first


def strandings(
    record: ClientRecord, forms: Forms, first: Mapping[tuple[str, int], float], bound: float
) -> list[Stranding]:
    """Seqs this client got more than `bound` s after any client did, or never, without a
    notice within `bound` of that first arrival. Seqs nobody received are judged only at
    the end (`behind_at_end`)."""
    got: dict[int, float] = {}
    for r in record.frames:
        got.setdefault(r.seq, r.t)
    out = []
    for seq in sorted(forms):
        if seq <= record.start_seq or any(len(f) == 0 for f in forms[seq]):
            continue
        out_at = first.get((record.session_id, seq))
        if out_at is None:
            continue
        at = got.get(seq)
        if at is not None and at <= out_at + bound:
            continue
        if any(out_at - bound <= n.t <= out_at + bound for n in record.notices):
            continue
        out.append(Stranding(record.name, record.session_id, seq, None if at is None else at - out_at))
    return out


def behind_at_end(record: ClientRecord, forms: Forms) -> int:
    """How many seqs with frames the client never got (0: it reached the end of the log)."""
    got = {r.seq for r in record.frames}
    return sum(
        1
        for s, fs in forms.items()
        if s > record.start_seq and s not in got and not any(len(f) == 0 for f in fs)
    )


def takeovers(faults: Sequence[FaultAt], leases: Sequence[LeaseSeen]) -> list[Takeover]:
    """For each fault that took a replica away (kill -9, SIGSTOP), each session whose lease
    it held then: seconds until a new token held that session (another replica, or the
    same one restarted) — None when none did before the next fault (a paused replica that
    woke up before anyone took its lease keeps it)."""
    out = []
    for i, f in enumerate(faults):
        until_t = faults[i + 1].t if i + 1 < len(faults) else float("inf")
        held: dict[str, int] = {}  # session → token the faulted replica held at the fault
        for seen in leases:
            if seen.t > f.t:
                break
            if seen.owner == f.replica:
                held[seen.session_id] = seen.token
            elif seen.session_id in held:
                del held[seen.session_id]
        for sid, token in sorted(held.items()):
            after = next(
                (s.t for s in leases if f.t < s.t < until_t and s.session_id == sid and s.token != token),
                None,
            )
            out.append(Takeover(sid, f, None if after is None else after - f.t))
    return out
