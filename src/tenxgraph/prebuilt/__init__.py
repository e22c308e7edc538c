"""Ready-made graphs built from the public pieces: `ReactAgent` and its routing helper."""

from tenxgraph.prebuilt.agent import ReactAgent, tools_condition

__all__ = ["ReactAgent", "tools_condition"]
