"""S3: 500 concurrent `ainvoke` calls on distinct threads, each 3 steps of sleep(0.02).

    python benchmarks/run.py s3_concurrency

Measures: wall_ms and runs_per_s for the batch (one warm-up batch first), and peak_mib, the
peak of Python allocations (tracemalloc) during a second, separate batch.
"""

import argparse
import asyncio
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

from _common import emit

RUNS = 500
NAP = 0.02


def build(framework: str) -> Callable[[str], Awaitable[Any]]:
    if framework == "langgraph":
        from typing import TypedDict

        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import END, START, StateGraph

        class LState(TypedDict):
            count: int

        async def step(state: LState) -> dict[str, int]:
            await asyncio.sleep(NAP)
            return {"count": state["count"] + 1}

        g = StateGraph(LState)
        for name in ("a", "b", "c"):
            g.add_node(name, step)
        g.add_edge(START, "a")
        g.add_edge("a", "b")
        g.add_edge("b", "c")
        g.add_edge("c", END)
        app = g.compile(checkpointer=InMemorySaver())

        async def run_lg(thread: str) -> Any:
            return await app.ainvoke({"count": 0}, {"configurable": {"thread_id": thread}})

        return run_lg

    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import AgentState, Message
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer
    from tenxgraph.utils.constants import END, START

    class CState(AgentState):
        count: int = 0

    if framework == "10xgraph":

        async def step_tx(state: CState) -> Any:
            await asyncio.sleep(NAP)
            state.count += 1
            return state
    else:

        async def step_tx(state: CState) -> Any:
            await asyncio.sleep(NAP)
            return {"count": state.count + 1}

    g = StateGraph(CState)
    for name in ("a", "b", "c"):
        g.add_node(name, step_tx)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    app = g.compile(checkpointer=InMemoryCheckpointer())

    async def run_tx(thread: str) -> Any:
        return await app.ainvoke({"messages": [Message.text_message("go")]}, {"thread_id": thread})

    return run_tx


async def batch(run: Callable[[str], Awaitable[Any]], tag: str) -> float:
    start = time.perf_counter()
    await asyncio.gather(*(run(f"{tag}-{i}") for i in range(RUNS)))
    return time.perf_counter() - start


async def measure(framework: str) -> dict[str, float]:
    run = build(framework)
    await batch(run, "warm")
    wall = await batch(run, "timed")
    tracemalloc.start()
    await batch(run, "memory")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"wall_ms": wall * 1e3, "runs_per_s": RUNS / wall, "peak_mib": peak / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--framework", required=True)
    args = parser.parse_args()
    emit(asyncio.run(measure(args.framework)))


if __name__ == "__main__":
    main()
