"""S2: one thread, 300 sequential invokes, each adding a user and an assistant message.

    python benchmarks/run.py s2_history
    python benchmarks/run.py s2_history --granularity all --peers langgraph

Each framework uses its in-memory checkpointer, so every invoke continues the same thread.
Measures: first30_ms / last30_ms (median invoke time of calls 1-30 and 271-300), growth (their
ratio: 1.0 means the cost does not grow with history) and total_ms.

`--granularity low|partial|full` (or a comma-separated list, or `all`) picks tenxgraph's
`ResponseGranularity` for `ainvoke` (default `low`). LangGraph returns its whole state whatever
is asked, so its run is the same code for every granularity (it runs once per granularity too,
on a thread of its own, so both sides do the same work in the same order). With more than one
granularity every figure is prefixed with it (`partial_last30_ms`), each granularity on its own
thread, in the order given, in one process, and two more figures come per granularity:

- per_msg_us: (last30 - first30) / (messages at call 285 - messages at call 15), in
  microseconds: what each message of history adds to a call;
- handout_us_per_msg (tenxgraph, when `low` is measured too, for `partial` and `full`):
  (last30 - low's last30) / the 570 messages the thread holds at call 285: what handing out
  the conversation costs per message over a LOW call.

Each result is checked after its call (outside the timing): it must hold the whole thread at
`partial` and `full` (tenxgraph: `result["context"]` / `result["state"].context`; LangGraph:
`result["messages"]`).
"""

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _common import emit, median

TURNS = 300
WINDOW = 30
GRANULARITIES = ("low", "partial", "full")


def messages_after(call: int) -> int:
    """Messages in the thread once call `call` (1-based) returned."""
    return 2 * call


def build(framework: str, granularity: str, thread_id: str) -> Callable[[int], Awaitable[Any]]:
    """A coroutine function running turn i on the thread, checking what it returned."""
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
        config = {"configurable": {"thread_id": thread_id}}

        async def turn_lg(i: int) -> Any:
            return await app.ainvoke({"messages": [HumanMessage(content=f"turn {i}")]}, config)

        return turn_lg

    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import AgentState, Message
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer
    from tenxgraph.utils.constants import END, START, ResponseGranularity

    async def reply_tx(state: AgentState) -> Message:
        return Message.text_message(f"reply {len(state.context)}", "assistant")

    g = StateGraph(AgentState)
    g.add_node("reply", reply_tx)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    app = g.compile(checkpointer=InMemoryCheckpointer())
    config = {"thread_id": thread_id}
    wanted = ResponseGranularity(granularity)

    async def turn_tx(i: int) -> Any:
        return await app.ainvoke(
            {"messages": [Message.text_message(f"turn {i}")]}, dict(config), wanted
        )

    return turn_tx


def handed_out(framework: str, granularity: str, result: Any) -> int | None:
    """How many messages of the thread a result holds (None: the granularity hands out none)."""
    if framework == "langgraph":
        return len(result["messages"])
    if granularity == "full":
        return len(result["state"].context)
    if granularity == "partial":
        return len(result["context"])
    return None


async def run_one(framework: str, granularity: str) -> list[float]:
    turn = build(framework, granularity, f"s2-{granularity}")
    times = []
    for i in range(TURNS):
        start = time.perf_counter()
        result = await turn(i)
        times.append((time.perf_counter() - start) * 1e3)
        held = handed_out(framework, granularity, result)
        if held is not None and held != messages_after(i + 1):
            raise RuntimeError(
                f"s2_history: {framework} at {granularity} handed out {held} messages after "
                f"call {i + 1}, expected {messages_after(i + 1)}"
            )
    return times


def figures(times: list[float]) -> dict[str, float]:
    first, last = median(times[:WINDOW]), median(times[-WINDOW:])
    mid_first = messages_after(WINDOW // 2)
    mid_last = messages_after(TURNS - WINDOW // 2)
    return {
        "first30_ms": first,
        "last30_ms": last,
        "growth": last / first,
        "total_ms": sum(times),
        "per_msg_us": (last - first) * 1e3 / (mid_last - mid_first),
    }


async def measure(framework: str, granularities: list[str]) -> dict[str, float]:
    results = {g: figures(await run_one(framework, g)) for g in granularities}
    if len(granularities) == 1:
        only = results[granularities[0]]
        del only["per_msg_us"]  # the single-granularity figures stay as they were
        return only
    measures: dict[str, float] = {}
    low = results.get("low")
    at = messages_after(TURNS - WINDOW // 2)
    for g, row in results.items():
        for key, value in row.items():
            measures[f"{g}_{key}"] = value
        if framework != "langgraph" and low is not None and g != "low":
            measures[f"{g}_handout_us_per_msg"] = (row["last30_ms"] - low["last30_ms"]) * 1e3 / at
    return measures


def parse_granularities(value: str) -> list[str]:
    chosen = list(GRANULARITIES) if value == "all" else [v.strip() for v in value.split(",")]
    for g in chosen:
        if g not in GRANULARITIES:
            raise argparse.ArgumentTypeError(f"unknown granularity {g!r}: low, partial, full, all")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--framework", required=True)
    parser.add_argument(
        "--granularity",
        type=parse_granularities,
        default=["low"],
        help="low, partial, full, a comma-separated list of them, or all",
    )
    args = parser.parse_args()
    emit(asyncio.run(measure(args.framework, args.granularity)))


if __name__ == "__main__":
    main()
