"""A small MCP server for the tests and examples/mcp_tools.py, written with the SDK's MCPServer.

    python tests/mcp/_server.py            # over stdio
    python tests/mcp/_server.py http       # streamable HTTP on 127.0.0.1; prints its port first

Tools: `echo` (text), `stats` (structured content), `explode` (raises: an error result),
`pixel` (an image), `hang` (never answers: for timeouts), `die` (the process exits: a dead
session), `pid` and `whoami` (the Authorization header the HTTP request came with, for the tests).
"""

from __future__ import annotations

import os
import socket
import sys

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

# a 1x1 PNG
PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a2dd1cf90000000049454e44ae426082"
)

server = MCPServer("demo", log_level="CRITICAL")  # the failing tools: no tracebacks


class Stats(BaseModel):
    count: int
    total: float
    mean: float


@server.tool()
def echo(text: str, times: int = 1) -> str:
    """Repeat the text."""
    return " ".join([text] * times)


@server.tool()
def stats(numbers: list[float]) -> Stats:
    """Count, total and mean of some numbers."""
    total = sum(numbers)
    return Stats(count=len(numbers), total=total, mean=total / len(numbers) if numbers else 0.0)


@server.tool()
def explode(reason: str) -> str:
    """Always fails."""
    raise ToolError(f"exploded: {reason}")


@server.tool()
def pixel() -> Image:
    """A 1x1 PNG image."""
    return Image(data=PIXEL, format="png")


@server.tool()
async def hang() -> str:
    """Never answers."""
    await anyio.Event().wait()
    return "unreachable"


@server.tool()
def die() -> str:
    """Ends the server process at once."""
    os._exit(3)


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def whoami(ctx: Context) -> str:
    """The Authorization header of the HTTP request ("" over stdio)."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", None)
    return str(headers.get("authorization", "")) if headers is not None else ""


def serve_http(port: int = 0) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning")
    print(sock.getsockname()[1], flush=True)  # listening already: connections wait in the queue
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        serve_http(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    else:
        server.run("stdio")
