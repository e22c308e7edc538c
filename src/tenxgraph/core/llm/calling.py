"""Calling a model with retries and fallbacks, for any `ModelClient`.

Each model in the chain is retried on transient failures; when its retries run out, the next
one is tried. Nothing here mutates the Agent: the chain is a tuple built once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from tenxgraph.core.exceptions import ModelError
from tenxgraph.core.llm import retry
from tenxgraph.core.llm.request import ModelClient, ModelRequest
from tenxgraph.core.llm.retry import RetryConfig, is_retryable
from tenxgraph.core.state import Message


@dataclass(frozen=True, slots=True)
class Route:
    """One model to try: the client that serves it and the name it is asked for by."""

    client: ModelClient
    model: str


async def complete(routes: Sequence[Route], request: ModelRequest, config: RetryConfig) -> Message:
    """One complete answer from the first model in `routes` that gives one."""
    last: ModelError | None = None
    for route in routes:
        asked = dataclasses.replace(request, model=route.model)
        attempt = 0
        while True:
            try:
                return await route.client.acomplete(asked)
            except ModelError as error:
                if not is_retryable(error, config):
                    raise
                if attempt >= config.max_retries:
                    last = _exhausted(error, attempt)
                    break
                attempt += 1
                await retry.sleep(_wait(config, attempt, error))
    assert last is not None
    raise last


async def stream(
    routes: Sequence[Route], request: ModelRequest, config: RetryConfig
) -> AsyncIterator[Message]:
    """The pieces and then the complete answer of the first model in `routes` that gives
    one. A failure after the first piece went out is raised, not retried: the consumer has
    already shown that text."""
    last: ModelError | None = None
    for route in routes:
        asked = dataclasses.replace(request, model=route.model)
        attempt = 0
        while True:
            started = False
            try:
                async for message in route.client.astream(asked):
                    started = True
                    yield message
                return
            except ModelError as error:
                if started or not is_retryable(error, config):
                    raise
                if attempt >= config.max_retries:
                    last = _exhausted(error, attempt)
                    break
                attempt += 1
                await retry.sleep(_wait(config, attempt, error))
    assert last is not None
    raise last


def _wait(config: RetryConfig, attempt: int, error: ModelError) -> float:
    return config.delay(attempt, error.context.get("retry_after"), retry.jitter_source)


def _exhausted(error: ModelError, retries: int) -> ModelError:
    if retries:
        error.message += f" (gave up after {retries} retr{'y' if retries == 1 else 'ies'})"
        error.context["retries"] = retries
    return error


__all__ = ["Route", "complete", "stream"]
