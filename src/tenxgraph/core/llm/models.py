"""Picking the client for a model name: built-in offline names, else litellm."""

from __future__ import annotations

from tenxgraph.core.llm.calling import Route
from tenxgraph.core.llm.litellm_client import LiteLLMClient
from tenxgraph.core.llm.offline import TestModel
from tenxgraph.core.llm.request import ModelClient

OFFLINE_NAMES = frozenset({"test"})


def resolve(model: str | ModelClient, litellm_client: LiteLLMClient) -> Route:
    """The route for `model`: ``"test"`` is the offline `TestModel`, a `ModelClient` object is
    used as it is, and any other name goes to litellm (``openai/...``, ``anthropic/...``)."""
    if isinstance(model, str):
        if not model.strip():
            raise ValueError("model must be a non-empty name like 'openai/gpt-4o-mini' or 'test'")
        if model in OFFLINE_NAMES:
            return Route(TestModel(), model)
        return Route(litellm_client, model)
    if isinstance(model, ModelClient):
        return Route(model, str(getattr(model, "model_name", type(model).__name__)))
    raise TypeError(
        "model must be a model name (e.g. 'openai/gpt-4o-mini', 'test') or an object with "
        f"acomplete() and astream() (a ModelClient), not {type(model).__name__}"
    )


__all__ = ["OFFLINE_NAMES", "resolve"]
