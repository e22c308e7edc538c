"""Retries and fallbacks: delay math, Retry-After, what is retried, the route chain, streams."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import AsyncIterator
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from tenxgraph.core.exceptions import (
    ModelAuthError,
    ModelContextWindowError,
    ModelError,
    ModelRateLimitError,
    ModelRequestError,
    ModelUnavailableError,
)
from tenxgraph.core.graph import Agent
from tenxgraph.core.llm import FunctionModel, ModelInfo, ModelRequest, RetryConfig, Route
from tenxgraph.core.llm.calling import complete, stream
from tenxgraph.core.llm.retry import (
    NO_RETRY,
    is_retryable,
    retry_after_seconds,
    retry_config_from,
)
from tenxgraph.core.state import Message
from tests.core.graph._support import inp, linear
from tests.core.llm._support import drain

# -- delay math -----------------------------------------------------------------------------


def no_jitter() -> float:
    raise AssertionError("jitter=False must not draw a random number")


def test_backoff_doubles_from_the_initial_delay_up_to_max_delay() -> None:
    config = RetryConfig(initial_delay=0.5, backoff_factor=2, max_delay=3, jitter=False)
    assert [config.delay(n, None, no_jitter) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3, 3]


def test_jitter_scales_the_backoff_by_the_random_draw() -> None:
    config = RetryConfig(initial_delay=1, backoff_factor=3, max_delay=100)
    assert config.delay(3, None, lambda: 0.25) == pytest.approx(9 * 0.25)
    assert config.delay(3, None, lambda: 0.0) == 0.0


def test_retry_after_is_a_floor_and_beyond_max_delay_means_do_not_retry() -> None:
    config = RetryConfig(initial_delay=1, max_delay=20, jitter=False)
    assert config.delay(1, 7.0, no_jitter) == 7.0  # longer than the backoff: wait as told
    assert config.delay(4, 2.0, no_jitter) == 8.0  # shorter than the backoff: back off
    assert config.delay(1, 3600.0, no_jitter) is None  # asking sooner would only be refused
    jittered = RetryConfig(initial_delay=10, max_delay=60)
    assert jittered.delay(1, 5.0, lambda: 0.01) == 5.0


@pytest.mark.parametrize(
    "kwargs",
    [{"max_retries": -1}, {"initial_delay": -1}, {"max_delay": -1}, {"backoff_factor": 0.5}],
)
def test_retry_config_rejects_impossible_values(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="RetryConfig"):
        RetryConfig(**kwargs)


def test_retry_config_from() -> None:
    custom = RetryConfig(max_retries=7)
    assert retry_config_from(custom) is custom
    assert retry_config_from(True) == RetryConfig()
    assert retry_config_from(False) is NO_RETRY
    assert retry_config_from(None) is NO_RETRY
    assert NO_RETRY.max_retries == 0
    with pytest.raises(TypeError, match="retry_config"):
        retry_config_from(3)  # type: ignore[arg-type]


# -- Retry-After ----------------------------------------------------------------------------


def test_retry_after_in_seconds_and_milliseconds() -> None:
    assert retry_after_seconds({"retry-after": "7"}) == 7.0
    assert retry_after_seconds({"retry-after": "1.5"}) == 1.5
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    # milliseconds win when both are sent (more precise)
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "1"}) == 0.25
    assert retry_after_seconds(httpx.Headers({"Retry-After": "3"})) == 3.0  # any case
    assert retry_after_seconds({"retry-after": "-5"}) == 0.0


def test_retry_after_as_an_http_date() -> None:
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=30)
    seconds = retry_after_seconds({"retry-after": format_datetime(when, usegmt=True)})
    assert seconds is not None
    assert 28 < seconds <= 30
    past = datetime.datetime(2001, 1, 1, tzinfo=datetime.UTC)
    assert retry_after_seconds({"retry-after": format_datetime(past, usegmt=True)}) == 0.0


@pytest.mark.parametrize("headers", [None, {}, {"retry-after": "soon"}, {"other": "1"}, "junk"])
def test_no_or_unreadable_retry_after(headers: Any) -> None:
    assert retry_after_seconds(headers) is None


# -- what is retried ------------------------------------------------------------------------


def err(cls: type[ModelError], status: int | None, **context: Any) -> ModelError:
    return cls(f"{cls.__name__} {status}", context={"status_code": status, **context})


@pytest.mark.parametrize(
    "error",
    [
        err(ModelRateLimitError, 429),
        err(ModelUnavailableError, 500),
        err(ModelUnavailableError, 502),
        err(ModelUnavailableError, 503),
        err(ModelUnavailableError, 504),
        err(ModelUnavailableError, 529),
        err(ModelUnavailableError, None),  # timeout or connection error
        err(ModelError, 408),
    ],
    ids=str,
)
def test_transient_failures_are_retryable(error: ModelError) -> None:
    assert is_retryable(error, RetryConfig())


@pytest.mark.parametrize(
    "error",
    [
        err(ModelAuthError, 401),
        err(ModelAuthError, 403),
        err(ModelAuthError, None),  # no key at all
        err(ModelContextWindowError, 400),
        err(ModelRequestError, 400),
        err(ModelRequestError, 404),
        err(ModelError, 418),
        err(ModelError, None),
    ],
    ids=str,
)
def test_permanent_failures_are_not_retryable(error: ModelError) -> None:
    assert not is_retryable(error, RetryConfig())


def test_retryable_status_codes_are_configurable() -> None:
    config = RetryConfig(retryable_status_codes=frozenset({500}))
    assert is_retryable(err(ModelUnavailableError, 500), config)
    assert not is_retryable(err(ModelRateLimitError, 429), config)


# -- the route chain ------------------------------------------------------------------------


class Scripted:
    """A ModelClient that answers from a script: each entry is an exception to raise or a text
    to answer with; `streamed_then_fail` makes astream fail after its first piece."""

    def __init__(self, name: str, *script: Exception | str, log: list[str]) -> None:
        self.name = name
        self.script = list(script)
        self.log = log
        self.models: list[str] = []

    def _next(self, request: ModelRequest) -> str:
        self.log.append(self.name)
        self.models.append(request.model)
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, Exception):
            raise step
        return step

    async def acomplete(self, request: ModelRequest) -> Message:
        return Message.text_message(self._next(request), "assistant")

    async def astream(self, request: ModelRequest) -> AsyncIterator[Message]:
        text = self._next(request)
        yield Message.text_message(text[:2], "assistant", "s", delta=True)
        yield Message.text_message(text, "assistant", "s")


CONFIG = RetryConfig(max_retries=2, initial_delay=1, backoff_factor=2, max_delay=30)
REQUEST = ModelRequest(model="primary", messages=[Message.text_message("hi")])


def unavailable() -> ModelError:
    return err(ModelUnavailableError, 503)


async def test_transient_errors_are_retried_with_backoff(slept: list[float]) -> None:
    log: list[str] = []
    client = Scripted("a", unavailable(), err(ModelRateLimitError, 429), "fine", log=log)
    answer = await complete([Route(client, "a")], REQUEST, CONFIG)
    assert answer.text() == "fine"
    assert log == ["a", "a", "a"]
    assert slept == [1.0, 2.0]


async def test_retry_after_from_the_error_context_is_honoured(slept: list[float]) -> None:
    log: list[str] = []
    limited = err(ModelRateLimitError, 429, retry_after=12.0)
    client = Scripted("a", limited, "ok", log=log)
    await complete([Route(client, "a")], REQUEST, CONFIG)
    assert slept == [12.0]


async def test_a_retry_after_beyond_max_delay_gives_up_without_waiting(
    slept: list[float],
) -> None:
    log: list[str] = []
    limited = err(ModelRateLimitError, 429, retry_after=3600.0)
    client = Scripted("a", limited, "never", log=log)
    with pytest.raises(ModelRateLimitError) as info:
        await complete([Route(client, "a")], REQUEST, CONFIG)
    assert info.value is limited
    assert log == ["a"]
    assert slept == []


async def test_a_context_window_error_falls_back_to_the_next_model(slept: list[float]) -> None:
    log: list[str] = []
    small = Scripted("small", err(ModelContextWindowError, 400), log=log)
    large = Scripted("large", "read it all", log=log)
    answer = await complete([Route(small, "s"), Route(large, "l")], REQUEST, CONFIG)
    assert answer.text() == "read it all"
    assert log == ["small", "large"]  # not retried on the same model
    assert slept == []


async def test_an_auth_error_does_not_fall_back(slept: list[float]) -> None:
    log: list[str] = []
    refused = err(ModelAuthError, 401)
    routes = [Route(Scripted("a", refused, log=log), "a"), Route(Scripted("b", "x", log=log), "b")]
    with pytest.raises(ModelAuthError) as info:
        await complete(routes, REQUEST, CONFIG)
    assert info.value is refused
    assert log == ["a"]


@pytest.mark.parametrize(
    "error",
    [err(ModelAuthError, 401), err(ModelContextWindowError, 400), err(ModelRequestError, 400)],
    ids=str,
)
async def test_permanent_errors_are_raised_at_once(error: ModelError, slept: list[float]) -> None:
    log: list[str] = []
    client = Scripted("a", error, "never", log=log)
    with pytest.raises(type(error)) as info:
        await complete([Route(client, "a")], REQUEST, CONFIG)
    assert info.value is error
    assert log == ["a"]
    assert slept == []


async def test_giving_up_says_how_many_retries_were_made(slept: list[float]) -> None:
    log: list[str] = []
    client = Scripted("a", unavailable(), log=log)
    with pytest.raises(ModelUnavailableError) as info:
        await complete([Route(client, "a")], REQUEST, CONFIG)
    assert log == ["a"] * 3
    assert "gave up after 2 retries" in str(info.value)
    assert info.value.context["retries"] == 2
    assert slept == [1.0, 2.0]


async def test_no_retry_config_means_one_attempt(slept: list[float]) -> None:
    log: list[str] = []
    client = Scripted("a", unavailable(), log=log)
    with pytest.raises(ModelUnavailableError) as info:
        await complete([Route(client, "a")], REQUEST, NO_RETRY)
    assert log == ["a"]
    assert slept == []
    assert "gave up" not in str(info.value)


async def test_fallbacks_are_tried_in_order_each_with_its_own_model_name(
    slept: list[float],
) -> None:
    log: list[str] = []
    first = Scripted("first", unavailable(), log=log)
    second = Scripted("second", err(ModelRateLimitError, 429), log=log)
    third = Scripted("third", "from third", log=log)
    routes = (Route(first, "m1"), Route(second, "m2"), Route(third, "m3"))
    before = dataclasses.replace(REQUEST)
    answer = await complete(routes, REQUEST, CONFIG)
    assert answer.text() == "from third"
    assert log == ["first"] * 3 + ["second"] * 3 + ["third"]
    assert (first.models[0], second.models[0], third.models) == ("m1", "m2", ["m3"])
    assert slept == [1.0, 2.0, 1.0, 2.0]  # each model gets its own backoff
    assert before == REQUEST  # the shared request is not changed
    assert routes == (Route(first, "m1"), Route(second, "m2"), Route(third, "m3"))


async def test_when_every_model_fails_the_last_error_is_raised(slept: list[float]) -> None:
    log: list[str] = []
    last = err(ModelRateLimitError, 429)
    routes = [
        Route(Scripted("a", unavailable(), log=log), "a"),
        Route(Scripted("b", last, log=log), "b"),
    ]
    with pytest.raises(ModelRateLimitError) as info:
        await complete(routes, REQUEST, RetryConfig(max_retries=1, jitter=False))
    assert info.value is last
    assert log == ["a", "a", "b", "b"]
    assert info.value.context["tried_models"] == ["a", "b"]
    assert "tried in turn: a, b" in str(info.value)


# -- streams --------------------------------------------------------------------------------


async def collect(routes: list[Route], config: RetryConfig = CONFIG) -> list[Message]:
    return [m async for m in stream(routes, REQUEST, config)]


async def test_a_stream_failing_before_its_first_piece_is_retried(slept: list[float]) -> None:
    log: list[str] = []
    client = Scripted("a", unavailable(), "hello", log=log)
    pieces = await collect([Route(client, "a")])
    assert [(m.text(), m.delta) for m in pieces] == [("he", True), ("hello", False)]
    assert log == ["a", "a"]
    assert slept == [1.0]


async def test_a_stream_failing_before_its_first_piece_falls_back(slept: list[float]) -> None:
    log: list[str] = []
    routes = [
        Route(Scripted("a", unavailable(), log=log), "a"),
        Route(Scripted("b", "from b", log=log), "b"),
    ]
    pieces = await collect(routes, RetryConfig(max_retries=0))
    assert pieces[-1].text() == "from b"
    assert log == ["a", "b"]


class BreaksMidStream:
    def __init__(self) -> None:
        self.calls = 0

    async def acomplete(self, request: ModelRequest) -> Message:
        raise AssertionError("not used")

    async def astream(self, request: ModelRequest) -> AsyncIterator[Message]:
        self.calls += 1
        yield Message.text_message("Once upon", "assistant", "s", delta=True)
        raise err(ModelUnavailableError, 503)


async def test_a_stream_failing_after_its_first_piece_is_not_retried(
    slept: list[float],
) -> None:
    broken = BreaksMidStream()
    fallback_log: list[str] = []
    fallback = Scripted("b", "never", log=fallback_log)
    seen: list[Message] = []
    with pytest.raises(ModelUnavailableError):
        await drain(stream([Route(broken, "a"), Route(fallback, "b")], REQUEST, CONFIG), seen)
    assert [m.text() for m in seen] == ["Once upon"]
    assert broken.calls == 1
    assert fallback_log == []
    assert slept == []


# -- through an Agent -----------------------------------------------------------------------


async def test_agent_fallback_models_leave_the_agent_unchanged(slept: list[float]) -> None:
    attempts: list[str] = []

    def failing(messages: list[Message], info: ModelInfo) -> str:
        attempts.append(info.model)
        raise err(ModelUnavailableError, 503)

    def backup(messages: list[Message], info: ModelInfo) -> str:
        attempts.append(info.model)
        return "backup answer"

    primary = FunctionModel(failing, model_name="primary")
    secondary = FunctionModel(backup, model_name="secondary")
    agent = Agent(primary, fallback_models=[secondary], retry_config=CONFIG)
    routes = agent._routes
    app = linear(("agent", agent))
    for _ in range(2):  # the second run starts from the primary again
        result = await app.ainvoke(inp("hi"))
        assert result["messages"][-1].text() == "backup answer"
        assert attempts == ["primary"] * 3 + ["secondary"]
        assert slept == [1.0, 2.0]
        attempts.clear()
        slept.clear()
    assert agent._routes is routes
    assert [r.model for r in agent._routes] == ["primary", "secondary"]
    assert agent.model is primary
    assert agent.fallback_models == [secondary]


# -- each route's own settings ----------------------------------------------------------------


class Recording:
    """A ModelClient that answers and keeps the settings each request came with."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.settings: list[dict[str, Any]] = []

    def provider(self, model: str) -> str:
        return model.split("/")[0]

    async def acomplete(self, request: ModelRequest) -> Message:
        self.settings.append(dict(request.settings))
        if self.fail:
            raise err(ModelUnavailableError, 503)
        return Message.text_message("ok", "assistant")

    async def astream(self, request: ModelRequest) -> AsyncIterator[Message]:
        yield await self.acomplete(request)


PRIMARY_SETTINGS = {"api_key": "sk-primary-0123456789", "api_base": "http://a", "temperature": 0.2}


async def answered_settings(
    primary: Recording, fallback: Recording, model: str, own: dict[str, Any] | None
) -> dict[str, Any]:
    routes = [Route(primary, "openai/a"), Route(fallback, model, own)]
    request = ModelRequest(model="openai/a", messages=[], settings=PRIMARY_SETTINGS)
    await complete(routes, request, NO_RETRY)
    return fallback.settings[-1]


async def test_a_fallback_on_another_provider_gets_only_the_shared_settings() -> None:
    other_client = Recording()
    settings = await answered_settings(Recording(fail=True), other_client, "openai/b", None)
    assert settings == {"temperature": 0.2}
    # one client object for both, but it routes the fallback's name to another provider
    client = Recording(fail=True)
    routes = [Route(client, "openai/a"), Route(client, "anthropic/b")]
    request = ModelRequest(model="openai/a", messages=[], settings=PRIMARY_SETTINGS)
    with pytest.raises(ModelUnavailableError):
        await complete(routes, request, NO_RETRY)
    assert client.settings == [PRIMARY_SETTINGS, {"temperature": 0.2}]


async def test_a_fallback_on_the_same_provider_inherits_the_connection_unless_it_has_its_own() -> (
    None
):
    client = Recording(fail=True)
    routes = [Route(client, "openai/a"), Route(client, "openai/b")]
    request = ModelRequest(model="openai/a", messages=[], settings=PRIMARY_SETTINGS)
    with pytest.raises(ModelUnavailableError):
        await complete(routes, request, NO_RETRY)
    assert client.settings == [PRIMARY_SETTINGS, PRIMARY_SETTINGS]
    client.settings.clear()
    own = {"api_base": "http://b", "temperature": 0.9}
    routes = [Route(client, "openai/a"), Route(client, "openai/b", own)]
    with pytest.raises(ModelUnavailableError):
        await complete(routes, request, NO_RETRY)
    assert client.settings[1] == {"api_base": "http://b", "temperature": 0.9}  # no primary key
    client.settings.clear()
    routes = [Route(client, "openai/a"), Route(client, "openai/b", {"max_tokens": 5})]
    with pytest.raises(ModelUnavailableError):
        await complete(routes, request, NO_RETRY)
    assert client.settings[1] == {**PRIMARY_SETTINGS, "max_tokens": 5}


def test_fallback_models_may_carry_their_own_settings() -> None:
    agent = Agent(
        "openai/gpt-4o-mini",
        fallback_models=[
            "openai/gpt-4o",
            ("anthropic/claude-sonnet-4-5", {"api_key": "sk-ant-own-0123456789"}),
            {"model": "gemini/gemini-2.5-flash", "api_key": "AIza-own-0123456789"},
        ],
    )
    routes = agent._routes
    assert [r.model for r in routes] == [
        "openai/gpt-4o-mini",
        "openai/gpt-4o",
        "anthropic/claude-sonnet-4-5",
        "gemini/gemini-2.5-flash",
    ]
    assert [r.settings for r in routes] == [
        None,
        None,
        {"api_key": "sk-ant-own-0123456789"},
        {"api_key": "AIza-own-0123456789"},
    ]


@pytest.mark.parametrize(
    ("entry", "error", "words"),
    [
        (("anthropic/claude-sonnet-4-5",), TypeError, "(model, settings)"),
        (("anthropic/x", "sk-ant-secret-0123456789"), TypeError, "(model, settings)"),
        ({"api_key": "sk-ant-secret-0123456789"}, ValueError, "under 'model'"),
    ],
)
def test_a_malformed_fallback_says_how_to_give_one_without_showing_its_values(
    entry: Any, error: type[Exception], words: str
) -> None:
    with pytest.raises(error) as info:
        Agent("openai/gpt-4o-mini", fallback_models=[entry])
    assert words in str(info.value)
    assert "secret" not in str(info.value)
