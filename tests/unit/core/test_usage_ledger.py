"""The usage ledger's dicts (issue 32: written out without a call per lane or key) are the
ledger's records: `to_dict` is the totals' records composed, `from_dict` reads them back, and
merging an empty ledger changes nothing."""

from __future__ import annotations

import copy
import random

from agentd.core import Price, Usage, UsageLedger, UsageTotals


def _ledger(rng: random.Random) -> UsageLedger:
    ledger = UsageLedger()
    for _ in range(rng.randrange(0, 6)):
        lane = rng.choice(["primary", "fallback", "child/primary"])
        if rng.random() < 0.15:
            ledger.record(lane, None)  # unreadable usage: dirty
            continue
        usage = Usage(
            input_tokens=rng.randrange(0, 5000),
            output_tokens=rng.randrange(0, 500),
            cache_read_tokens=rng.randrange(0, 300),
            cache_write_tokens=rng.randrange(0, 300),
        )
        price = rng.choice([None, Price(3.0, 15.0, 0.3, 3.75), Price(0.1234567, 0.7654321)])
        ledger.record(lane, usage, price)
    return ledger


def _composed(ledger: UsageLedger) -> dict[str, object]:
    return {**ledger.total.to_dict(), "byLane": {k: v.to_dict() for k, v in ledger.by_lane.items()}}


def test_to_dict_is_the_totals_records_composed_and_reads_back() -> None:
    rng = random.Random(32)
    for _ in range(500):
        ledger = _ledger(rng)
        d = ledger.to_dict()
        assert d == _composed(ledger)
        assert list(d) == list(_composed(ledger))  # the stored key order
        assert list(d["byLane"]) == list(ledger.by_lane)
        back = UsageLedger.from_dict(d)
        assert back.to_dict() == d


def test_from_dict_of_an_older_record_with_keys_missing() -> None:
    assert UsageTotals.from_dict({"inputTokens": 3}) == UsageTotals(input_tokens=3)
    assert UsageLedger.from_dict({"inputTokens": 3}).by_lane == {}
    assert UsageLedger.from_dict(None) == UsageLedger()


def test_merging_an_empty_ledger_changes_nothing_and_a_full_one_adds() -> None:
    rng = random.Random(7)
    for _ in range(200):
        ledger = _ledger(rng)
        before = ledger.to_dict()
        ledger.merge(UsageLedger())
        assert ledger.to_dict() == before
        other = _ledger(rng)
        expected = copy.deepcopy(ledger)
        expected.total.merge(other.total)
        for lane, totals in other.by_lane.items():
            expected.by_lane.setdefault(lane, UsageTotals()).merge(totals)
        ledger.merge(other)
        assert ledger.to_dict() == expected.to_dict()


def test_a_dirty_ledger_without_lanes_still_merges() -> None:
    ledger = UsageLedger()
    ledger.merge(UsageLedger(UsageTotals(dirty=True)))
    assert ledger.total.dirty
    ledger.merge(UsageLedger(UsageTotals(cache_write_tokens=4)))
    assert ledger.total.cache_write_tokens == 4


def test_merge_wire_is_merge_of_from_dict() -> None:
    """A turn's usage joins the session's ledger from its dict (`merge_wire`) exactly as the
    ledger read back from that dict would (`merge(from_dict(...))`): same totals, same lanes,
    missing keys read as zero, an empty or absent dict adding nothing."""
    rng = random.Random(32)
    for _ in range(300):
        session, turn = _ledger(rng), _ledger(rng)
        wire = turn.to_dict()
        if rng.random() < 0.2:
            wire = {k: v for k, v in wire.items() if rng.random() < 0.5}  # an older record
        a, b = copy.deepcopy(session), copy.deepcopy(session)
        a.merge(UsageLedger.from_dict(wire))
        b.merge_wire(wire)
        assert b == a
        assert b.to_dict() == a.to_dict()
    for nothing in (None, {}):
        ledger = _ledger(rng)
        before = copy.deepcopy(ledger)
        ledger.merge_wire(nothing)
        assert ledger == before
