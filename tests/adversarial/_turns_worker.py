"""A worker process for the two-process thread tests: sends `count` user turns to one thread,
each with a fixed message id, retrying a turn until the thread accepts it.

    python -m tests.adversarial._turns_worker KIND TARGET SCHEMA THREAD NAME COUNT STRATEGY GO

KIND is sqlite (TARGET a file) or postgres (TARGET a DSN, SCHEMA its schema). The worker
waits for the file GO to exist, so that both workers start together, then prints one JSON
line: {"sent": n, "rejected": n}.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from tenxgraph.core import exceptions
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.graph.compiled_graph import CompiledGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer.base import BaseCheckpointer
from tenxgraph.utils.constants import END, START

# what "the thread is taken, nothing was written, try again" looks like; StaleStateError
# is what tenxgraph raised before thread leases existed
RETRY = tuple(
    getattr(exceptions, name)
    for name in ("ThreadBusyError", "StaleStateError")
    if hasattr(exceptions, name)
)


def answer_to(text: str) -> str:
    return f"answer to {text}"


async def think(state: AgentState) -> str:
    question = state.context[-1].text()
    for _ in range(3):  # some work, so that the other worker's turns arrive meanwhile
        await asyncio.sleep(0.001)
    return answer_to(question)


def store_for(kind: str, target: str, schema: str) -> BaseCheckpointer:
    if kind == "sqlite":
        from tenxgraph.storage.checkpointer import SqliteCheckpointer

        return SqliteCheckpointer(target)
    from tenxgraph.storage.checkpointer import PgCheckpointer

    return PgCheckpointer(target, schema=schema, max_size=2)


def app_for(store: BaseCheckpointer) -> CompiledGraph:
    graph = StateGraph()
    graph.add_node("think", think)
    graph.add_edge(START, "think")
    graph.add_edge("think", END)
    return graph.compile(checkpointer=store)


def turn_message(name: str, i: int) -> Message:
    message = Message.text_message(f"{name}-{i}", "user")
    message.message_id = f"{name}-{i}"  # the same id on every retry of this turn
    return message


async def main(
    kind: str, target: str, schema: str, thread: str, name: str, count: str, strategy: str, go: str
) -> None:
    app = app_for(store_for(kind, target, schema))
    config: dict[str, Any] = {"thread_id": thread}
    if strategy != "reject":
        config["multitask_strategy"] = strategy
    deadline = time.monotonic() + 60
    while not Path(go).exists():  # noqa: ASYNC240 - start together with the other worker
        if time.monotonic() > deadline:
            raise SystemExit("the go file never appeared")
        await asyncio.sleep(0.005)
    rejected = 0
    for i in range(int(count)):
        while True:
            try:
                await app.ainvoke({"messages": [turn_message(name, i)]}, config)
                break
            except RETRY:
                rejected += 1
                await asyncio.sleep(random.uniform(0.001, 0.01))
    await app.aclose()
    print(json.dumps({"sent": int(count), "rejected": rejected}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
