"""The files reach the xdist workers longest first, each file's tests in their own order
(tests/support/file_order.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.file_order import DURATIONS, UNLISTED_S, from_report, load, longest_first
from tests.support.paths import REPO_ROOT


@dataclass
class Item:
    nodeid: str


def ids(items: list[Item]) -> list[str]:
    return [i.nodeid for i in items]


def test_files_go_longest_first_and_keep_their_own_order() -> None:
    items = [Item(n) for n in ("a.py::t1", "b.py::t1", "a.py::t2", "c.py::t1", "b.py::t2")]
    ordered = longest_first(items, {"a.py": 1.0, "b.py": 30.0, "c.py": 5.0})
    assert ids(ordered) == ["b.py::t1", "b.py::t2", "c.py::t1", "a.py::t1", "a.py::t2"]


def test_an_unlisted_file_counts_by_its_tests_and_ties_keep_the_collection_order() -> None:
    items = [Item(f"new.py::t{i}") for i in range(10)] + [Item("old.py::t"), Item("tie.py::t")]
    ordered = longest_first(items, {"old.py": 10 * UNLISTED_S - 0.1, "tie.py": 10 * UNLISTED_S})
    assert [i.nodeid.split("::")[0] for i in ordered][9:] == ["new.py", "tie.py", "old.py"]
    assert ids(longest_first(items, {})) == ids(items)  # no table: the collection order


def test_a_report_sums_each_files_setup_call_and_teardown() -> None:
    report = """
============================= slowest durations ==============================
60.21s call     tests/e2e/x/test_a.py::test_one[postgres]
2.00s setup    tests/e2e/x/test_a.py::test_one[postgres]
0.50s teardown tests/e2e/x/test_a.py::test_two
1.25s call     tests/unit/test_b.py::test_three
(177 durations < 0.005s hidden.  Use -vv to show these durations.)
"""
    assert from_report(report) == pytest.approx(
        {"tests/e2e/x/test_a.py": 62.71, "tests/unit/test_b.py": 1.25}
    )


def test_the_table_is_read_and_names_files_of_this_suite(tmp_path: Path) -> None:
    table = load()
    assert table, f"{DURATIONS} is missing or empty"
    known = [name for name in table if (REPO_ROOT / name).is_file()]
    assert len(known) >= 0.8 * len(table), "most files in the table are gone: regenerate it"
    assert load(tmp_path / "none.txt") == {}


def test_this_run_hands_out_its_files_longest_first(request: pytest.FixtureRequest) -> None:
    # conftest's `pytest_collection_modifyitems` applied the order (in a run of more than
    # this file: alone, any order of one file is already sorted).
    items = request.session.items
    assert ids(items) == ids(longest_first(items, load()))  # type: ignore[arg-type]
