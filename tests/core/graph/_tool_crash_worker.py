"""A child process for the crash test: a model asks for a `charge` tool (its side effect is a
line in a file); in mode ``crash`` the process kills itself with SIGKILL the moment the
tool's result is in the ledger, before the step's checkpoint is written. Mode ``resume``
continues the same thread in a new process.

    python _tool_crash_worker.py DB COUNTER crash|resume
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.llm.offline import ModelInfo
from tenxgraph.core.state import Message, ToolCallBlock
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.checkpointer import SqliteCheckpointer

THREAD = "crash-thread"


def main(db: str, counter: str, mode: str) -> None:
    ledger_line = Path(counter)

    def charge(amount: int) -> str:
        """Charge the customer's card."""
        with ledger_line.open("a") as f:  # the side effect we must not repeat
            f.write(f"charged {amount}\n")
        return f"charged {amount}"

    def model(messages: list[Message], info: ModelInfo) -> Any:
        if messages[-1].role == "tool":
            return f"done: {messages[-1].text()}"
        return [ToolCallBlock(id="call_charge", name="charge", args={"amount": 5})]

    checkpointer = SqliteCheckpointer(db)
    if mode == "crash":
        record = checkpointer.aput_tool_result

        async def record_then_die(*args: Any, **kwargs: Any) -> bool:
            stored = await record(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)  # right after the result is recorded
            return stored

        checkpointer.aput_tool_result = record_then_die  # type: ignore[method-assign]
    app = ReactAgent(FunctionModel(model), [charge]).compile(checkpointer=checkpointer)
    config = {"thread_id": THREAD}
    data = {"messages": [Message.text_message("charge me 5")]} if mode == "crash" else None
    result = asyncio.run(app.ainvoke(data, config))
    print(result["messages"][-1].text())


if __name__ == "__main__":
    main(*sys.argv[1:4])
