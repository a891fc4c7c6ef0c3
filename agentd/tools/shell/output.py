"""A shell command's output, bounded however much it prints (issue 13).

`CappedOutput` keeps the head and the tail (a ring of the newest characters) of the
decoded text: what the model sees. `ShellOutput` feeds it raw pipe reads as they come,
also hands the bytes to a `Spill` (the full log in the workspace), and notices when the
command has printed more than the output limit, so it can be stopped. Nothing holds the
whole output: memory stays O(cap + spill threshold) for any amount of it.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable

from agentd.tools.shell.spill import Spill


class CappedOutput:
    """Keeps the first and last `cap // 2` characters; memory stays O(cap) for any output."""

    def __init__(self, cap: int) -> None:
        self._half = cap // 2
        self._head: list[str] = []
        self._head_len = 0
        self._tail = ""
        self._dropped = 0
        self.total = 0

    def add(self, s: str) -> None:
        if not s:
            return
        self.total += len(s)
        if self._head_len < self._half:
            take = s[: self._half - self._head_len]
            self._head.append(take)
            self._head_len += len(take)
            s = s[len(take) :]
        if s:
            self._tail += s
            # Trim only past 2x so long streams of small chunks don't re-copy on every add.
            if len(self._tail) > 2 * self._half:
                cut = len(self._tail) - self._half
                self._dropped += cut
                self._tail = self._tail[cut:]

    @property
    def truncated(self) -> bool:
        return self._dropped > 0 or len(self._tail) > self._half

    def render(self) -> str:
        head = "".join(self._head)
        tail, dropped = self._tail, self._dropped
        if len(tail) > self._half:
            dropped += len(tail) - self._half
            tail = tail[-self._half :]
        if not dropped:
            return head + tail
        return f"{head}\n[... {dropped} characters of output omitted ...]\n{tail}"


class ShellOutput(CappedOutput):
    """`CappedOutput` fed with raw bytes, with an optional full log and an output limit."""

    def __init__(
        self,
        cap: int,
        *,
        spill: Spill | None = None,
        limit: int | None = None,
        on_limit: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(cap)
        self.spill = spill
        self.limit = limit
        self.on_limit = on_limit
        self.bytes = 0
        self.over_limit = False
        self.finished = False
        # Incremental decoding: a character split across reads must not become U+FFFD.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> None:
        if self.over_limit:
            return  # still read (so the pipe drains and the writer is not stuck), not kept
        if self.limit is not None and self.bytes + len(data) > self.limit:
            data = data[: self.limit - self.bytes]
            self.over_limit = True
        self.bytes += len(data)
        if self.spill is not None:
            self.spill.write(data)
        self.add(self._decoder.decode(data))
        if self.over_limit and self.on_limit is not None:
            self.on_limit()

    def finish(self) -> None:
        """End of output: flush the decoder and close the log (made now if it is needed)."""
        if self.finished:
            return
        self.finished = True
        self.add(self._decoder.decode(b"", final=True))
        if self.spill is not None:
            self.spill.close(needed=self.truncated)

    def notes(self) -> list[str]:
        """Lines for the model after the output: the limit, and where the full output is."""
        lines = []
        if self.over_limit:
            lines.append(f"[the command printed more than {self.limit} bytes of output and was stopped]")
        spill = self.spill
        if self.truncated and spill is not None:
            if spill.path is not None:
                what = "the full output" if not spill.capped else f"the first {spill.saved} bytes of output"
                path = spill.path.as_posix()
                lines.append(
                    f"[output cut to its beginning and end: {self.bytes} bytes in all; {what} is in "
                    f"{path} (in the workspace): read parts of it with read_file (offset and limit "
                    f"are lines) or grep, or with bash, e.g. `tail -c 20000 {path}`]"
                )
            elif spill.error is not None:
                lines.append(f"[output cut; the full output could not be saved: {spill.error}]")
        return lines
