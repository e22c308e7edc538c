"""What an Agent asks a model for, and the protocol every model client implements."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from tenxgraph.core.exceptions import ModelError
from tenxgraph.core.state import Message


class RouteStep(Protocol):
    """Work a request leaves until the model it goes to is known (an Agent's uploads to a
    provider's Files API): `prepare` gives the request as `provider` (None: a client that
    cannot tell) is asked it; `renew` says whether `error` came from something `prepare` put
    in `sent` that the provider no longer has (an expired file id), having forgotten it, so
    that the call is made once more, prepared again."""

    async def prepare(self, request: ModelRequest, provider: str | None) -> ModelRequest: ...

    async def renew(self, sent: ModelRequest, provider: str | None, error: ModelError) -> bool: ...


@dataclass(slots=True)
class ModelRequest:
    """One model call, in our own terms.

    `messages` is the whole prompt as `Message`s (system prompts and the summary note first);
    `tools` are OpenAI-format function schemas; `settings` are passed to the provider as they
    are (temperature, max_tokens, api_base, ...). With an `output_schema`, `output_mode` says
    how it is asked for (`tenxgraph.core.llm.structured`): "native", "tool", "text", or
    "auto" for the client to choose per model (a client that cannot choose treats it as
    "native": it gets `output_schema` and answers as it can). `per_route`, when set, prepares
    the request for each model it is asked of, just before the call (`RouteStep`).
    """

    model: str
    messages: list[Message]
    tools: list[dict[str, Any]] = field(default_factory=list)
    output_schema: type[BaseModel] | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    output_mode: str = "auto"
    per_route: RouteStep | None = None


@runtime_checkable
class ModelClient(Protocol):
    """A model: `acomplete` answers with one complete `Message`; `astream` yields
    `Message(delta=True)` pieces and then the same complete `Message` last."""

    async def acomplete(self, request: ModelRequest) -> Message: ...

    def astream(self, request: ModelRequest) -> AsyncIterator[Message]: ...


__all__ = ["ModelClient", "ModelRequest", "RouteStep"]
