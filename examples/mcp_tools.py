"""MCP tools: an MCP server's tools used by a ReactAgent (needs ``pip install tenxgraph[mcp]``).

    python examples/mcp_tools.py                      # offline: a scripted model picks the calls
    python examples/mcp_tools.py openai/gpt-4o-mini   # a real model decides (needs OPENAI_API_KEY)

The server is examples/mcp_server/weather.py, written with the MCP SDK's `MCPServer` and
spoken to over stdio. `MCPTools` starts it, lists its tools
(named ``weather__forecast`` and ``weather__convert``: the server's name is their prefix), keeps
one session for every call inside the ``async with`` block and stops the server at its end.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tenxgraph.core.exceptions import ModelAuthError
from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import Message, ToolCallBlock
from tenxgraph.mcp import MCPServer, MCPTools
from tenxgraph.prebuilt import ReactAgent


def scripted(messages: list[Message], info: ModelInfo) -> str | ToolCallBlock:
    """Stands in for a real model: forecast, then convert, then answer."""
    last = messages[-1]
    if last.role == "user":
        return ToolCallBlock(id="c1", name="weather__forecast", args={"city": "Lisbon"})
    if last.metadata.get("function_name") == "weather__forecast":
        return ToolCallBlock(id="c2", name="weather__convert", args={"celsius": 21})
    return f"Sunny in Lisbon tomorrow, 21 C ({last.text()})."


async def main() -> None:
    model = sys.argv[1] if len(sys.argv) > 1 else FunctionModel(scripted)
    script = Path(__file__).parent / "mcp_server" / "weather.py"
    server = MCPServer.stdio("weather", sys.executable, [str(script)])
    async with MCPTools([server]) as tools:
        for spec in tools:  # what the model is shown: the server's own schemas
            function = spec.schema["function"]
            print(f"tool {spec.name}{list(function['parameters']['properties'])}: ", end="")
            print(function["description"])
        agent = ReactAgent(model, tools, "You help with the weather. Be brief.")
        result = await agent.compile().ainvoke(
            {"messages": [Message.text_message("What's the weather in Lisbon tomorrow, in F?")]}
        )
    for message in result["messages"]:
        if message.role == "tool":
            print(f"  tool {message.metadata['function_name']} -> {message.text()}")
        else:
            calls = [f"{c.name}({c.args})" for c in message.tool_call_blocks()]
            print(f"{message.role}: {message.text() or 'calls ' + ', '.join(calls)}")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except ModelAuthError as exc:
        raise SystemExit(str(exc)) from None
