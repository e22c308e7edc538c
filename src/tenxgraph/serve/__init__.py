"""The Agent Protocol server (`tenxgraph serve`, or `create_app` mounted in your own ASGI
service). Needs the `serve` extra: `pip install "tenxgraph[serve]"`."""

from tenxgraph.serve.app import DEFAULT_DB, create_app
from tenxgraph.serve.auth import Authenticate, bearer_tokens

__all__ = ["DEFAULT_DB", "Authenticate", "bearer_tokens", "create_app"]
