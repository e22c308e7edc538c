"""S1: a two-node loop A -> B -> A ... ending after 1,000 node executions (int counter).

    python benchmarks/run.py s1_loop

Measure: us_per_step, the wall time of one `ainvoke` divided by 1,000 node executions (median
of --repeats invokes in one process, after one warm-up).
"""

import argparse
import asyncio
import time
from typing import Any

from _common import emit, median

STEPS = 1_000


def build(framework: str) -> tuple[Any, Any, dict[str, Any]]:
    """(app, input, config) for the framework."""
    if framework == "langgraph":
        from typing import TypedDict

        from langgraph.graph import END, START, StateGraph

        class LState(TypedDict):
            count: int

        async def a(state: LState) -> dict[str, int]:
            return {"count": state["count"] + 1}

        async def b(state: LState) -> dict[str, int]:
            return {"count": state["count"] + 1}

        def route(state: LState) -> str:
            return END if state["count"] >= STEPS else "a"

        g = StateGraph(LState)
        g.add_node("a", a)
        g.add_node("b", b)
        g.add_edge(START, "a")
        g.add_edge("a", "b")
        g.add_conditional_edges("b", route)
        return g.compile(), {"count": 0}, {"recursion_limit": STEPS + 10}

    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import AgentState, Message
    from tenxgraph.utils.constants import END, START

    class CState(AgentState):
        count: int = 0

    if framework == "10xgraph":  # its nodes cannot return a dict: mutate and return the state

        async def a(state: CState) -> Any:
            state.count += 1
            return state

        b = a
    else:

        async def a(state: CState) -> Any:
            return {"count": state.count + 1}

        b = a

    def route(state: CState) -> str:
        return END if state.count >= STEPS else "a"

    g = StateGraph(CState)
    g.add_node("a", a)
    g.add_node("b", b)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_conditional_edges("b", route, {"a": "a", END: END})
    app = g.compile()
    return app, {"messages": [Message.text_message("go")]}, {"recursion_limit": STEPS + 10}


async def measure(framework: str, repeats: int) -> dict[str, float]:
    app, data, config = build(framework)
    await app.ainvoke(data, config)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        await app.ainvoke(data, dict(config))
        times.append((time.perf_counter() - start) / STEPS * 1e6)
    return {"us_per_step": median(times)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--framework", required=True)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    emit(asyncio.run(measure(args.framework, args.repeats)))


if __name__ == "__main__":
    main()
