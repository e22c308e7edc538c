"""Calling a model with retries and fallbacks, for any `ModelClient`.

Each model in the chain is retried on transient failures; when its retries run out, the next
one is tried. Nothing here mutates the Agent: the chain is a tuple built once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

from tenxgraph.core.exceptions import ModelContextWindowError, ModelError
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
    failures: list[tuple[str, ModelError]] = []
    for route in routes:
        asked = _for_model(request, route.model)
        attempt = 0
        while True:
            try:
                return await route.client.acomplete(asked)
            except ModelError as error:
                wait = _retry_wait(error, attempt, config)
                if wait is None:
                    _give_up(route.model, error, attempt, failures, config)
                    break
                attempt += 1
                await retry.sleep(wait)
    raise _final(failures)


async def stream(
    routes: Sequence[Route], request: ModelRequest, config: RetryConfig
) -> AsyncGenerator[Message, None]:
    """The pieces and then the complete answer of the first model in `routes` that gives
    one. A failure after the first piece went out is raised, not retried: the consumer has
    already shown that text."""
    failures: list[tuple[str, ModelError]] = []
    for route in routes:
        asked = _for_model(request, route.model)
        attempt = 0
        while True:
            started = False
            try:
                pieces = route.client.astream(asked)
                try:
                    async for message in pieces:
                        started = True
                        yield message
                finally:  # if we stop early: the provider stream is closed now, not by the GC
                    close = getattr(pieces, "aclose", None)
                    if close is not None:
                        await close()
                return
            except ModelError as error:
                wait = None if started else _retry_wait(error, attempt, config)
                if wait is None:
                    if started:
                        raise
                    _give_up(route.model, error, attempt, failures, config)
                    break
                attempt += 1
                await retry.sleep(wait)
    raise _final(failures)


def _for_model(request: ModelRequest, model: str) -> ModelRequest:
    return request if request.model == model else dataclasses.replace(request, model=model)


def _retry_wait(error: ModelError, attempt: int, config: RetryConfig) -> float | None:
    """Seconds to wait before asking the same model again, or None to stop asking it."""
    if attempt >= config.max_retries or not is_retryable(error, config):
        return None
    return config.delay(attempt + 1, error.context.get("retry_after"), retry.jitter_source)


def _give_up(
    model: str,
    error: ModelError,
    retries: int,
    failures: list[tuple[str, ModelError]],
    config: RetryConfig,
) -> None:
    """Record that this model failed for good; raise now unless a fallback model may do
    better (a transient failure, or a context window a larger model may hold)."""
    if retries:
        error.message += f" (gave up after {retries} retr{'y' if retries == 1 else 'ies'})"
        error.context["retries"] = retries
    failures.append((model, error))
    if not (is_retryable(error, config) or isinstance(error, ModelContextWindowError)):
        raise _final(failures)


def _final(failures: list[tuple[str, ModelError]]) -> ModelError:
    """The last failure, telling which models were tried before it."""
    error = failures[-1][1]
    if len(failures) > 1:
        tried = [model for model, _ in failures]
        error.message += f" (tried in turn: {', '.join(tried)})"
        error.context["tried_models"] = tried
    return error


__all__ = ["Route", "complete", "stream"]
