"""Calling a model with retries and fallbacks, for any `ModelClient`.

Each model in the chain is retried on transient failures; when its retries run out, the next
one is tried. Nothing here mutates the Agent: the chain is a tuple built once.

Each route owns its connection settings (key, base URL, ...): the request's settings are the
first route's, and a fallback gets them only when it is served by the same provider and gives
none of its own. Other settings (temperature, max_tokens, ...) are shared by every route.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tenxgraph.core.exceptions import ModelContextWindowError, ModelError, UnsupportedContentError
from tenxgraph.core.llm import retry
from tenxgraph.core.llm.request import ModelClient, ModelRequest
from tenxgraph.core.llm.retry import RetryConfig, is_retryable
from tenxgraph.core.redaction import get_logger, is_secret_name
from tenxgraph.core.state import Message
from tenxgraph.observability.observer import ModelCall, Observer, current_observer

log = get_logger("tenxgraph.model")


@dataclass(frozen=True, slots=True)
class Route:
    """One model to try: the client that serves it, the name it is asked for by, and for a
    fallback the settings given with it (None: only what it may inherit, see the module)."""

    client: ModelClient
    model: str
    settings: Mapping[str, Any] | None = field(default=None, hash=False)


# settings that say where a call goes; with the credentials, they belong to one route
ENDPOINT_SETTINGS = frozenset(
    {
        "api_base",
        "base_url",
        "api_version",
        "organization",
        "custom_llm_provider",
        "deployment_id",
        "headers",
        "extra_headers",
        "aws_region_name",
        "aws_bedrock_runtime_endpoint",
        "aws_sts_endpoint",
        "vertex_project",
        "vertex_location",
    }
)


def is_connection_setting(name: str) -> bool:
    """Whether a setting belongs to one provider: where the call goes, or a credential."""
    return name in ENDPOINT_SETTINGS or is_secret_name(name)


async def complete(routes: Sequence[Route], request: ModelRequest, config: RetryConfig) -> Message:
    """One complete answer from the first model in `routes` that gives one."""
    failures: list[tuple[str, ModelError]] = []
    primary = routes[0]
    for route in routes:
        if route is primary and request.model == route.model:  # the usual case: as it is
            asked = request
        else:
            asked = _for_route(request, route, primary)
        attempt = 0
        renewed = False
        observer = current_observer.get()
        watched = observer if observer is not None and observer.watching else None
        while True:  # a call nothing watches is only counted
            call = None if watched is None else _observed(watched, route, asked, False)
            sent: ModelRequest | None = None
            try:
                sent = await _prepared(route, asked)
                answer = await route.client.acomplete(sent)
            except BaseException as error:
                if call is not None:
                    await call.failed(error)
                if not isinstance(error, ModelError):
                    raise
                if not renewed and await _renewed(route, sent, error):
                    renewed = True  # an id the provider forgot: prepared again, asked again
                    continue
                wait = _retry_wait(error, attempt, config)
                if wait is None:
                    _give_up(route.model, error, attempt, failures, config, route is routes[-1])
                    break
                attempt += 1
                _retrying(route.model, error, attempt, wait)
                await retry.sleep(wait)
                continue
            if call is not None:
                await call.finished(answer)
            elif observer is not None:
                observer.count_call(answer, _free(route))
            return answer
    raise _final(failures)


async def open_stream(
    routes: Sequence[Route], request: ModelRequest, config: RetryConfig
) -> tuple[Message | None, AsyncIterator[Message], ModelCall | None]:
    """The first piece of the first model in `routes` that gives one, and that model's own
    iterator of the rest (the other pieces, then the complete answer), which the caller
    closes (`close`). Failures before the first piece are retried and fall back; one after
    it comes from the model's iterator as it is, not retried: the consumer has already shown
    that text. So nothing of ours sits between the model and the consumer per piece. A
    stream that ends without any piece gives None and its ended iterator. The third item is
    the call as the run observes it (None outside a run): the caller reports its end."""
    failures: list[tuple[str, ModelError]] = []
    primary = routes[0]
    for route in routes:
        if route is primary and request.model == route.model:
            asked = request
        else:
            asked = _for_route(request, route, primary)
        attempt = 0
        renewed = False
        while True:
            pieces: AsyncIterator[Message] | None = None
            sent: ModelRequest | None = None
            observer = current_observer.get()
            call = None if observer is None else _observed(observer, route, asked, True)
            try:
                sent = await _prepared(route, asked)
                pieces = aiter(route.client.astream(sent))
                try:
                    first = await anext(pieces)
                except StopAsyncIteration:
                    return None, pieces, call
                if call is not None:
                    call.first_piece()
                return first, pieces, call
            except ModelError as error:
                await close(pieces)  # the provider stream, now and not by the GC
                if call is not None:
                    await call.failed(error)
                if not renewed and await _renewed(route, sent, error):
                    renewed = True
                    continue
                wait = _retry_wait(error, attempt, config)
                if wait is None:
                    _give_up(route.model, error, attempt, failures, config, route is routes[-1])
                    break
                attempt += 1
                _retrying(route.model, error, attempt, wait)
                await retry.sleep(wait)
            except BaseException as error:
                await close(pieces)
                if call is not None:
                    await call.failed(error)
                raise
    raise _final(failures)


def _provider(route: Route, model: str) -> str | None:
    """The provider `route`'s client sends `model` to, when it can tell."""
    find = getattr(route.client, "provider", None)
    if not callable(find):
        return None
    try:
        return str(find(model))
    except Exception:  # a name the client cannot route: the call itself will say so
        return None


async def _prepared(route: Route, request: ModelRequest) -> ModelRequest:
    """`request` as `route` is asked it: prepared by its `per_route` step, if any."""
    if request.per_route is None:
        return request
    return await request.per_route.prepare(request, _provider(route, request.model))


async def _renewed(route: Route, sent: ModelRequest | None, error: ModelError) -> bool:
    """Whether `error` came from something the request's `per_route` step put in `sent` that
    the provider no longer has (forgotten now: the call is worth making once more)."""
    if sent is None or sent.per_route is None:
        return False
    return await sent.per_route.renew(sent, _provider(route, sent.model), error)


def _observed(observer: Observer, route: Route, request: ModelRequest, streamed: bool) -> ModelCall:
    """The run's record of one call to `route`'s model."""
    # only hooks and spans tell the provider
    provider = _provider(route, request.model) if observer.watching else None
    return observer.model_call(
        request.model, provider, streamed, request.settings, request.messages, _free(route)
    )


def _free(route: Route) -> bool:
    """Whether `route`'s client says its calls cost nothing (the offline models)."""
    return getattr(route.client, "free", False) is True


def _retrying(model: str, error: ModelError, attempt: int, wait: float) -> None:
    log.info("model %s failed (%s); retry %d in %.2f s", model, type(error).__name__, attempt, wait)


async def close(pieces: AsyncIterator[Message] | None) -> None:
    """Close a model's stream if it can be closed (an async generator can)."""
    aclose = getattr(pieces, "aclose", None)
    if aclose is not None:
        await aclose()


async def stream(
    routes: Sequence[Route], request: ModelRequest, config: RetryConfig
) -> AsyncGenerator[Message, None]:
    """The pieces and then the complete answer of the first model in `routes` that gives
    one. A failure after the first piece went out is raised, not retried: the consumer has
    already shown that text. (`open_stream` without a layer of its own per piece.)"""
    first, pieces, call = await open_stream(routes, request, config)
    final: Message | None = None
    try:
        if first is not None:
            yield first
            async for message in pieces:
                if not message.delta:
                    final = message
                yield message
    except BaseException as error:
        if call is not None:
            await call.failed(error)
            call = None
        raise
    finally:  # if we stop early: the provider stream is closed now, not by the GC
        await close(pieces)
    if call is not None:
        await call.ended(final)


def _for_route(request: ModelRequest, route: Route, primary: Route) -> ModelRequest:
    """The request as `route` is asked it: `request` itself for the primary (whose settings it
    carries), else with the fallback's name and settings."""
    if route is primary:
        if request.model == route.model:
            return request
        return dataclasses.replace(request, model=route.model)
    return dataclasses.replace(
        request, model=route.model, settings=fallback_settings(request.settings, route, primary)
    )


def fallback_settings(settings: Mapping[str, Any], route: Route, primary: Route) -> dict[str, Any]:
    """A fallback's settings: the shared ones of `settings` (the primary's), its own on top,
    and the primary's connection settings only on the same provider and when it gives none."""
    own = route.settings or {}
    inherit = not any(is_connection_setting(k) for k in own) and _same_provider(primary, route)
    base = (
        dict(settings)
        if inherit
        else {k: v for k, v in settings.items() if not is_connection_setting(k)}
    )
    base.update(own)
    return base


def _same_provider(a: Route, b: Route) -> bool:
    """Whether two routes are served by one provider: the same client object, and for a
    client that routes by name (litellm), the same provider for both names."""
    if a.client is not b.client:
        return False
    provider = getattr(a.client, "provider", None)
    if not callable(provider):
        return True
    try:
        return bool(provider(a.model) == provider(b.model))
    except ModelError:  # a name the client cannot route: it gets nothing of the primary's
        return False


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
    last: bool = True,
) -> None:
    """Record that this model failed for good; raise now unless a fallback model may do
    better (a transient failure, a context window a larger model may hold, or content this
    model's provider cannot take, which another provider may: video for Gemini)."""
    if retries:
        error.message += f" (gave up after {retries} retr{'y' if retries == 1 else 'ies'})"
        error.context["retries"] = retries
    failures.append((model, error))
    if not (
        is_retryable(error, config)
        or isinstance(error, ModelContextWindowError | UnsupportedContentError)
    ):
        raise _final(failures)
    if not last:
        log.warning(
            "model %s failed (%s)%s; trying the next fallback model", model,
            type(error).__name__, f" after {retries} retries" if retries else "",
        )  # fmt: skip


def _final(failures: list[tuple[str, ModelError]]) -> ModelError:
    """The last failure, telling which models were tried before it."""
    error = failures[-1][1]
    if len(failures) > 1:
        tried = [model for model, _ in failures]
        error.message += f" (tried in turn: {', '.join(tried)})"
        error.context["tried_models"] = tried
    return error


__all__ = [
    "ENDPOINT_SETTINGS",
    "Route",
    "close",
    "complete",
    "fallback_settings",
    "is_connection_setting",
    "open_stream",
    "stream",
]
