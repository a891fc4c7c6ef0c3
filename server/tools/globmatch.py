"""Glob matching in linear-ish time, without regular expressions.

A glob translated to a backtracking regex (`*a*a*a*a*a*c` -> `[^/]*a[^/]*a...`) takes
time exponential in the number of stars on a long name, and Python's `re` holds the GIL
while it does, freezing the whole server. Here a segment is matched with the classic
two-pointer wildcard algorithm (O(len(name) * len(segment)) worst case), and `**`
segments with a small set-of-positions walk over the path's parts.

Syntax: `*` any run of characters, `?` one character, `[abc]` / `[a-z]` / `[!abc]`
(`[^abc]`) a character class; a `]` right after the opening bracket (or its `!`) is
literal, an unclosed `[` is a literal `[`, and a backslash is a literal character.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class _Kind(Enum):
    LITERAL = "literal"
    ANY = "any"  # ?
    STAR = "star"  # *
    CLASS = "class"  # [...]


@dataclass(frozen=True)
class _Token:
    kind: _Kind
    char: str = ""
    ranges: tuple[tuple[str, str], ...] = ()
    negate: bool = False

    def accepts(self, ch: str) -> bool:
        if self.kind is _Kind.LITERAL:
            return ch == self.char
        if self.kind is _Kind.ANY:
            return True
        inside = any(lo <= ch <= hi for lo, hi in self.ranges)
        return inside != self.negate


def _class_ranges(body: str) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            out.append((body[i], body[i + 2]))
            i += 3
        else:
            out.append((body[i], body[i]))
            i += 1
    return tuple(out)


def compile_segment(seg: str) -> tuple[_Token, ...]:
    """One path segment of a glob (no '/') as tokens; runs of `*` collapse to one."""
    toks: list[_Token] = []
    i, n = 0, len(seg)
    while i < n:
        ch = seg[i]
        if ch == "*":
            if not toks or toks[-1].kind is not _Kind.STAR:
                toks.append(_Token(_Kind.STAR))
        elif ch == "?":
            toks.append(_Token(_Kind.ANY))
        elif ch == "[":
            j = i + 1
            if j < n and seg[j] in "!^":
                j += 1
            if j < n and seg[j] == "]":
                j += 1
            while j < n and seg[j] != "]":
                j += 1
            if j >= n:  # no closing bracket: a literal '['
                toks.append(_Token(_Kind.LITERAL, ch))
            else:
                body = seg[i + 1 : j]
                negate = body[:1] in ("!", "^")
                if negate:
                    body = body[1:]
                toks.append(_Token(_Kind.CLASS, ranges=_class_ranges(body), negate=negate))
                i = j
        else:
            toks.append(_Token(_Kind.LITERAL, ch))
        i += 1
    return tuple(toks)


def match_segment(toks: tuple[_Token, ...], name: str) -> bool:
    """Whether `name` matches the whole segment. Every non-star token takes exactly one
    character, so backtracking only ever resumes after the latest star: O(n * m)."""
    p = s = 0
    star_p = -1
    star_s = 0
    n_toks, n_name = len(toks), len(name)
    while s < n_name:
        if p < n_toks and toks[p].kind is _Kind.STAR:
            star_p, star_s = p, s
            p += 1
        elif p < n_toks and toks[p].accepts(name[s]):
            p += 1
            s += 1
        elif star_p >= 0:
            p = star_p + 1
            star_s += 1
            s = star_s
        else:
            return False
    while p < n_toks and toks[p].kind is _Kind.STAR:
        p += 1
    return p == n_toks


GLOBSTAR = None  # a `**` segment in a compiled pattern

Segment = tuple[_Token, ...] | None


def compile_path(segs: list[str]) -> list[Segment]:
    return [GLOBSTAR if s == "**" else compile_segment(s) for s in segs]


def match_path(segs: list[Segment], parts: list[str]) -> bool:
    """Whether the path `parts` matches: a `**` spans zero or more whole directories,
    and a trailing `**` one or more parts (a file is at least one part)."""
    n = len(parts)
    positions = {0}
    for i, seg in enumerate(segs):
        last = i == len(segs) - 1
        nxt: set[int] = set()
        for j in positions:
            if seg is GLOBSTAR:
                if last:
                    if j < n:
                        nxt.add(n)
                else:
                    nxt.update(range(j, n + 1))
            elif j < n and match_segment(seg, parts[j]):
                nxt.add(j + 1)
        if not nxt:
            return False
        positions = nxt
    return n in positions
