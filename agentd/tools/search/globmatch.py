"""Glob matching in linear-ish time, without regular expressions.

A glob translated to a backtracking regex (`*a*a*a*a*a*c` -> `[^/]*a[^/]*a...`) takes
time exponential in the number of stars on a long name, and Python's `re` holds the GIL
while it does, freezing the whole server. Here a segment is matched with the classic
two-pointer wildcard algorithm (O(len(name) * len(segment)) worst case), and `**`
segments with a small set-of-positions walk over the path's parts.

Syntax: `*` any run of characters, `?` one character, `[abc]` / `[a-z]` / `[!abc]`
(`[^abc]`) a character class; a `]` right after the opening bracket (or its `!`) is
literal, an unclosed `[` is a literal `[`, and a backslash is a literal character.
Whole patterns (`GlobMatcher`): segments split on '/', `**` as a whole segment, and
`{a,b}` alternatives expanded (at most `MAX_BRACE_EXPANSIONS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from agentd.tools.errors import ToolError

MAX_BRACE_EXPANSIONS = 64


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


# --- whole patterns: braces, segments, alternatives ---


def _expand_braces(pattern: str) -> list[str]:
    """`a{b,c}d` -> [`abd`, `acd`], nested and repeated groups included; unbalanced braces
    and groups without a top-level comma are literal."""
    depth = 0
    start = -1
    for i, ch in enumerate(pattern):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                inner = pattern[start + 1 : i]
                options = _split_top_level(inner)
                if len(options) < 2:
                    continue
                head, tail = pattern[:start], pattern[i + 1 :]
                out: list[str] = []
                for tail_variant in _expand_braces(tail):
                    for option in options:
                        for option_variant in _expand_braces(option):
                            out.append(head + option_variant + tail_variant)
                            if len(out) > MAX_BRACE_EXPANSIONS:
                                raise ToolError(
                                    f"pattern {pattern!r} expands to more than {MAX_BRACE_EXPANSIONS} "
                                    "alternatives; simplify its {...} groups"
                                )
                return out
    return [pattern]


def _split_top_level(s: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    cur = ""
    for ch in s:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        if ch == "{":
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
        cur += ch
    parts.append(cur)
    return parts


def _split_pattern(pattern: str, what: str) -> list[str]:
    if not pattern.strip():
        raise ToolError(f"{what} must be a non-empty glob pattern")
    if "\0" in pattern:
        raise ToolError(f"{what} must not contain NUL bytes")
    if pattern.startswith("/"):
        raise ToolError(
            f"{what} {pattern!r} is absolute; patterns are relative to the search directory "
            "(pass the directory as path)"
        )
    segs = [s for s in pattern.split("/") if s not in ("", ".")]
    if ".." in segs:
        raise ToolError(f"{what} {pattern!r} must not contain '..'; pass a directory as path instead")
    if not segs:
        raise ToolError(f"{what} {pattern!r} matches no files")
    return segs


class GlobMatcher:
    """A glob pattern compiled for matching relative paths ('a/b/c.py') and for pruning
    directories that no alternative can match below."""

    def __init__(self, pattern: str, what: str = "pattern") -> None:
        self.pattern = pattern
        self._alts: list[list[Segment]] = [
            compile_path(_split_pattern(alt, what)) for alt in _expand_braces(pattern)
        ]

    @property
    def has_slash_or_globstar(self) -> bool:
        return any(len(segs) > 1 or segs == [GLOBSTAR] for segs in self._alts)

    def matches(self, rel: str) -> bool:
        parts = rel.split("/")
        return any(match_path(segs, parts) for segs in self._alts)

    def may_contain(self, rel_dir: str) -> bool:
        """False if no file below directory `rel_dir` can match (so the walk skips it)."""
        parts = rel_dir.split("/")
        for segs in self._alts:
            for i, part in enumerate(parts):
                seg = segs[i]
                if seg is GLOBSTAR:
                    return True
                if i >= len(segs) - 1:  # the last segment names files; this dir is too deep
                    break
                if not match_segment(seg, part):
                    break
            else:
                return True
        return False
