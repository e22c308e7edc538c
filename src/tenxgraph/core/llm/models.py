"""Picking the client for a model name: built-in offline names, else litellm."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tenxgraph.core.llm.calling import Route
from tenxgraph.core.llm.litellm_client import LiteLLMClient
from tenxgraph.core.llm.offline import TestModel
from tenxgraph.core.llm.request import ModelClient
from tenxgraph.core.redaction import remember_settings

# how a fallback model is given: a name or client, or one with its own settings (its key...)
FallbackModel = str | ModelClient | tuple[str | ModelClient, Mapping[str, Any]] | Mapping[str, Any]

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


def resolve_fallback(entry: FallbackModel, litellm_client: LiteLLMClient) -> Route:
    """The route for one of an Agent's `fallback_models`: a name or client as `resolve` takes
    it, or one with settings of its own, as ``("anthropic/claude-sonnet-4-5", {"api_key":
    ...})`` or ``{"model": "anthropic/claude-sonnet-4-5", "api_key": ...}``. Its own key (or
    base URL) is sent to its provider only; without one it uses its provider's environment
    variable (the primary's key goes with it only to the primary's own provider)."""
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], Mapping):
            raise TypeError(
                "a fallback model given as a tuple must be (model, settings), e.g. "
                f"('anthropic/claude-sonnet-4-5', {{'api_key': ...}}), not {_shape(entry)}"
            )
        model, settings = entry[0], dict(entry[1])
    elif isinstance(entry, Mapping):
        settings = dict(entry)
        model = settings.pop("model", None)
        if model is None:
            raise ValueError(
                "a fallback model given as a dict needs its name under 'model', e.g. "
                f"{{'model': 'anthropic/claude-sonnet-4-5', 'api_key': ...}}; got keys "
                f"{sorted(map(str, settings))}"
            )
    else:
        return resolve(entry, litellm_client)
    remember_settings(settings)
    route = resolve(model, litellm_client)
    return Route(route.client, route.model, settings)


def _shape(entry: tuple[Any, ...]) -> str:
    """A tuple described without its values (they may hold a key)."""
    return f"a tuple of {len(entry)}: ({', '.join(type(v).__name__ for v in entry)})"


__all__ = ["OFFLINE_NAMES", "FallbackModel", "resolve", "resolve_fallback"]
