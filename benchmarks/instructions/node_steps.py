import asyncio, sys
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils.constants import END, START
N = int(sys.argv[1])
class CState(AgentState):
    count: int = 0
async def a(state): return {"count": state.count + 1}
def route(state): return END if state.count >= N else "a"
g = StateGraph(CState); g.add_node("a", a); g.add_node("b", a)
g.add_edge(START, "a"); g.add_edge("a", "b"); g.add_conditional_edges("b", route)
app = g.compile()
async def main():
    await app.ainvoke({"messages": [Message.text_message("x")]}, {"recursion_limit": 100000})
asyncio.run(main())
