"""New Python objects from the C library's malloc once the server has started (issue 32
item 3: memory after a load).

CPython's small-object allocator (pymalloc) returns a 1 MiB arena to the OS only when every
block in it is free. After a load, a few hundred long-lived survivors allocated during it
(uvloop's and asyncio's free lists, per-connection leftovers) pin ~19 of the load's arenas,
which no collection or release gives back (bench/RESULTS.md "Issue 32, hmem"). Under glibc's
malloc the same survivors pin 4 KiB pages, and the idle trim's `malloc_trim(0)` returns
every free page between them.

Running the whole process under `PYTHONMALLOC=malloc` costs idle memory (+1.7 MiB measured:
glibc's per-block header on the ~330,000 objects the start-up imports). So the switch comes
after the start-up: `switch_to_malloc()` makes the object and "mem" domains allocate with the raw
(malloc) domain's functions, and keeps pymalloc's `realloc` and `free`, which already hand
any block that is not in one of their arenas to the raw allocator (as for blocks over 512
bytes) — the start-up's objects stay in pymalloc's dense arenas and are freed there.
Through the public `PyMem_GetAllocator`/`PyMem_SetAllocator`, with the GIL held
(`ctypes.pythonapi`). Left alone (returns False) unless both domains are plain pymalloc:
debug hooks (`-X dev`, `PYTHONMALLOC=..._debug`), tracemalloc or `PYTHONMALLOC=malloc` each
install functions of their own, with blocks the raw allocator must not free.

A `realloc` from nothing (a list's first append) still goes to pymalloc: pymalloc's realloc
starts such a block with its own malloc. Per-object CPU: see bench/RESULTS.md "Issue 32,
hmalloc". `sys.getallocatedblocks()` counts frees of malloc's blocks too once switched (it
goes negative): a figure, not a state anything here reads.
"""

from __future__ import annotations

import ctypes

RAW, MEM, OBJ = 0, 1, 2  # PyMemAllocatorDomain


class _Allocator(ctypes.Structure):
    """PyMemAllocatorEx."""

    _fields_ = [
        ("ctx", ctypes.c_void_p),
        ("malloc", ctypes.c_void_p),
        ("calloc", ctypes.c_void_p),
        ("realloc", ctypes.c_void_p),
        ("free", ctypes.c_void_p),
    ]

    def fields(self) -> tuple[int | None, ...]:
        return (self.ctx, self.malloc, self.calloc, self.realloc, self.free)


def _api() -> ctypes.PyDLL:
    api = ctypes.pythonapi  # a PyDLL: the GIL stays held during the calls
    api.PyMem_GetAllocator.argtypes = [ctypes.c_int, ctypes.POINTER(_Allocator)]
    api.PyMem_GetAllocator.restype = None
    api.PyMem_SetAllocator.argtypes = [ctypes.c_int, ctypes.POINTER(_Allocator)]
    api.PyMem_SetAllocator.restype = None
    return api


def _get(api: ctypes.PyDLL, domain: int) -> _Allocator:
    found = _Allocator()
    api.PyMem_GetAllocator(domain, ctypes.byref(found))
    return found


def switch_to_malloc() -> bool:
    """From now on new objects come from malloc (see the module's docstring); whether it
    switched (False: not plain pymalloc, or already switched)."""
    api = _api()
    raw, mem, obj = _get(api, RAW), _get(api, MEM), _get(api, OBJ)
    if mem.fields() != obj.fields() or obj.malloc == raw.malloc or obj.ctx is not None:
        return False
    mixed = _Allocator(None, raw.malloc, raw.calloc, obj.realloc, obj.free)
    api.PyMem_SetAllocator(MEM, ctypes.byref(mixed))
    api.PyMem_SetAllocator(OBJ, ctypes.byref(mixed))
    return True


def allocator_in_use() -> str:
    """Where new objects come from: "malloc" (switched, or `PYTHONMALLOC=malloc`), or
    "pymalloc" (or whatever the interpreter was started with)."""
    api = _api()
    return "malloc" if _get(api, OBJ).malloc == _get(api, RAW).malloc else "pymalloc"
