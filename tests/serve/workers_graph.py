"""The graph the multi-worker tests serve (`tenxgraph serve tests.serve.workers_graph:graph`).

An offline model reads the user's message "steps: a,b,c" and asks, in one answer, for one
`step` tool call per name; the tools node runs them one after the other (the run's config
sets `max_parallel_tools` to 1). Each call asks the test's loopback HTTP server
(TENXGRAPH_TEST_TOOL_URL) for `/step/<name>`, so the test sees when a tool starts, how many
times each ran, and can hold one until it is done with the worker executing it. Once every
call has a result the model answers "done: <results>".
"""

from __future__ import annotations

import asyncio
import os
import urllib.request

from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import Message, ToolCallBlock
from tenxgraph.prebuilt import ReactAgent

URL_VAR = "TENXGRAPH_TEST_TOOL_URL"


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=120) as answer:
        return str(answer.read().decode())


async def step(name: str) -> str:
    """Do one named step.

    Args:
        name: The step's name.
    """
    return await asyncio.to_thread(_fetch, f"{os.environ[URL_VAR]}/step/{name}")


def scripted(messages: list[Message], info: ModelInfo) -> str | list[ToolCallBlock]:
    last = messages[-1]
    if last.role == "user":
        names = last.text().removeprefix("steps:").strip().split(",")
        return [
            ToolCallBlock(id=f"call-{i}", name="step", args={"name": n.strip()})
            for i, n in enumerate(names)
        ]
    results = [m.text() for m in messages if m.role == "tool"]
    return "done: " + ", ".join(results)


graph = ReactAgent(FunctionModel(scripted), [step]).compile(name="graph")
