"""A/B of two source trees' providers on a trivial model call over the lean transport: CPU
and Python calls per call (prints figures; no asserts).

    .venv/bin/python bench/provider_call.py TREE_A TREE_B [--calls 400] [--rounds 5]

Each provider (openai chat, openai-responses, anthropic) makes `--calls` streamed calls, as a
trivial turn does — a system prompt, eight tools, the session's conversation growing by a user
and an assistant message per call — to a loopback server (its own process) answering with a
canned short answer: chunked SSE, one HTTP chunk per event, as uvicorn sends the fake model's.
Only the provider's process is measured: its thread CPU per call (request encoding, the
exchange, the stream read and fold; no agentd server, no database), and, in a second pass
under cProfile, its Python calls per call (deterministic). Rounds alternate A, B, A, B… in
fresh processes (`--child`, importing `agentd` from the tree on PYTHONPATH), so a busy
machine slows both alike. Printed: per provider, µs of CPU per call and calls per call for
each tree, and B/A.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

KINDS = ("openai", "openai-responses", "anthropic")
ANSWER = ["Hello ", "there,", " all i", "s well", "."]


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _sse(name: str | None, data: Any) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return (f"event: {name}\n" if name else "").encode() + f"data: {text}\n\n".encode()


def answer_events(kind: str) -> list[bytes]:
    if kind == "openai":
        base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": "fake-model"}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return _sse(None, {**base, "system_fingerprint": "fp", "choices": [choice]})

        usage = {**base, "choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 5}}
        return [
            chunk({"role": "assistant", "content": ""}),
            *[chunk({"content": t}) for t in ANSWER],
            chunk({}, "stop"),
            _sse(None, usage),
            _sse(None, "[DONE]"),
        ]
    if kind == "anthropic":
        message = {"id": "msg", "type": "message", "role": "assistant", "model": "m", "content": [],
                   "usage": {"input_tokens": 20, "output_tokens": 1}}  # fmt: skip
        block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
        return [
            _sse("message_start", {"type": "message_start", "message": message}),
            _sse("content_block_start", block),
            *[
                _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}},
                )
                for t in ANSWER
            ],
            _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": 5},
                },
            ),
            _sse("message_stop", {"type": "message_stop"}),
        ]
    item = {"type": "message", "id": "m1", "role": "assistant", "content": []}
    done_item = {**item, "content": [{"type": "output_text", "text": "".join(ANSWER)}]}
    return [
        _sse(
            "response.created", {"type": "response.created", "response": {"id": "r", "status": "in_progress"}}
        ),
        _sse(
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": item},
        ),
        *[
            _sse(
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": "m1",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": t,
                },
            )
            for t in ANSWER
        ],
        _sse(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": done_item},
        ),
        _sse(
            "response.completed",
            {
                "type": "response.completed",
                "response": {
                    "id": "r",
                    "status": "completed",
                    "output": [done_item],
                    "usage": {"input_tokens": 20, "output_tokens": 5},
                },
            },
        ),
    ]


HEAD = (
    b"HTTP/1.1 200 OK\r\ndate: Thu, 03 Dec 2026 07:30:32 GMT\r\nserver: uvicorn\r\n"
    b"content-type: text/event-stream; charset=utf-8\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


async def serve() -> None:
    """The canned model: per request, its kind's answer (by path), one chunk per write."""
    answers = {
        b"/v1/chat/completions": [_chunk(e) for e in answer_events("openai")],
        b"/v1/messages": [_chunk(e) for e in answer_events("anthropic")],
        b"/v1/responses": [_chunk(e) for e in answer_events("openai-responses")],
    }

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                writer.write(HEAD)
                for piece in answers[head.split(b" ", 2)[1]]:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0)
                writer.write(b"0\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


def tools() -> list[Any]:
    from agentd.core import ToolSpec

    out = []
    for i in range(8):
        schema = {
            "type": "object",
            "properties": {
                f"arg{j}": {"type": "string", "description": f"Argument {j} of tool {i}: " + "words " * 12}
                for j in range(4)
            },
            "required": ["arg0"],
        }
        out.append(ToolSpec(f"tool_{i}", f"Tool {i} does one thing well. " * 4, schema))
    return out


async def calls(kind: str, port: int, n: int, profile: bool) -> tuple[float, float]:
    """(thread CPU µs per call, Python calls per call) over `n` calls after a warm-up."""
    import cProfile
    import pstats

    from agentd.core import Message, ProviderRequest
    from agentd.providers.anthropic import AnthropicProvider
    from agentd.providers.openai import OpenAIProvider, OpenAIResponsesProvider

    classes: dict[str, Any] = {
        "openai": OpenAIProvider,
        "openai-responses": OpenAIResponsesProvider,
        "anthropic": AnthropicProvider,
    }
    base = f"http://127.0.0.1:{port}" + ("" if kind == "anthropic" else "/v1")
    provider = classes[kind](
        base_url=base, api_key="k", model="m", first_token_timeout=60.0, stream_idle_timeout=60.0
    )
    specs = tools()
    system = "You are a careful agent. " * 80
    history: list[Any] = []
    prof = cProfile.Profile() if profile else None
    cpu = 0.0
    for i in range(n + 20):
        history = [*history, Message.user(f"prompt {i}")]
        request = ProviderRequest(
            model="m", system=system, messages=history, tools=list(specs), session_id="s"
        )
        measured = i >= 20
        if measured and prof is not None:
            prof.enable()
        started = time.thread_time()
        text = "".join([e.text async for e in provider.stream(request) if hasattr(e, "text")])
        if measured:
            cpu += time.thread_time() - started
            if prof is not None:
                prof.disable()
        history = [*history, Message(role="assistant", content=text)]
    await provider.aclose()
    count = 0.0
    if prof is not None:
        count = sum(v[1] for v in pstats.Stats(prof).stats.values()) / n  # type: ignore[attr-defined]
    return cpu * 1e6 / n, count


async def child(n: int) -> dict[str, list[float]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--serve", stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdin is not None
    port = int(await proc.stdout.readline())
    try:
        out: dict[str, list[float]] = {}
        for kind in KINDS:
            cpu, _ = await calls(kind, port, n, profile=False)
            _, count = await calls(kind, port, max(50, n // 4), profile=True)
            out[kind] = [cpu, count]
        return out
    finally:
        proc.stdin.close()
        await proc.wait()


def run(tree: Path, n: int) -> dict[str, list[float]]:
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", str(n)],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, list[float]] = json.loads(out.stdout)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("tree_a", type=Path, nargs="?")
    parser.add_argument("tree_b", type=Path, nargs="?")
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve())
        return
    if args.child:
        import uvloop

        print(json.dumps(uvloop.run(child(args.child))))
        return
    if args.tree_a is None or args.tree_b is None:
        parser.error("two trees to compare")
    a: dict[str, list[list[float]]] = {k: [] for k in KINDS}
    b: dict[str, list[list[float]]] = {k: [] for k in KINDS}
    for r in range(args.rounds):
        fa, fb = run(args.tree_a, args.calls), run(args.tree_b, args.calls)
        for k in KINDS:
            a[k].append(fa[k])
            b[k].append(fb[k])
        print(
            f"round {r}: µs CPU per call A/B  "
            + "  ".join(f"{k} {fa[k][0]:.0f}/{fb[k][0]:.0f}" for k in KINDS)
        )
    for k in KINDS:
        ma, mb = statistics.median(x[0] for x in a[k]), statistics.median(x[0] for x in b[k])
        ca, cb = a[k][0][1], b[k][0][1]
        print(
            f"{k:17s} CPU/call median A {ma:.0f} µs  B {mb:.0f} µs  B/A {mb / ma:.3f}   "
            f"Python calls/call A {ca:.0f}  B {cb:.0f}  B/A {cb / ca:.3f}"
        )


if __name__ == "__main__":
    main()
