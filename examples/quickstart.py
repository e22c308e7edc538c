"""Quick start: a small graph that keeps a conversation thread on disk and streams its answer.

    python examples/quickstart.py [path/to/threads.db]

Runs offline. The `reply` node stands in for a model call: it streams partial (`delta=True`)
messages while it "types", then returns the complete answer, which is what gets stored. The
thread lives in a SQLite file (a temporary one unless you give a path), so a second process, or
a restarted one, continues the same conversation.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated

from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState, Message, append_items
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils.constants import END, START


class TripState(AgentState):
    """The conversation plus the fields this app needs."""

    city: str = ""
    visited: Annotated[list[str], append_items] = []


def pick_city(state: TripState) -> dict[str, object]:
    """Read the last user message and remember the city it names."""
    words = state.context[-1].text().rstrip("?!.").split()
    city = words[-1].title() if words else "Paris"
    return {"city": city, "visited": [city]}


async def reply(state: TripState) -> AsyncIterator[Message]:
    """Stream an answer word by word, then return it whole."""
    answer = f"{state.city} is a fine choice. So far you asked about: {', '.join(state.visited)}."
    message_id = f"answer-{len(state.context)}"
    for word in answer.split(" "):
        yield Message.text_message(word + " ", "assistant", message_id, delta=True)
    yield Message.text_message(answer, "assistant", message_id)


def build(db_path: Path) -> CompiledGraph:
    graph = StateGraph(TripState)
    graph.add_node(pick_city)
    graph.add_node(reply)
    graph.add_edge(START, "pick_city")
    graph.add_edge("pick_city", "reply")
    graph.add_edge("reply", END)
    return graph.compile(checkpointer=SqliteCheckpointer(db_path))


async def main() -> None:
    db_path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "trips.db"
    app = build(db_path)
    config = {"thread_id": f"trip-{uuid.uuid4().hex[:8]}"}

    result = await app.ainvoke({"messages": [Message.text_message("Tell me about Lisbon")]}, config)
    print("user:     ", result["messages"][0].text())
    print("assistant:", result["messages"][-1].text())

    print("assistant: ", end="")
    async for chunk in app.astream({"messages": [Message.text_message("And Kyoto?")]}, config):
        if chunk.message is not None and chunk.message.delta:
            print(chunk.message.text(), end="", flush=True)
    print()

    await app.aclose()

    # a new app on the same file, as after a restart: the thread is still there
    reopened = build(db_path)
    state = await reopened.aget_state(config)
    assert state is not None
    print(f"thread {config['thread_id']} in {db_path}: {len(state.context)} messages, ", end="")
    print(f"visited {state.visited}, {len(await reopened.aget_state_history(config))} versions")
    await reopened.aclose()


if __name__ == "__main__":
    asyncio.run(main())
