"""LiteLLMClient against a mocked OpenAI endpoint: what is sent, keys, errors, lazy import."""

from __future__ import annotations

import dataclasses
import importlib.abc
import importlib.machinery
import json
import logging
import os
import subprocess
import sys
import traceback
import types
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx
from pydantic import BaseModel

from tenxgraph.core.exceptions import (
    ModelAuthError,
    ModelContextWindowError,
    ModelError,
    ModelRateLimitError,
    ModelRequestError,
    ModelUnavailableError,
)
from tenxgraph.core.llm import LiteLLMClient, ModelRequest, RetryConfig, litellm_client
from tenxgraph.core.llm.litellm_client import load_litellm
from tenxgraph.core.llm.retry import is_retryable
from tenxgraph.core.state import Message
from tenxgraph.core.state.message_block import ToolCallBlock
from tenxgraph.utils import litellm_import
from tests.core.llm._support import USAGE_EVENT, drain, event, sent, sse
from tests.core.llm._support import completion as support_completion

KEY = "sk-test-0123456789abcdef"
MODEL = "openai/gpt-4o-mini"

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def completion(content: str | None = "Hello", **message: Any) -> dict[str, Any]:
    return support_completion(content, cached=8, **message)


def request(**settings: Any) -> ModelRequest:
    return ModelRequest(
        model=settings.pop("model", MODEL),
        messages=[Message.text_message("Be brief.", "system"), Message.text_message("hi")],
        tools=settings.pop("tools", []),
        output_schema=settings.pop("output_schema", None),
        settings=settings,
    )


@pytest.fixture
def litellm_kwargs(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The keyword arguments of every litellm.acompletion call (which still goes through)."""
    litellm = load_litellm()
    original = litellm.acompletion
    seen: list[dict[str, Any]] = []

    async def spy(**kwargs: Any) -> Any:
        seen.append(kwargs)
        return await original(**kwargs)

    monkeypatch.setattr(litellm, "acompletion", spy)
    return seen


# -- what is sent ---------------------------------------------------------------------------


async def test_a_plain_call_sends_messages_tools_and_settings(
    openai_api: respx.Route, litellm_kwargs: list[dict[str, Any]]
) -> None:
    openai_api.mock(return_value=httpx.Response(200, json=completion()))
    answer = await LiteLLMClient().acomplete(
        request(api_key=KEY, temperature=0.2, max_tokens=50, tools=[WEATHER_TOOL])
    )
    assert answer.text() == "Hello"
    payload = sent(openai_api)
    assert payload["model"] == "gpt-4o-mini"
    assert payload["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert payload["tools"] == [WEATHER_TOOL]
    assert payload["temperature"] == 0.2
    assert payload["max_tokens"] == 50
    assert "stream" not in payload
    assert "stream_options" not in payload
    assert openai_api.calls[0].request.headers["authorization"] == f"Bearer {KEY}"
    (kwargs,) = litellm_kwargs
    assert kwargs["num_retries"] == 0
    assert "stream" not in kwargs


async def test_the_answer_becomes_a_message_with_usage_cost_and_a_clean_raw(
    openai_api: respx.Route,
) -> None:
    openai_api.mock(return_value=httpx.Response(200, json=completion()))
    answer = await LiteLLMClient().acomplete(request(api_key=KEY))
    assert answer.usages is not None
    assert (answer.usages.prompt_tokens, answer.usages.completion_tokens) == (12, 5)
    assert answer.usages.cache_read_input_tokens == 8
    assert answer.usages.reasoning_tokens == 2
    assert answer.metadata["provider"] == "openai"
    assert answer.metadata["finish_reason"] == "stop"
    assert answer.metadata["cost"] > 0  # litellm knows gpt-4o-mini's price
    assert answer.raw is not None
    assert KEY not in json.dumps(answer.raw)


async def test_errors_are_not_retried_inside_litellm(openai_api: respx.Route) -> None:
    openai_api.mock(return_value=httpx.Response(500, json={"error": {"message": "boom"}}))
    with pytest.raises(ModelUnavailableError):
        await LiteLLMClient().acomplete(request(api_key=KEY))
    assert openai_api.call_count == 1  # the openai SDK alone would have tried 3 times


class Weather(BaseModel):
    city: str
    temperature_c: float


async def test_output_schema_asks_for_a_json_schema_response_format(
    openai_api: respx.Route,
) -> None:
    answer_json = '{"city": "Paris", "temperature_c": 21.5}'
    openai_api.mock(return_value=httpx.Response(200, json=completion(answer_json)))
    answer = await LiteLLMClient().acomplete(request(api_key=KEY, output_schema=Weather))
    response_format = sent(openai_api)["response_format"]
    assert response_format["type"] == "json_schema"
    schema = response_format["json_schema"]["schema"]
    assert set(schema["properties"]) == {"city", "temperature_c"}
    assert answer.text() == answer_json


async def test_a_stream_asks_for_usage_and_assembles_fragments(
    openai_api: respx.Route, litellm_kwargs: list[dict[str, Any]]
) -> None:
    openai_api.mock(
        return_value=sse(
            event({"role": "assistant", "content": ""}),
            event({"content": "Let me "}),
            event({"content": "check."}),
            event(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": ""},
                        }
                    ]
                }
            ),
            event({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
            event({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Paris"}'}}]}),
            event({}, "tool_calls"),
            USAGE_EVENT,
        )
    )
    pieces = [m async for m in LiteLLMClient().astream(request(api_key=KEY, tools=[WEATHER_TOOL]))]
    payload = sent(openai_api)
    assert payload["stream"] is True
    assert payload["stream_options"] == {"include_usage": True}
    assert litellm_kwargs[0]["num_retries"] == 0
    *deltas, final = pieces
    assert all(d.delta for d in deltas)
    assert [d.text() for d in deltas if d.text()] == ["Let me ", "check."]
    assert not final.delta
    assert {d.message_id for d in deltas} == {final.message_id}
    assert final.text() == "Let me check."
    assert final.tool_call_blocks() == [
        ToolCallBlock(id="call_1", name="get_weather", args={"city": "Paris"})
    ]
    assert final.usages is not None
    assert (final.usages.prompt_tokens, final.usages.completion_tokens) == (9, 4)
    assert final.metadata["finish_reason"] == "tool_calls"
    assert final.metadata["provider"] == "openai"


# -- keys -----------------------------------------------------------------------------------


async def test_a_missing_key_names_the_variable_and_sends_nothing(
    openai_api: respx.Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    openai_api.mock(return_value=httpx.Response(200, json=completion()))
    client = LiteLLMClient()
    with pytest.raises(ModelAuthError) as info:
        await client.acomplete(request())
    assert "OPENAI_API_KEY" in str(info.value)
    assert info.value.context["missing_keys"] == ["OPENAI_API_KEY"]
    assert info.value.provider == "openai"
    with pytest.raises(ModelAuthError, match="OPENAI_API_KEY"):
        async for _ in client.astream(request()):
            pass
    assert openai_api.call_count == 0


@pytest.mark.parametrize(
    ("model", "variables"),
    [
        ("anthropic/claude-sonnet-4-5", ["ANTHROPIC_API_KEY"]),
        ("gemini/gemini-2.5-flash", ["GOOGLE_API_KEY", "GEMINI_API_KEY"]),
    ],
)
async def test_a_missing_key_names_each_providers_variable(
    model: str, variables: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in variables:
        monkeypatch.delenv(name, raising=False)
    with respx.mock(using="httpx") as mock, pytest.raises(ModelAuthError) as info:
        await LiteLLMClient().acomplete(request(model=model))
    assert mock.calls.call_count == 0
    for name in variables:
        assert name in str(info.value)
    assert model in str(info.value)


async def test_the_key_from_the_environment_is_used(
    openai_api: respx.Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-123456")
    openai_api.mock(return_value=httpx.Response(200, json=completion()))
    await LiteLLMClient().acomplete(request())
    assert openai_api.calls[0].request.headers["authorization"] == "Bearer sk-from-env-123456"


async def test_a_local_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with respx.mock(using="httpx") as mock:
        local = mock.post("http://127.0.0.1:8000/v1/chat/completions").mock(
            return_value=httpx.Response(200, json=completion("local answer"))
        )
        answer = await LiteLLMClient().acomplete(
            request(model="openai/llama3", api_base="http://127.0.0.1:8000/v1")
        )
    assert answer.text() == "local answer"
    assert local.call_count == 1
    assert sent(local)["model"] == "llama3"


async def test_aws_credentials_given_as_settings_count_as_a_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    settings = {
        "aws_access_key_id": "AKIAIOSFODNN7EXAMPLE",
        "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    }
    model = "bedrock/anthropic.claude-3-haiku-20240307-v1:0"
    assert LiteLLMClient()._check_key(model, "bedrock", settings) is settings
    with pytest.raises(ModelAuthError, match="AWS_SECRET_ACCESS_KEY"):
        LiteLLMClient()._check_key(model, "bedrock", {})


async def test_a_model_without_a_provider_prefix_litellm_cannot_route(
    openai_api: respx.Route,
) -> None:
    with pytest.raises(ModelRequestError, match="prefix the name with its provider"):
        await LiteLLMClient().acomplete(request(model="no-such-model-xyz", api_key=KEY))
    assert openai_api.call_count == 0


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "payload", "headers", "expected", "code"),
    [
        (401, {"message": f"Incorrect API key provided: {KEY}"}, {}, ModelAuthError, "AUTH"),
        (403, {"message": "not allowed"}, {}, ModelAuthError, "AUTH"),
        (429, {"message": "slow down"}, {"retry-after": "7"}, ModelRateLimitError, "RATE"),
        (500, {"message": "boom"}, {}, ModelUnavailableError, "UNAVAILABLE"),
        (503, {"message": "overloaded"}, {}, ModelUnavailableError, "UNAVAILABLE"),
        (
            400,
            {
                "message": "This model's maximum context length is 128000 tokens.",
                "code": "context_length_exceeded",
                "type": "invalid_request_error",
            },
            {},
            ModelContextWindowError,
            "CONTEXT",
        ),
        (400, {"message": "Unknown parameter: 'foo'"}, {}, ModelRequestError, "REQUEST"),
        (404, {"message": "The model does not exist"}, {}, ModelRequestError, "REQUEST"),
    ],
)
async def test_provider_errors_become_our_exceptions(
    openai_api: respx.Route,
    status: int,
    payload: dict[str, Any],
    headers: dict[str, str],
    expected: type[ModelError],
    code: str,
) -> None:
    openai_api.mock(return_value=httpx.Response(status, json={"error": payload}, headers=headers))
    with pytest.raises(expected) as info:
        await LiteLLMClient().acomplete(request(api_key=KEY))
    error = info.value
    assert type(error) is expected
    assert error.error_code.startswith(f"MODEL_{code}_")
    assert error.provider == "openai"
    assert error.model == MODEL
    assert error.status_code == status
    assert "openai" in error.message
    assert repr(MODEL) in error.message
    assert KEY not in str(error)  # a key echoed by the provider is redacted
    assert KEY not in json.dumps(error.context)
    assert type(error.__cause__).__module__.startswith("litellm")
    assert openai_api.call_count == 1


@pytest.mark.parametrize(
    ("failure", "status"),
    [(httpx.ReadTimeout("timed out"), None), (httpx.ConnectError("connection refused"), 500)],
)
async def test_timeouts_and_lost_connections_are_unavailable_and_retryable(
    openai_api: respx.Route, failure: Exception, status: int | None
) -> None:
    openai_api.mock(side_effect=failure)
    with pytest.raises(ModelUnavailableError) as info:
        await LiteLLMClient().acomplete(request(api_key=KEY))
    assert info.value.status_code == status
    assert is_retryable(info.value, RetryConfig())
    assert openai_api.call_count == 1


async def test_rate_limit_keeps_the_retry_after(openai_api: respx.Route) -> None:
    openai_api.mock(
        return_value=httpx.Response(
            429, json={"error": {"message": "slow"}}, headers={"retry-after-ms": "1500"}
        )
    )
    with pytest.raises(ModelRateLimitError) as info:
        await LiteLLMClient().acomplete(request(api_key=KEY))
    assert info.value.context["retry_after"] == 1.5


async def test_a_stream_that_is_refused_raises_our_exception(openai_api: respx.Route) -> None:
    openai_api.mock(
        return_value=httpx.Response(
            429, json={"error": {"message": "slow"}}, headers={"retry-after": "2"}
        )
    )
    pieces: list[Message] = []
    with pytest.raises(ModelRateLimitError) as info:
        await drain(LiteLLMClient().astream(request(api_key=KEY)), pieces)
    assert pieces == []
    assert info.value.context["retry_after"] == 2.0


async def test_a_connection_lost_mid_stream_raises_after_the_pieces_already_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    litellm = load_litellm()
    from litellm.types.utils import Delta, ModelResponseStream, StreamingChoices

    async def chunks() -> AsyncIterator[Any]:
        yield ModelResponseStream(
            id="s", choices=[StreamingChoices(index=0, delta=Delta(content="Once upon"))]
        )
        raise litellm.APIConnectionError("connection reset", "openai", "gpt-4o-mini")

    async def acompletion(**kwargs: Any) -> AsyncIterator[Any]:
        return chunks()

    monkeypatch.setattr(litellm, "acompletion", acompletion)
    seen: list[Message] = []
    with pytest.raises(ModelUnavailableError, match="connection reset"):
        await drain(LiteLLMClient().astream(request(api_key=KEY)), seen)
    assert [m.text() for m in seen] == ["Once upon"]
    assert seen[0].delta


async def test_a_bug_that_is_not_a_provider_error_keeps_its_type(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    litellm = load_litellm()

    async def acompletion(**kwargs: Any) -> Any:
        raise KeyError("our own bug")

    monkeypatch.setattr(litellm, "acompletion", acompletion)
    with pytest.raises(KeyError, match="our own bug"):
        await LiteLLMClient().acomplete(request(api_key=KEY))


# -- import hygiene -------------------------------------------------------------------------


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_")}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )


def test_importing_the_model_package_does_not_import_litellm() -> None:
    proc = run_python(
        "import sys\n"
        "import tenxgraph.core.llm as llm\n"
        "llm.LiteLLMClient()\n"
        "llm.ModelRequest(model='openai/gpt-4o-mini', messages=[])\n"
        "print('litellm' in sys.modules, 'openai' in sys.modules)\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"]


class FakeLiteLLM(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Stands in for litellm's import and notes the environment it was imported in."""

    def __init__(self) -> None:
        self.cost_map_setting: list[str | None] = []

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "litellm":
            return None
        self.cost_map_setting.append(os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"))
        return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        module.fake = True  # type: ignore[attr-defined]
        # any other setting load_litellm reads is unset, as litellm's defaults are
        module.__getattr__ = lambda name: None  # type: ignore[method-assign]


def test_litellm_is_imported_once_with_the_bundled_price_list_forced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without LITELLM_LOCAL_MODEL_COST_MAP, importing litellm fetches a price list over the
    network (and starts a retry thread); the variable must be set before the import."""
    finder = FakeLiteLLM()
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)
    monkeypatch.delenv("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", raising=False)
    monkeypatch.setattr(litellm_import, "_litellm", None)
    monkeypatch.delitem(sys.modules, "litellm", raising=False)
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    module = litellm_client.load_litellm()
    assert module.fake is True
    assert finder.cost_map_setting == ["True"]
    # nor its list of Anthropic beta headers, fetched on a call (structured output)
    assert os.environ["LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS"] == "True"
    assert module.suppress_debug_info is True
    assert litellm_client.load_litellm() is module
    assert finder.cost_map_setting == ["True"]  # imported once


@pytest.mark.parametrize(("setting", "frozen"), [(None, 1), ("0", 0), ("false", 0)])
def test_litellm_import_heap_is_frozen_out_of_garbage_collection(
    monkeypatch: pytest.MonkeyPatch, setting: str | None, frozen: int
) -> None:
    """litellm's import leaves ~370,000 long-lived objects; full collections walking them
    cost ~0.4 s each. They are frozen once, unless TENXGRAPH_GC_FREEZE turns it off."""
    import gc

    freezes: list[int] = []
    monkeypatch.setattr(gc, "freeze", lambda: freezes.append(1))
    monkeypatch.setattr(gc, "collect", lambda *a: 0)
    if setting is None:
        monkeypatch.delenv("TENXGRAPH_GC_FREEZE", raising=False)
    else:
        monkeypatch.setenv("TENXGRAPH_GC_FREEZE", setting)
    monkeypatch.setattr(litellm_import, "_litellm", None)
    monkeypatch.delitem(sys.modules, "litellm", raising=False)
    monkeypatch.setattr(sys, "meta_path", [FakeLiteLLM(), *sys.meta_path])
    litellm_client.load_litellm()
    litellm_client.load_litellm()
    assert len(freezes) == frozen


# -- an answer without choices ------------------------------------------------------------


async def test_an_answer_without_choices_is_a_retryable_model_error(
    openai_api: respx.Route,
) -> None:
    openai_api.mock(return_value=httpx.Response(200, json={**completion(), "choices": []}))
    with pytest.raises(ModelUnavailableError) as info:
        await LiteLLMClient().acomplete(request(api_key=KEY))
    error = info.value
    assert error.error_code == "MODEL_UNAVAILABLE_002"
    assert "without any choice" in error.message
    assert (error.provider, error.model, error.status_code) == ("openai", MODEL, None)
    assert is_retryable(error, RetryConfig())


async def test_a_stream_without_choices_is_the_same_model_error(openai_api: respx.Route) -> None:
    openai_api.mock(return_value=sse(USAGE_EVENT))
    pieces: list[Message] = []
    with pytest.raises(ModelUnavailableError) as info:
        await drain(LiteLLMClient().astream(request(api_key=KEY)), pieces)
    assert info.value.error_code == "MODEL_UNAVAILABLE_002"
    assert "stream" in info.value.message
    assert pieces == []
    # a choice that finishes with nothing in it is an answer, an empty one: not this error
    openai_api.mock(return_value=sse(event({"role": "assistant"}, "stop"), USAGE_EVENT))
    pieces = [m async for m in LiteLLMClient().astream(request(api_key=KEY))]
    assert len(pieces) == 1
    assert pieces[0].text() == ""
    assert pieces[0].metadata["finish_reason"] == "stop"


# -- credentials in logs ------------------------------------------------------------------


def test_loading_litellm_puts_the_redacting_filter_on_the_model_paths_loggers() -> None:
    load_litellm()
    for name in ("LiteLLM", "openai._base_client", "httpx"):
        filters = logging.getLogger(name).filters
        assert any(type(f).__name__ == "RedactingFilter" for f in filters), name


async def test_a_key_a_provider_echoes_is_gone_from_the_cause_a_traceback_prints(
    openai_api: respx.Route,
) -> None:
    body = {"error": {"message": f"Incorrect API key provided: {KEY}"}}
    openai_api.mock(return_value=httpx.Response(401, json=body))
    with pytest.raises(ModelAuthError) as info:
        await LiteLLMClient().acomplete(request(api_key=KEY))
    printed = "".join(traceback.format_exception(info.value))
    assert "Incorrect API key provided" in printed
    assert KEY not in printed
    assert KEY not in repr(info.value.__cause__.args)  # type: ignore[union-attr]


class Answer(BaseModel):
    value: int


@pytest.mark.parametrize(
    ("model", "settings", "tools", "mode"),
    [
        ("openai/gpt-4o-mini", {}, False, "native"),
        ("openai/gpt-4o-mini", {}, True, "native"),
        ("gpt-3.5-turbo", {}, False, "tool"),  # functions, but no JSON schema format
        ("anthropic/claude-sonnet-4-5", {}, False, "tool"),
        ("anthropic/claude-sonnet-4-5", {"reasoning_effort": "low"}, False, "native"),
        ("gemini/gemini-2.5-flash", {}, False, "native"),
        ("gemini/gemini-2.5-flash", {}, True, "tool"),
        ("openai/llama-3.1-8b-instruct", {"api_base": "http://127.0.0.1:8000/v1"}, False, "text"),
    ],
)
def test_the_output_mode_auto_picks_per_model(
    model: str, settings: dict[str, Any], tools: bool, mode: str
) -> None:
    asked = ModelRequest(
        model=model,
        messages=[Message.text_message("hi")],
        tools=[WEATHER_TOOL] if tools else [],
        output_schema=Answer,
        settings=settings,
    )
    client = LiteLLMClient()
    assert client.output_mode(asked) == mode
    for given in ("native", "tool", "text"):
        assert client.output_mode(dataclasses.replace(asked, output_mode=given)) == given
