"""Durable threads: a conversation kept in SQLite and continued by a new app, as after a restart.

    python examples/persistence.py                      # offline
    python examples/persistence.py openai/gpt-4o-mini   # a real model (needs OPENAI_API_KEY)

The first app talks on thread "ada" and is closed. A second app, compiled anew on the same file
(as a new process would), continues the thread: the model gets the whole history. Then the
history API lists every saved version, and an old version can still be read.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from tenxgraph import END, START, Agent, StateGraph
from tenxgraph.core.exceptions import ModelAuthError
from tenxgraph.core.graph import CompiledGraph
from tenxgraph.core.llm import FunctionModel, ModelClient, ModelInfo
from tenxgraph.core.state import Message
from tenxgraph.storage.checkpointer import SqliteCheckpointer


def offline(messages: list[Message], info: ModelInfo) -> str:  # stands in for a real model
    thread = [m for m in messages if m.role != "system"]
    return f"I see {len(thread)} message(s) of this thread, the first being {thread[0].text()!r}."


def build(model: str | ModelClient, db_path: Path) -> CompiledGraph:
    graph = StateGraph()
    graph.add_node("assistant", Agent(model, system_prompt="Be brief.", max_tokens=100))
    graph.add_edge(START, "assistant")
    graph.add_edge("assistant", END)
    return graph.compile(checkpointer=SqliteCheckpointer(db_path))


async def main() -> None:
    model = sys.argv[1] if len(sys.argv) > 1 else FunctionModel(offline)
    db_path = Path(tempfile.mkdtemp()) / "threads.db"
    config = {"thread_id": "ada"}

    async with build(model, db_path) as app:  # closes the database at the end
        result = await app.ainvoke({"messages": [Message.text_message("Hi, I'm Ada.")]}, config)
        print("app 1 | assistant:", result["messages"][-1].text())

    async with build(model, db_path) as app:  # a new app: nothing in memory, only the file
        question = Message.text_message("What is my name?")
        result = await app.ainvoke({"messages": [question]}, config)
        print("app 2 | assistant:", result["messages"][-1].text())

        state = await app.aget_state(config)
        assert state is not None
        print(f"\n{db_path} keeps thread 'ada' with {len(state.context)} messages:")
        for message in state.context:
            print(f"  {message.role:9} {message.text()}")
        print("its versions, newest first:")
        history = await app.aget_state_history(config)
        for info in history:
            print(f"  v{info.version}: step {info.step}, {info.status}, {info.message_count} msgs")
        first = await app.aget_state({**config, "checkpoint_version": history[-1].version})
        assert first is not None
        print(f"v{history[-1].version} still reads back: {[m.text() for m in first.context]}")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except ModelAuthError as exc:
        raise SystemExit(str(exc)) from None
