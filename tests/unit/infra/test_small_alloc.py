"""New objects from malloc once switched (agentd/infra/small_alloc.py): the switch applies,
the objects made before it are still freed by pymalloc, and it stays off where the domains
are not plain pymalloc. Each case in a fresh interpreter: the switch is for the process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.paths import REPO_ROOT

PROBE = """
import gc, json, sys
from agentd.infra import allocator_in_use, switch_to_malloc

def new_pymalloc_blocks():
    before = sys.getallocatedblocks()
    kept = [object() for _ in range(20000)]
    grew = sys.getallocatedblocks() - before
    del kept
    return grew

seen = {"before": allocator_in_use(), "blocks_before": new_pymalloc_blocks() >= 20000}
early = [str(i) * 3 for i in range(50000)]  # made by pymalloc
seen["switched"] = switch_to_malloc()
seen["again"] = switch_to_malloc()
seen["after"] = allocator_in_use()
seen["blocks_after"] = new_pymalloc_blocks() >= 20000
late = [str(i) * 3 for i in range(50000)]
del early, late  # both kinds freed (pymalloc's free hands malloc's blocks on)
gc.collect()
print(json.dumps(seen))
"""


def probe(**env: str) -> dict[str, object]:
    environ = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONMALLOC", "PYTHONTRACEMALLOC", "PYTHONDEVMODE")
    }
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
        env={**environ, **env},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_the_switch_sends_new_objects_to_malloc_and_frees_both_kinds() -> None:
    assert probe() == {
        "before": "pymalloc", "blocks_before": True, "switched": True, "again": False,
        "after": "malloc", "blocks_after": False,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("env", "in_use"),
    [({"PYTHONMALLOC": "malloc"}, "malloc"), ({"PYTHONMALLOC": "pymalloc_debug"}, "pymalloc"),
     ({"PYTHONTRACEMALLOC": "1"}, "pymalloc"), ({"PYTHONDEVMODE": "1"}, "pymalloc")],
    ids=["malloc", "debug-hooks", "tracemalloc", "dev-mode"],
)  # fmt: skip
def test_left_alone_unless_plain_pymalloc(env: dict[str, str], in_use: str) -> None:
    seen = probe(**env)
    assert seen["switched"] is False and seen["again"] is False
    assert seen["before"] == seen["after"] == in_use
