"""S2: one thread, 300 sequential invokes, each adding a user and an assistant message.

    python benchmarks/run.py s2_history

Each framework uses its in-memory checkpointer, so every invoke continues the same thread.
Measures: first30_ms / last30_ms (median invoke time of calls 1-30 and 271-300), growth (their
ratio: 1.0 means the cost does not grow with history) and total_ms.
"""

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _common import emit, median

TURNS = 300


def build(framework: str) -> Callable[[int], Awaitable[Any]]:
    """A coroutine function running turn i on the shared thread."""
    if framework == "langgraph":
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import END, START, MessagesState, StateGraph

        async def reply(state: MessagesState) -> dict[str, Any]:
            return {"messages": [AIMessage(content=f"reply {len(state['messages'])}")]}

        g = StateGraph(MessagesState)
        g.add_node("reply", reply)
        g.add_edge(START, "reply")
        g.add_edge("reply", END)
        app = g.compile(checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "s2"}}

        async def turn_lg(i: int) -> Any:
            return await app.ainvoke({"messages": [HumanMessage(content=f"turn {i}")]}, config)

        return turn_lg

    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import AgentState, Message
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer
    from tenxgraph.utils.constants import END, START

    async def reply_tx(state: AgentState) -> Message:
        return Message.text_message(f"reply {len(state.context)}", "assistant")

    g = StateGraph(AgentState)
    g.add_node("reply", reply_tx)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    app = g.compile(checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "s2"}

    async def turn_tx(i: int) -> Any:
        return await app.ainvoke({"messages": [Message.text_message(f"turn {i}")]}, dict(config))

    return turn_tx


async def measure(framework: str) -> dict[str, float]:
    turn = build(framework)
    times = []
    for i in range(TURNS):
        start = time.perf_counter()
        await turn(i)
        times.append((time.perf_counter() - start) * 1e3)
    first, last = median(times[:30]), median(times[-30:])
    return {
        "first30_ms": first,
        "last30_ms": last,
        "growth": last / first,
        "total_ms": sum(times),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--framework", required=True)
    args = parser.parse_args()
    emit(asyncio.run(measure(args.framework)))


if __name__ == "__main__":
    main()
