"""The measured-turn benches' shared command line (bench/turnkit.py's turn_parser): the
options and defaults, `--tree` pointing the server at another tree, and the two benches that
use it (bench/loop_passes.py, bench/object_counts.py) offering them beside their own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bench_modules import bench_module
from tests.support.paths import REPO_ROOT

turnkit = bench_module("turnkit")


def test_defaults_and_choices() -> None:
    ns = turnkit.parse_turn_args(turnkit.turn_parser("doc"), [])
    assert (ns.turns, ns.db, ns.kind, ns.tree) == (200, "sqlite", "trivial", None)
    ns = turnkit.parse_turn_args(
        turnkit.turn_parser("doc", turns=7), ["--db", "postgres", "--kind", "one-tool"]
    )
    assert (ns.turns, ns.db, ns.kind) == (7, "postgres", "one-tool")
    with pytest.raises(SystemExit):
        turnkit.parse_turn_args(turnkit.turn_parser("doc"), ["--kind", "two-tool"])


def test_tree_points_the_server_at_that_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turnkit, "ROOT", turnkit.ROOT)
    turnkit.parse_turn_args(turnkit.turn_parser("doc"), ["--tree", str(tmp_path)])
    assert tmp_path.resolve() == turnkit.ROOT


@pytest.mark.parametrize(("bench", "own"), [("loop_passes.py", "--chain"), ("object_counts.py", "--calls")])
def test_both_benches_take_the_shared_options_and_their_own(bench: str, own: str) -> None:
    shown = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / bench), "--help"],
        capture_output=True, text=True, check=True, cwd=REPO_ROOT,
    ).stdout  # fmt: skip
    for option in ("--turns", "--db", "--kind", "--tree", own):
        assert option in shown, shown
