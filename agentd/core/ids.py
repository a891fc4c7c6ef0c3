"""Random hex for ids that need only be unique (queue entries, messages, thoughts): bits
from a Mersenne Twister seeded from `os.urandom` once per process (and again in a forked
child), not an `os.urandom` system call per id (five a trivial turn, issue 32). No such id
is a secret — whoever may see a session sees its ids; tokens and anything else that must
not be guessed keep `secrets`/`os.urandom`. Same format either way: `nbytes * 2` lowercase
hex digits."""

from __future__ import annotations

import os
import random

# Off: one `os.urandom` call per id, as before (tests run both).
FAST_IDS = True

_RNG = random.Random(os.urandom(32))
# The generator's own call, for the hot paths that format the id inline (one C call per id).
bits = _RNG.getrandbits


def _reseed() -> None:
    _RNG.seed(os.urandom(32))  # a forked child must not repeat its parent's ids


os.register_at_fork(after_in_child=_reseed)


def random_hex(nbytes: int) -> str:
    """`nbytes` random bytes as `2 * nbytes` lowercase hex digits (`os.urandom(n).hex()`)."""
    if FAST_IDS:
        return f"{bits(nbytes * 8):0{nbytes * 2}x}"
    return os.urandom(nbytes).hex()
