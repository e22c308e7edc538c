"""A worker process for the cross-process MCP test: a ReactAgent whose MCP tools need approval,
kept in a SQLite file. ``ask`` starts a run that pauses before the MCP call; ``resume``, in
another process, approves it: the tool runs there, on that process's own session.

    python -m tests.mcp_tools._resume_worker ask|resume DB THREAD

Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import Message, ToolCallBlock, ToolResultBlock
from tenxgraph.mcp import MCPServer, MCPTools
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tests.mcp_tools.conftest import SERVER


def scripted(messages: list[Message], info: ModelInfo) -> str | ToolCallBlock:
    last = messages[-1]
    if last.role == "user":
        return ToolCallBlock(id="m1", name="demo__echo", args={"text": "approved", "times": 2})
    return f"done: {last.text()}"


async def main(step: str, db: str, thread: str) -> None:
    server = MCPServer.stdio("demo", sys.executable, [str(SERVER)], requires_approval=True)
    config: dict[str, Any] = {"thread_id": thread}
    async with MCPTools([server]) as tools:
        app = ReactAgent(FunctionModel(scripted), tools).compile(
            checkpointer=SqliteCheckpointer(db)
        )
        if step == "ask":
            out = await app.ainvoke({"messages": [Message.text_message("go")]}, config)
        else:
            out = await app.ainvoke({"resume": "approve"}, config)
    messages: list[Message] = out["messages"]
    outputs = [b.output for m in messages for b in m.content if isinstance(b, ToolResultBlock)]
    interrupt = out.get("interrupt")
    print(
        json.dumps(
            {
                "interrupt": interrupt.get("reason") if interrupt else None,
                "asked": [c.name for c in messages[-1].tool_call_blocks()],
                "outputs": outputs,
                "last": messages[-1].text(),
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
