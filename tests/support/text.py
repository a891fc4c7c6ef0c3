"""Long model answers for stream tests that are not repetitive text.

The repetition detector (agentd/loop/detection/degeneration.py, seed 003's `is_repetitive_output`) cuts a
stream whose trailing 20–100 characters keep occurring in its window, so a sentence repeated
with a counter is degenerate output, not a long answer. These words never repeat."""

from __future__ import annotations


def distinct_words(chars: int, *, start: int = 0) -> str:
    """At least `chars` characters of space-separated words, no two alike."""
    words: list[str] = []
    total = 0
    i = start
    while total < chars:
        word = f"w{(i * 7919) % 1_000_003}"
        words.append(word)
        total += len(word) + 1
        i += 1
    return " ".join(words) + " "
