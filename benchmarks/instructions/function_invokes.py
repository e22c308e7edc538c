"""N `ainvoke`s of a graph with one async function node and no checkpointer."""

import asyncio
import sys

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils.constants import END, START

N = int(sys.argv[1])


async def answer(state: AgentState) -> str:
    return "ok"


graph = StateGraph(AgentState)
graph.add_node("a", answer)
graph.add_edge(START, "a")
graph.add_edge("a", END)
app = graph.compile(checkpointer=False)


async def main() -> None:
    for _ in range(N):
        await app.ainvoke({"messages": [Message.text_message("x")]})


asyncio.run(main())
