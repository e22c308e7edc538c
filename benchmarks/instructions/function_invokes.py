import asyncio, sys
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils.constants import END, START
N = int(sys.argv[1])
g = StateGraph(AgentState); g.add_node("a", lambda s: "ok"); g.add_edge(START, "a"); g.add_edge("a", END)
async def a(s): return "ok"
g = StateGraph(AgentState); g.add_node("a", a); g.add_edge(START, "a"); g.add_edge("a", END)
app = g.compile(checkpointer=False)
async def main():
    for _ in range(N):
        await app.ainvoke({"messages": [Message.text_message("x")]})
asyncio.run(main())
