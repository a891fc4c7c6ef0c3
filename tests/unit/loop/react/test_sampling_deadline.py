"""The sampling call's maximum (`retry.call_max_s`, 003 "LLM call max 1200s"), on both of its
paths: one `call_later` handle that cancels the sampling's task (the default) and
`asyncio.timeout` (`AGENTD_SAMPLING_DEADLINE=asyncio`)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd.core import Conversation, ErrorKind, HarnessError, ProviderRequest, StreamEvent, TextDelta
from agentd.loop.context import TurnCancelled, TurnContext, run_cancellable
from agentd.loop.limits import LoopLimits
from agentd.loop.react import sampling
from agentd.loop.react.sampling import Sample, stream_sample


@pytest.fixture(params=["call-later", "asyncio"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(sampling, "LIBRARY_DEADLINE", request.param == "asyncio")
    yield request.param


class _Events:
    def __init__(self) -> None:
        self.transient: list[Any] = []

    def emit(self, update: Any, *, origin: str | None = None) -> None: ...

    def emit_transient(self, update: Any) -> None:
        self.transient.append(update)

    async def flushed(self) -> None: ...


class _Provider:
    """Streams one text delta, then waits for ever (or raises `then`), recording its close."""

    name = "fake"
    supports_native_schema = False

    def __init__(self, then: BaseException | None = None) -> None:
        self.then = then
        self.started = asyncio.Event()
        self.closed = False

    async def _stream(self) -> AsyncIterator[StreamEvent]:
        try:
            yield TextDelta("partial")
            self.started.set()
            if self.then is not None:
                raise self.then
            await asyncio.Event().wait()
        finally:
            self.closed = True

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        return self._stream()

    async def aclose(self) -> None: ...


def _ctx(provider: _Provider, call_max: float) -> TurnContext:
    limits = LoopLimits()
    limits = dataclasses.replace(limits, retry=dataclasses.replace(limits.retry, call_max_s=call_max))
    return TurnContext(
        session_id="sess",
        turn_id="turn",
        cwd=Path("."),
        provider=provider,  # type: ignore[arg-type]
        model="model",
        system_prompt="",
        tools={},
        conversation=Conversation([], lambda i, m: None),
        events=_Events(),
        permissions=object(),  # type: ignore[arg-type]
        limits=limits,
    )


def _request() -> ProviderRequest:
    return ProviderRequest(model="model", system="", messages=[])


def _cancelling() -> int:
    task = asyncio.current_task()
    assert task is not None
    return task.cancelling()


async def test_a_call_past_its_maximum_is_a_timeout_and_keeps_what_came(path: str) -> None:
    provider, sample = _Provider(), Sample()
    with pytest.raises(HarnessError) as caught:
        await stream_sample(_ctx(provider, 0.01), _request(), sample)
    assert caught.value.kind is ErrorKind.TIMEOUT
    assert "maximum of 0.01s" in str(caught.value)
    assert sample.text == "partial" and provider.closed
    assert _cancelling() == 0  # the deadline's cancel was taken back
    await asyncio.sleep(0)  # and nothing is left pending for the next await


async def test_a_timeout_of_the_provider_itself_is_not_the_calls_maximum(path: str) -> None:
    provider = _Provider(then=TimeoutError("read timed out"))
    with pytest.raises(TimeoutError, match="read timed out"):
        await stream_sample(_ctx(provider, 3600), _request(), Sample())
    assert provider.closed


async def test_a_call_within_its_maximum_ends_normally(path: str) -> None:
    class Quick(_Provider):
        async def _stream(self) -> AsyncIterator[StreamEvent]:
            yield TextDelta("all of it")

    sample = Sample()
    await stream_sample(_ctx(Quick(), 3600), _request(), sample)
    assert sample.text == "all of it" and _cancelling() == 0


async def test_a_cancel_from_elsewhere_is_not_a_timeout(path: str) -> None:
    provider = _Provider()
    runner = asyncio.create_task(stream_sample(_ctx(provider, 3600), _request(), Sample()))
    await provider.started.wait()
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert provider.closed


async def test_the_turns_cancel_during_a_sampling_is_a_cancelled_turn(path: str) -> None:
    provider, cancel = _Provider(), asyncio.Event()
    ctx = _ctx(provider, 3600)
    runner = asyncio.create_task(run_cancellable(stream_sample(ctx, _request(), Sample()), cancel))
    await provider.started.wait()
    cancel.set()
    with pytest.raises(TurnCancelled):
        await runner
    assert provider.closed


async def test_no_maximum_means_no_deadline(path: str) -> None:
    class Quick(_Provider):
        async def _stream(self) -> AsyncIterator[StreamEvent]:
            yield TextDelta("ok")

    sample = Sample()
    await stream_sample(_ctx(Quick(), 0), _request(), sample)
    assert sample.text == "ok"
