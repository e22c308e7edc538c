"""S5: a node streaming 2,000 `delta=True` messages through `astream`.

    python benchmarks/run.py s5_streaming --peers langgraph

LangGraph streams the same tokens with its custom stream mode (`get_stream_writer`), which
carries plain strings; tenxgraph carries a typed `Message` per chunk. Measure: us_per_chunk,
wall time of the whole stream divided by 2,000 (median of --repeats streams).
"""

import argparse
import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from _common import emit, median

CHUNKS = 2_000


def build(framework: str) -> Callable[[], AsyncIterator[Any]]:
    if framework == "langgraph":
        from typing import TypedDict

        from langgraph.config import get_stream_writer
        from langgraph.graph import END, START, StateGraph

        class LState(TypedDict):
            text: str

        async def talk(state: LState) -> dict[str, str]:
            write = get_stream_writer()
            for i in range(CHUNKS):
                write(f"tok{i} ")
            return {"text": "done"}

        g = StateGraph(LState)
        g.add_node("talk", talk)
        g.add_edge(START, "talk")
        g.add_edge("talk", END)
        app = g.compile()
        return lambda: app.astream({"text": ""}, stream_mode="custom")

    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import AgentState, Message
    from tenxgraph.utils.constants import END, START

    async def talk_tx(state: AgentState) -> AsyncIterator[Message]:
        for i in range(CHUNKS):
            yield Message.text_message(f"tok{i} ", "assistant", "answer-1", delta=True)
        yield Message.text_message("done", "assistant", "answer-1")

    g = StateGraph(AgentState)
    g.add_node("talk", talk_tx)
    g.add_edge(START, "talk")
    g.add_edge("talk", END)
    app = g.compile()
    return lambda: app.astream({"messages": [Message.text_message("go")]})


async def measure(framework: str, repeats: int) -> dict[str, float]:
    stream = build(framework)
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        count = 0
        async for _ in stream():
            count += 1
        times.append((time.perf_counter() - start) / CHUNKS * 1e6)
        assert count >= CHUNKS, count
    return {"us_per_chunk": median(times[1:])}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--framework", required=True)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    emit(asyncio.run(measure(args.framework, args.repeats)))


if __name__ == "__main__":
    main()
