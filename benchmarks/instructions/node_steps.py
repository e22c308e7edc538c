"""One node execution of a two-node loop A -> B -> A ... (S1's shape): run with N loops."""

import asyncio
import sys

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils.constants import END, START

N = int(sys.argv[1])


class CState(AgentState):
    count: int = 0


async def step(state: CState) -> dict[str, int]:
    return {"count": state.count + 1}


def route(state: CState) -> str:
    return END if state.count >= N else "a"


graph = StateGraph(CState)
graph.add_node("a", step)
graph.add_node("b", step)
graph.add_edge(START, "a")
graph.add_edge("a", "b")
graph.add_conditional_edges("b", route)
app = graph.compile()


async def main() -> None:
    await app.ainvoke({"messages": [Message.text_message("x")]}, {"recursion_limit": 100_000})


asyncio.run(main())
