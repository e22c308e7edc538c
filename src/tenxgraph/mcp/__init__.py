"""MCP servers' tools as tenxgraph tools: ``async with MCPTools([MCPServer.stdio(...)]) as
tools: ReactAgent(model, tools)``. Needs the `mcp` extra (``pip install tenxgraph[mcp]``).

This package imports the MCP SDK; nothing in `tenxgraph.core` imports this package.
"""

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
