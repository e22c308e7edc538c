"""A served chat graph for the page's browser tests: an offline model whose answers depend on
the last user message, and the server run by uvicorn on a loopback port in a thread.

What the model does for the last user message:
- "slow ...": streams "first part ", then waits for `ChatModel.gate` before "second part."
- "weather ...": reasons, calls `weather`, then answers with the tool's result
- "transfer ...": calls `transfer`, which asks for approval with `interrupt()`, then answers
  with the tool's result
- anything else: "You said: <the message>"
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import Message, ToolCallBlock
from tenxgraph.core.state.message_block import ReasoningBlock
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.serve.app import create_app
from tenxgraph.serve.auth import Authenticate
from tenxgraph.utils import interrupt

GATE_SECONDS = 30.0  # how long the slow answer waits for the test at most


def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny in {city}"


def transfer(amount: int, to: str) -> str:
    """Send money (a human approves it first)."""
    approved = interrupt({"question": f"Send {amount} EUR to {to}?", "amount": amount})
    return f"sent {amount} EUR to {to}" if approved is True else f"declined: {approved!r}"


class ChatModel:
    """The scripted model. `gate` holds back the second part of a "slow" answer."""

    def __init__(self) -> None:
        self.gate = threading.Event()

    async def stream(
        self, messages: list[Message], info: ModelInfo
    ) -> AsyncIterator[str | ToolCallBlock | ReasoningBlock]:
        last = messages[-1]
        if last.role == "tool":
            yield "The tool said: "
            yield last.text()
            return
        asked = last.text()
        if asked.startswith("slow"):
            yield "first part "
            if not await asyncio.to_thread(self.gate.wait, GATE_SECONDS):
                raise TimeoutError("the test never opened the gate")
            yield "second part."
        elif asked.startswith("weather"):
            yield ReasoningBlock(summary="The user wants the weather; I will look it up.")
            yield ToolCallBlock(id="w1", name="weather", args={"city": "Lisbon"})
        elif asked.startswith("transfer"):
            yield ToolCallBlock(id="t1", name="transfer", args={"amount": 40, "to": "Bob"})
        else:
            yield "You said: "
            yield asked

    def function(self, messages: list[Message], info: ModelInfo) -> str:
        return "(only streamed)"


def chat_graph(model: ChatModel) -> Any:
    offline = FunctionModel(model.function, model.stream)
    return ReactAgent(offline, [weather, transfer], "Be brief.").compile()


@contextmanager
def serving(db: str, model: ChatModel, auth: Authenticate | None = None) -> Iterator[str]:
    """The chat graph served on a free loopback port; yields the base URL once GET /ok says
    the server is ready, and stops the server on exit."""
    app = create_app({"chat": chat_graph(model)}, db=db, auth=auth)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections wait in the backlog until uvicorn serves them
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        ok = httpx.get(f"{url}/ok", timeout=30.0)  # answered once startup is done
        assert ok.status_code == 200, ok.text
        yield url
    finally:
        model.gate.set()  # a slow answer still waiting does not hold up the shutdown
        server.should_exit = True
        thread.join(timeout=30.0)
        sock.close()
