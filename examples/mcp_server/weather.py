"""The MCP server examples/mcp_tools.py starts: two tools, written with the MCP SDK's
`MCPServer`, served over stdio (``python examples/mcp_server/weather.py``). It needs only the
SDK: a stdio server gets a minimal environment, not its client's."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

server = MCPServer("weather", log_level="WARNING")


class Temperature(BaseModel):
    celsius: float
    fahrenheit: float


@server.tool()
def forecast(city: str) -> str:
    """Tomorrow's weather in a city."""
    return f"Tomorrow in {city}: sunny, 21 C."


@server.tool()
def convert(celsius: float) -> Temperature:
    """A temperature in Celsius and Fahrenheit."""
    return Temperature(celsius=celsius, fahrenheit=celsius * 9 / 5 + 32)


if __name__ == "__main__":
    server.run("stdio")
