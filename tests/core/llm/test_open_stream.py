"""`open_stream`: retries and fallbacks happen before a stream's first piece; after it the
consumer reads the model's own iterator, which it closes. Through an Agent too, for models
whose stream is an async generator and for ones whose stream is a plain async iterator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tenxgraph.core.exceptions import ModelError, ModelUnavailableError
from tenxgraph.core.graph import Agent
from tenxgraph.core.llm import ModelRequest, RetryConfig, Route
from tenxgraph.core.llm import retry as retry_module
from tenxgraph.core.llm.calling import close, open_stream
from tenxgraph.core.state import Message
from tests.core.graph._support import inp, linear

REQUEST = ModelRequest(model="m", messages=[Message.text_message("hi")])
CONFIG = RetryConfig(max_retries=2, initial_delay=0, jitter=False)


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    async def sleep(seconds: float) -> None:
        return None

    monkeypatch.setattr(retry_module, "sleep", sleep)


def unavailable() -> ModelError:
    return ModelUnavailableError("down", context={"status_code": 503})


class Pieces:
    """A model stream that is a plain async iterator (no aclose), as the protocol allows."""

    def __init__(self, texts: list[str]) -> None:
        self.items = [Message.text_message(t, "assistant", "s", delta=True) for t in texts]
        self.items.append(Message.text_message("".join(texts), "assistant", "s"))

    def __aiter__(self) -> Pieces:
        return self

    async def __anext__(self) -> Message:
        if not self.items:
            raise StopAsyncIteration
        return self.items.pop(0)


class Model:
    """Fails `failures` times before its first piece, then streams `texts`; as an async
    generator (which records being closed) or as a plain iterator."""

    model_name = "model"

    def __init__(self, texts: list[str], failures: int = 0, plain: bool = False) -> None:
        self.texts = texts
        self.failures = failures
        self.plain = plain
        self.calls = 0
        self.closed = 0

    async def acomplete(self, request: ModelRequest) -> Message:
        return Message.text_message("".join(self.texts), "assistant")

    def astream(self, request: ModelRequest) -> AsyncIterator[Message]:
        self.calls += 1
        if self.plain:
            if self.calls <= self.failures:
                raise unavailable()
            return Pieces(self.texts)
        return self._generate()

    async def _generate(self) -> AsyncIterator[Message]:
        try:
            if self.calls <= self.failures:
                raise unavailable()
            async for piece in Pieces(self.texts):
                yield piece
        finally:
            self.closed += 1


@pytest.mark.parametrize("plain", [False, True])
async def test_failures_before_the_first_piece_are_retried(plain: bool) -> None:
    model = Model(["a", "b"], failures=2, plain=plain)
    first, pieces, _ = await open_stream([Route(model, "m")], REQUEST, CONFIG)
    assert first is not None
    rest = [m async for m in pieces]
    await close(pieces)
    assert [first.text(), *(m.text() for m in rest)] == ["a", "b", "ab"]
    assert model.calls == 3
    if not plain:
        assert model.closed == 3  # each failed attempt's stream closed, and the last one


async def test_a_fallback_streams_when_the_first_model_keeps_failing() -> None:
    down = Model(["x"], failures=99)
    up = Model(["ok"])
    first, pieces, _ = await open_stream([Route(down, "m"), Route(up, "n")], REQUEST, CONFIG)
    assert first is not None
    assert first.text() == "ok"
    await close(pieces)
    assert (down.calls, up.calls) == (3, 1)


async def test_a_stream_without_pieces_gives_none() -> None:
    class Empty(Model):
        async def _generate(self) -> AsyncIterator[Message]:
            return
            yield

    first, pieces, _ = await open_stream([Route(Empty([]), "m")], REQUEST, CONFIG)
    assert first is None
    assert [m async for m in pieces] == []


@pytest.mark.parametrize("plain", [False, True])
async def test_an_agent_streams_either_kind_of_model_stream(plain: bool) -> None:
    model = Model(["Hel", "lo"], failures=1, plain=plain)
    app = linear(("agent", Agent(model, retry_config=CONFIG)), checkpointer=False)
    chunks = [c async for c in app.astream(inp("hi"), {"thread_id": "t"})]
    messages: list[Any] = [c.message for c in chunks if c.message is not None]
    assert [m.text() for m in messages if m.delta] == ["Hel", "lo"]
    assert [m.text() for m in messages if not m.delta][-1] == "Hello"
    if not plain:
        assert model.closed == 2


async def test_an_agent_that_stops_reading_closes_the_model_stream() -> None:
    model = Model(["a", "b", "c"])
    app = linear(("agent", Agent(model)), checkpointer=False)
    stream = app.astream(inp("hi"), {"thread_id": "t"})
    async for chunk in stream:
        if chunk.message is not None and chunk.message.delta:
            break
    await stream.aclose()
    assert model.closed == 1
