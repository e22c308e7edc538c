"""N turns on one kept thread (`InMemoryCheckpointer`) seeded with 300 text messages of 120 and
240 characters: `low` / `partial`, a function node answering with one message, the result at
LOW / PARTIAL granularity; `agent`, an `Agent` node (`FunctionModel`, which reads every
message's text) at LOW."""

import asyncio
import sys

from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils.constants import END, START, ResponseGranularity

N, MODE = int(sys.argv[1]), sys.argv[2]
g = StateGraph(AgentState)


async def reply(state: AgentState) -> Message:
    return Message.text_message(f"reply {len(state.context)}", "assistant")


if MODE == "agent":
    g.add_node("a", Agent(FunctionModel(lambda messages, info: "ok")))
else:
    g.add_node("a", reply)
g.add_edge(START, "a")
g.add_edge("a", END)
app = g.compile(checkpointer=InMemoryCheckpointer())
wanted = ResponseGranularity.PARTIAL if MODE == "partial" else ResponseGranularity.LOW
text = "The quick brown fox jumps over the lazy dog. " * 6


async def main() -> None:
    seed = [
        Message.text_message(text[: 120 + i % 2 * 120], "user" if i % 2 == 0 else "assistant")
        for i in range(300)
    ]
    await app.ainvoke({"messages": seed}, {"thread_id": "t"})
    for i in range(N):
        turn = [Message.text_message(f"turn {i}")]
        await app.ainvoke({"messages": turn}, {"thread_id": "t"}, wanted)


asyncio.run(main())
