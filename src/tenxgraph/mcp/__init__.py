"""MCP servers' tools as tenxgraph tools: ``async with MCPTools([MCPServer.stdio(...)]) as
tools: ReactAgent(model, tools)``. Needs the `mcp` extra (``pip install "tenxgraph[mcp]"``).

This package imports the MCP SDK; nothing in `tenxgraph.core` imports this package.
"""

try:
    import mcp as _sdk  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        'tenxgraph.mcp needs the MCP SDK: pip install "tenxgraph[mcp]" (or "mcp>=2,<3")'
    ) from exc

from tenxgraph.mcp._results import content_block, result_value
from tenxgraph.mcp._tools import MCPConnectionError, MCPServer, MCPTimeoutError, MCPTools

__all__ = [
    "MCPConnectionError",
    "MCPServer",
    "MCPTimeoutError",
    "MCPTools",
    "content_block",
    "result_value",
]
