"""A child process for the idempotency-key test: a model asks for a `charge` tool, which
writes the `idempotency_key` it was given to a file (its side effect) and then hangs, so the
test can kill the process between the side effect and the ledger write.

    python _idempotency_worker.py sqlite DB_PATH KEY_FILE
    python _idempotency_worker.py postgres DSN SCHEMA KEY_FILE
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from tenxgraph.core.graph import CompiledGraph
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.llm.offline import ModelInfo
from tenxgraph.core.state import Message, ToolCallBlock
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.checkpointer import BaseCheckpointer

THREAD = "idempotent-thread"


def model(messages: list[Message], info: ModelInfo) -> Any:
    if messages[-1].role == "tool":
        return f"done: {messages[-1].text()}"
    return [ToolCallBlock(id="call_charge", name="charge", args={"amount": 5})]


def build(checkpointer: BaseCheckpointer, key_file: Path, hang: bool) -> CompiledGraph:
    """The graph both processes run; with `hang`, the tool never returns."""

    async def charge(amount: int, idempotency_key: str) -> str:
        """Charge the customer's card."""
        with key_file.open("a") as f:
            f.write(idempotency_key + "\n")
        if hang:
            await asyncio.Event().wait()  # killed here, before the ledger write
        return f"charged {amount}"

    return ReactAgent(FunctionModel(model), [charge]).compile(checkpointer=checkpointer)


def open_store(kind: str, where: str, schema: str | None) -> BaseCheckpointer:
    if kind == "sqlite":
        from tenxgraph.storage.checkpointer import SqliteCheckpointer

        return SqliteCheckpointer(where)
    from tenxgraph.storage.checkpointer import PgCheckpointer

    return PgCheckpointer(where, schema=schema, max_size=2)


def main(argv: list[str]) -> None:
    kind, where = argv[0], argv[1]
    schema = argv[2] if kind == "postgres" else None
    key_file = Path(argv[-1])
    app = build(open_store(kind, where, schema), key_file, hang=True)
    data = {"messages": [Message.text_message("charge me 5")]}
    asyncio.run(app.ainvoke(data, {"thread_id": THREAD}))


if __name__ == "__main__":
    main(sys.argv[1:])
