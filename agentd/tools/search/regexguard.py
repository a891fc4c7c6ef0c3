"""Refuse grep patterns whose compilation alone would freeze the server.

The `regex` module expands counted repetitions when it compiles, in C, holding the GIL:
`((((a{100}){100}){100}){100})` (10^8 copies) stalls the whole process for minutes.
`expanded_size` is a cheap upper-bound estimate of that expansion (the product of the
counts along each nesting path, summed over the pattern), computed by a scan that
understands just enough syntax: escapes (with `\\p{..}`-style braces), character
classes, groups and `{m}` / `{m,n}` quantifiers. A pattern over the limit is refused
before it reaches the compiler.
"""

from __future__ import annotations

import re

MAX_PATTERN_CHARS = 10_000
MAX_EXPANDED_SIZE = 50_000  # ~tens of milliseconds of compilation

_COUNTED = re.compile(r"\{(\d*)(,?)(\d*)\}")
_BRACED_ESCAPES = frozenset("pPNxgu")  # \p{L}, \N{NAME}, \x{41}, \g<..> (no brace: harmless)


class _Frame:
    __slots__ = ("last", "total")

    def __init__(self) -> None:
        self.total = 0  # everything in this group so far
        self.last = 0  # the last atom's size, which a following quantifier multiplies

    def atom(self, size: int) -> None:
        self.total += size
        self.last = size

    def repeat(self, times: int) -> None:
        self.total += self.last * (times - 1)
        self.last *= times


def _class_end(p: str, i: int) -> int:
    """Index just past the character class opening at p[i] == '['."""
    n = len(p)
    j = i + 1
    if j < n and p[j] == "^":
        j += 1
    if j < n and p[j] == "]":
        j += 1
    while j < n and p[j] != "]":
        j += 2 if p[j] == "\\" else 1
    return j + 1


def expanded_size(p: str, cap: int = MAX_EXPANDED_SIZE) -> int:
    """An upper-bound estimate of the pattern's size once counted repeats are expanded;
    the scan stops as soon as it passes `cap`."""
    frames = [_Frame()]
    i, n = 0, len(p)
    while i < n:
        c = p[i]
        if c == "\\":
            j = i + 2
            if i + 1 < n and p[i + 1] in _BRACED_ESCAPES and j < n and p[j] == "{":
                close = p.find("}", j)
                j = n if close < 0 else close + 1
            frames[-1].atom(1)
            i = j
        elif c == "[":
            frames[-1].atom(1)
            i = _class_end(p, i)
        elif c == "(":
            frames.append(_Frame())
            i += 1
        elif c == ")":
            if len(frames) > 1:
                inner = frames.pop()
                frames[-1].atom(max(inner.total, 1))
            i += 1
        elif c == "{" and (m := _COUNTED.match(p, i)) and (m.group(1) or m.group(3)):
            lo = int(m.group(1) or 0)
            hi = int(m.group(3)) if m.group(3) else lo
            frames[-1].repeat(max(lo, hi, 1))
            i = m.end()
        else:
            frames[-1].atom(1)
            i += 1
        if sum(f.total for f in frames) > cap:
            return cap + 1
    while len(frames) > 1:  # unbalanced: the compiler will say so; count it anyway
        inner = frames.pop()
        frames[-1].atom(inner.total)
    return frames[0].total


def refusal(pattern: str) -> str | None:
    """Why `pattern` must not be compiled, or None."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"the pattern is {len(pattern)} characters long; at most {MAX_PATTERN_CHARS} are accepted"
    if expanded_size(pattern) > MAX_EXPANDED_SIZE:
        return (
            "its counted repetitions (such as (x{100}){100}) expand to more than "
            f"{MAX_EXPANDED_SIZE} elements, too big to compile; use smaller counts or + and *"
        )
    return None
