"""The graph the serving load test serves: a ReactAgent whose offline model calls one tool,
then streams its answer in `TOKENS` pieces `TOKEN_MS` apart (standing in for a provider's
latency, so runs overlap as they would in production)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import Message, ToolCallBlock
from tenxgraph.prebuilt import ReactAgent

TOKENS = int(os.environ.get("BENCH_TOKENS", "20"))
TOKEN_MS = float(os.environ.get("BENCH_TOKEN_MS", "25"))


def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order} shipped"


def _answer(messages: list[Message], info: ModelInfo) -> str | ToolCallBlock:
    if messages[-1].role == "tool":
        return "done"
    return ToolCallBlock(id=f"call-{len(messages)}", name="lookup", args={"order": "42"})


async def _stream(messages: list[Message], info: ModelInfo) -> AsyncIterator[str | ToolCallBlock]:
    await asyncio.sleep(TOKEN_MS / 1000)  # the provider's time to first token
    if messages[-1].role != "tool":
        yield ToolCallBlock(id=f"call-{len(messages)}", name="lookup", args={"order": "42"})
        return
    for i in range(TOKENS):
        yield f"t{i} "
        await asyncio.sleep(TOKEN_MS / 1000)


graph = ReactAgent(FunctionModel(_answer, stream_function=_stream), [lookup], "Be brief.").compile()
graph.name = "bench"
