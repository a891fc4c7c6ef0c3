"""A/B of two source trees' provider stream reading: CPU per streamed chunk (prints figures;
no asserts).

    .venv/bin/python bench/stream_fold.py TREE_A TREE_B [--chunks 2000] [--rounds 5]

e.g. `git archive <base> | tar -x -C /tmp/base` then `bench/stream_fold.py /tmp/base .`.
Each provider (anthropic, openai-responses, openai chat) reads one canned SSE answer of
`--chunks` text deltas, one event per network chunk, from an in-process httpx transport:
no socket, so the figure is the provider's own per-chunk work (SSE split, JSON, fold).
Rounds alternate A, B, A, B… in fresh processes (`--child`, importing `agentd` from the
tree on PYTHONPATH), so a busy machine slows both alike. Printed: µs of CPU per chunk for
each tree and the B/A ratio, per provider.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _anthropic(n: int) -> Iterator[bytes]:
    message = {"model": "m", "usage": {"input_tokens": 1}}
    yield _sse("message_start", {"type": "message_start", "message": message})
    block = {"type": "text", "text": ""}
    yield _sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block})
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "word "}}
    for _ in range(n):
        yield _sse("content_block_delta", delta)
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    end = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": n}}
    yield _sse("message_delta", end)
    yield _sse("message_stop", {"type": "message_stop"})


def _responses(n: int) -> Iterator[bytes]:
    delta = {"type": "response.output_text.delta", "item_id": "i", "delta": "word "}
    for _ in range(n):
        yield _sse("response.output_text.delta", delta)
    usage = {"input_tokens": 1, "output_tokens": n}
    yield _sse("response.completed", {"type": "response.completed", "response": {"usage": usage}})


def _chat(n: int) -> Iterator[bytes]:
    delta = json.dumps({"choices": [{"index": 0, "delta": {"content": "word "}}]}).encode()
    for _ in range(n):
        yield b"data: " + delta + b"\n\n"
    finish = json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}).encode()
    yield b"data: " + finish + b"\n\n"
    yield b"data: [DONE]\n\n"


async def _per_chunk_us(kind: str, n: int) -> float:
    """CPU µs per chunk of one provider reading the canned answer (the second of two reads)."""
    import httpx

    from agentd.core import Message, ProviderRequest
    from agentd.providers.anthropic import AnthropicProvider
    from agentd.providers.openai import OpenAIProvider, OpenAIResponsesProvider

    classes: dict[str, Any] = {
        "anthropic": (AnthropicProvider, _anthropic),
        "openai-responses": (OpenAIResponsesProvider, _responses),
        "openai": (OpenAIProvider, _chat),
    }
    cls, body = classes[kind]
    chunks = list(body(n))

    async def stream() -> Any:
        for chunk in chunks:
            yield chunk

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=stream())

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    provider = cls(base_url="http://model.test/v1", api_key="k", model="m", client=client)
    request = ProviderRequest(model="m", system="s", messages=[Message(role="user", content="hi")])
    cpu = 0.0
    for _ in range(2):  # the first read warms up
        started = time.process_time()
        events = [e async for e in provider.stream(request)]
        cpu = time.process_time() - started
    if len(events) <= n:
        raise SystemExit(f"{kind}: {len(events)} events for {n} chunks")
    return cpu * 1e6 / n


KINDS = ("anthropic", "openai-responses", "openai")


def run(tree: Path, chunks: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(chunks)],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, float] = json.loads(out.stdout)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("tree_a", type=Path, nargs="?")
    parser.add_argument("tree_b", type=Path, nargs="?")
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps({k: asyncio.run(_per_chunk_us(k, args.child)) for k in KINDS}))
        return
    if args.tree_a is None or args.tree_b is None:
        parser.error("name two trees, A and B")
    a: dict[str, list[float]] = {k: [] for k in KINDS}
    b: dict[str, list[float]] = {k: [] for k in KINDS}
    for r in range(args.rounds):
        fa, fb = run(args.tree_a.resolve(), args.chunks), run(args.tree_b.resolve(), args.chunks)
        for kind in KINDS:
            a[kind].append(fa[kind])
            b[kind].append(fb[kind])
        row = "  ".join(f"{k} {fa[k]:.2f}/{fb[k]:.2f}" for k in KINDS)
        print(f"round {r + 1}: µs CPU per chunk A/B  {row}", flush=True)
    for kind in KINDS:
        ma, mb = sorted(a[kind])[len(a[kind]) // 2], sorted(b[kind])[len(b[kind]) // 2]
        print(f"{kind:17} median A {ma:.2f} µs  B {mb:.2f} µs  B/A {mb / ma:.3f}")


if __name__ == "__main__":
    main()
