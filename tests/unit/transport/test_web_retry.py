"""The web page retries a refusal that names `retryAfter` (issue 32, item 4), by the same rule
as the stdio bridge and `agentd chat` (agentd/transport/retry_after.py): its `Connection`
module runs in Node against a fake WebSocket that refuses a request three times and then
answers it (the page gets the answer), then refuses for good (the page gets the refusal after
the bounded retries); and the page's `retryWait` agrees with `retry_wait` case by case."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from agentd.transport.retry_after import MAX_RETRIES, retry_wait
from agentd.transport.web import STATIC_DIR

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs node to run the page's module")

CASES: list[tuple[Any, int]] = [
    ({"code": -32019, "data": {"limit": "db_pool", "retryable": True, "retryAfter": 1.0}}, 0),
    ({"code": -32019, "data": {"limit": "rate", "retryAfter": 0.25}}, 3),
    ({"code": -32019, "data": {"retryAfter": 3600}}, 0),
    ({"code": -32019, "data": {"retryAfter": -5}}, 0),
    ({"code": -32019, "data": {"retryAfter": 1.0}}, MAX_RETRIES - 1),
    ({"code": -32019, "data": {"retryAfter": 1.0}}, MAX_RETRIES),
    ({"code": -32019, "data": {"retryable": False, "retryAfter": 1.0}}, 0),
    ({"code": -32019, "data": {"limit": "prompt_bytes", "max": 10}}, 0),
    ({"code": -32019, "data": {"retryAfter": "soon"}}, 0),
    ({"code": -32019, "data": [1]}, 0),
    ({"code": -32603, "message": "Internal error"}, 0),
    ({"message": "connection lost", "lost": True}, 0),
]

RUN = """
import {Connection, retryWait} from %(module)s;
globalThis.location = {origin: "http://127.0.0.1:1"};
let refusals = 3;
const sent = [];
const refusal = {
  code: -32019, message: "overloaded", data: {limit: "db_pool", retryable: true, retryAfter: 0.001},
};
class FakeSocket {
  static OPEN = 1;
  constructor() { this.readyState = 1; setTimeout(() => this.onopen(), 0); }
  send(text) {
    const msg = JSON.parse(text);
    sent.push(msg.method);
    let reply = {result: {sessionId: "s1"}};
    if (msg.method === "initialize") reply = {result: {agentInfo: {name: "agentd", version: "test"}}};
    else if (refusals-- > 0) reply = {error: refusal};
    setTimeout(() => this.onmessage({data: JSON.stringify({jsonrpc: "2.0", id: msg.id, ...reply})}), 0);
  }
  close() {}
}
globalThis.WebSocket = FakeSocket;
const conn = await new Promise((resolve) => {
  const c = new Connection({onReady: async () => resolve(c), onMessage() {}, onStatus() {}, onAuthLost() {}});
  c.start();
});
const answered = await conn.rpc("session/new", {});
const sentForFirst = sent.filter((m) => m === "session/new").length;
refusals = 1000;
let final = null;
try { await conn.rpc("session/new", {}); } catch (e) { final = e; }
const sentForSecond = sent.filter((m) => m === "session/new").length - sentForFirst;
const waits = %(cases)s.map(([error, retries]) => retryWait(error, retries));
conn.stop();
console.log(JSON.stringify({answered, sentForFirst, final, sentForSecond, waits}));
"""


def run_page() -> dict[str, Any]:
    module = json.dumps((STATIC_DIR / "connection.js").resolve().as_uri())
    code = RUN % {"module": module, "cases": json.dumps(CASES)}
    out = subprocess.run(
        [str(NODE), "--input-type=module", "-e", code], capture_output=True, text=True, timeout=60, check=True
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_the_page_retries_a_refusal_and_gives_up_after_the_bounded_retries() -> None:
    got = run_page()
    assert got["answered"] == {"sessionId": "s1"}
    assert got["sentForFirst"] == 4  # refused three times, answered the fourth
    assert got["final"]["code"] == -32019
    assert got["sentForSecond"] == MAX_RETRIES + 1


def test_the_page_and_the_bridge_follow_one_rule() -> None:
    python = [w if (w := retry_wait(error, retries)) is not None else -1 for error, retries in CASES]
    assert run_page()["waits"] == python
