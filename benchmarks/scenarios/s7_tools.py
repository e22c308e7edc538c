"""S7: the overhead of one ToolNode round: 8 parallel calls of trivial async tools.

    python benchmarks/run.py s7_tools --rounds 3 --peers langgraph

A round is one `ainvoke` of START -> "tools" -> END on a fresh thread of the in-memory
checkpointer (LangGraph: `langgraph.prebuilt.ToolNode`, `MessagesState`, `InMemorySaver`).
The input ends with an assistant message asking for 8 tool calls, call_i = t_i(x=i); the
tools t0..t7 are async (so neither framework uses a worker thread) and return str(x). The
output must hold the 8 right tool messages. An empty round is the same graph and input with
a node that returns nothing instead of the ToolNode, so the ToolNode's own cost (schema
lookup, validation, dispatch, tool messages, tenxgraph's ledger writes, the larger
checkpoint) is their difference. Rounds of both kinds alternate; each thread is deleted after
its round, outside the timed `ainvoke`.

Measures (medians of --repeats rounds, default 300, after --warmups, default 30):
round_us / empty_round_us (wall, `time.perf_counter()`), round_cpu_us / empty_round_cpu_us
(CPU of the process, `time.process_time()`), per_call_us / per_call_cpu_us = (round - empty
round) / 8.
"""

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _common import emit, median

CALLS = 8


def make_tool(i: int) -> Callable[[int], Awaitable[str]]:
    async def tool(x: int) -> str:
        """Return x as text."""
        return str(x)

    tool.__name__ = tool.__qualname__ = f"t{i}"
    return tool


TOOLS = [make_tool(i) for i in range(CALLS)]
Results = list[tuple[str, Any]]  # (call id, output) of each tool message of a round


def build(
    framework: str, with_tools: bool
) -> Callable[[str], Awaitable[tuple[Results, float, float]]]:
    """A coroutine function running one round on thread `tid`: its tool messages and the
    wall and CPU seconds of its `ainvoke`."""
    if framework == "langgraph":
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import END, START, MessagesState, StateGraph
        from langgraph.prebuilt import ToolNode as LgToolNode

        async def empty(state: MessagesState) -> dict[str, Any]:
            return {}

        g = StateGraph(MessagesState)
        g.add_node("tools", LgToolNode(TOOLS) if with_tools else empty)
        g.add_edge(START, "tools")
        g.add_edge("tools", END)
        saver = InMemorySaver()
        app = g.compile(checkpointer=saver)

        async def round_lg(tid: str) -> tuple[Results, float, float]:
            calls = [{"name": f"t{i}", "args": {"x": i}, "id": f"call_{i}"} for i in range(CALLS)]
            data = {"messages": [HumanMessage("go"), AIMessage("", tool_calls=calls)]}
            start = time.perf_counter(), time.process_time()
            out = await app.ainvoke(data, {"configurable": {"thread_id": tid}})
            wall, cpu = time.perf_counter() - start[0], time.process_time() - start[1]
            await saver.adelete_thread(tid)
            results = [(m.tool_call_id, m.content) for m in out["messages"] if m.type == "tool"]
            return results, wall, cpu

        return round_lg

    from tenxgraph.core.graph import StateGraph, ToolNode
    from tenxgraph.core.state import AgentState, Message, ToolCallBlock
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer
    from tenxgraph.utils.constants import END, START

    async def empty_tx(state: AgentState) -> None:
        return None

    g = StateGraph(AgentState)
    g.add_node("tools", ToolNode(TOOLS) if with_tools else empty_tx)
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    checkpointer = InMemoryCheckpointer()
    app = g.compile(checkpointer=checkpointer)

    async def round_tx(tid: str) -> tuple[Results, float, float]:
        blocks = [ToolCallBlock(id=f"call_{i}", name=f"t{i}", args={"x": i}) for i in range(CALLS)]
        data = {"messages": [Message.text_message("go"), Message(role="assistant", content=blocks)]}
        start = time.perf_counter(), time.process_time()
        out = await app.ainvoke(data, {"thread_id": tid})
        wall, cpu = time.perf_counter() - start[0], time.process_time() - start[1]
        await checkpointer.adelete_thread(tid)
        results = [
            (b.call_id, b.output) for m in out["messages"] if m.role == "tool" for b in m.content
        ]
        return results, wall, cpu

    return round_tx


async def measure(framework: str, repeats: int, warmups: int) -> dict[str, float]:
    runs = {"round": build(framework, True), "empty_round": build(framework, False)}
    expected = sorted((f"call_{i}", str(i)) for i in range(CALLS))
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for n in range(warmups + repeats):
        for name, run in runs.items():
            results, wall, cpu = await run(f"{name}-{n}")
            if name == "round" and sorted(results) != expected:
                raise SystemExit(f"{framework}: wrong tool messages {results!r}")
            if name == "empty_round" and results:
                raise SystemExit(f"{framework}: the empty round produced {results!r}")
            if n >= warmups:
                times[name].append((wall, cpu))
    figures: dict[str, float] = {}
    for name, rows in times.items():
        figures[f"{name}_us"] = median([wall for wall, _ in rows]) * 1e6
        figures[f"{name}_cpu_us"] = median([cpu for _, cpu in rows]) * 1e6
    figures["per_call_us"] = (figures["round_us"] - figures["empty_round_us"]) / CALLS
    figures["per_call_cpu_us"] = (figures["round_cpu_us"] - figures["empty_round_cpu_us"]) / CALLS
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--framework", required=True)
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--warmups", type=int, default=30)
    args = parser.parse_args()
    emit(asyncio.run(measure(args.framework, args.repeats, args.warmups)))


if __name__ == "__main__":
    main()
