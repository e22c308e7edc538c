"""Helpers shared by the model-layer tests (their fixtures are in tests/core/conftest.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import respx

from tenxgraph.core.llm import ModelInfo
from tenxgraph.core.state import Message

OPENAI_URL = "https://api.openai.com/v1/chat/completions"


async def drain(pieces: AsyncIterator[Any], into: list[Any]) -> None:
    """Collect `pieces` into `into`, so what came before a failure can be checked."""
    async for piece in pieces:
        into.append(piece)


def sent(route: respx.Route, n: int = -1) -> dict[str, Any]:
    """The JSON body of the `n`-th request the route received."""
    return json.loads(route.calls[n].request.content)  # type: ignore[no-any-return]


def sse(*events: dict[str, Any]) -> httpx.Response:
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=body + b"data: [DONE]\n\n"
    )


def event(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def completion(
    content: str | None = "Hello",
    model: str = "gpt-4o-mini",
    *,
    cached: int | None = None,
    **message: Any,
) -> dict[str, Any]:
    """A whole OpenAI chat completion answering `content` (and `message`'s other fields, such
    as `tool_calls`); `cached` prompt tokens reported when given."""
    usage: dict[str, Any] = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    usage["completion_tokens_details"] = {"reasoning_tokens": 2}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, **message},
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            }
        ],
        "usage": usage,
    }


USAGE_EVENT = {
    "id": "chatcmpl-s",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "gpt-4o-mini",
    "choices": [],
    "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13},
}


class Script:
    """A `FunctionModel` function: the n-th model call gets the n-th reply, and what each call
    was given is kept. A call past the script fails the test, unless the class says what to
    answer then (`after`)."""

    after: Any = None

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.seen: list[list[Message]] = []
        self.infos: list[ModelInfo] = []

    def __call__(self, messages: list[Message], info: ModelInfo) -> Any:
        self.seen.append(messages)
        self.infos.append(info)
        n = len(self.seen) - 1
        if n < len(self.replies):
            return self.replies[n]
        if self.after is None:
            raise AssertionError(f"model call {n + 1} is past the script of {len(self.replies)}")
        return self.after
