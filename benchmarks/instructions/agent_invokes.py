"""N `ainvoke`s of a graph with one Agent node (an offline `FunctionModel`), no checkpointer."""

import asyncio
import sys

from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils.constants import END, START

N = int(sys.argv[1])

graph = StateGraph(AgentState)
graph.add_node("a", Agent(FunctionModel(lambda messages, info: "ok")))
graph.add_edge(START, "a")
graph.add_edge("a", END)
app = graph.compile(checkpointer=False)


async def main() -> None:
    for _ in range(N):
        await app.ainvoke({"messages": [Message.text_message("x")]})


asyncio.run(main())
