"""Credentials redacted by value: which names hold one, the environment read lazily, text,
values, exception chains, log records and our errors."""

from __future__ import annotations

import logging
import pickle
import socket
import uuid

import httpx
import pytest

from tenxgraph.core import redaction
from tenxgraph.core.exceptions import GraphError, ModelAuthError, NodeError
from tenxgraph.core.redaction import (
    RedactingFilter,
    add_secret,
    is_secret_name,
    protect_logger,
    redact,
    redact_value,
    remember_settings,
    scrub_exception,
)


def secret(prefix: str = "tok_") -> str:
    """A fresh credential-like value no other test knows."""
    return prefix + uuid.uuid4().hex


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_SESSION_TOKEN",
        "AWS_BEARER_TOKEN_BEDROCK",
        "HF_TOKEN",
        "PGPASSWORD",
        "WATSONX_APIKEY",
        "AZURE_CLIENT_SECRET",
        "DATAROBOT_API_TOKEN",
        "api_key",
        "aws_secret_access_key",
        "azure_ad_token",
        "vertex_credentials",
        "x-api-key",
        "Authorization",
    ],
)
def test_names_that_hold_a_credential(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "max_tokens",
        "budget_tokens",
        "temperature",
        "api_base",
        "AZURE_API_BASE",
        "AZURE_API_VERSION",
        "TIKTOKEN_CACHE_DIR",
        "TOKENIZERS_PARALLELISM",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "GITHUB_COPILOT_ACCESS_TOKEN_URL",
        "SSH_AUTH_SOCK",
        "HOME",
        "PATH",
    ],
)
def test_names_that_do_not(name: str) -> None:
    assert not is_secret_name(name)


# providers whose key check starts an OAuth device flow over the network
DEVICE_FLOW_PROVIDERS = frozenset({"chatgpt", "github_copilot"})


def test_every_key_variable_litellm_asks_for_is_a_secret_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tenxgraph.core.llm import load_litellm

    litellm = load_litellm()
    lookups: list[str] = []

    def offline(host: object, *args: object, **kwargs: object) -> list[object]:
        lookups.append(str(host))
        raise OSError("this test runs offline")

    monkeypatch.setattr(socket, "getaddrinfo", offline)
    names: set[str] = set()
    for provider in litellm.provider_list:
        value = getattr(provider, "value", provider)
        if value in DEVICE_FLOW_PROVIDERS:
            continue
        try:
            report = litellm.validate_environment(f"{value}/some-model")
        except Exception:  # a provider that cannot be asked without more settings
            continue
        names.update(report.get("missing_keys") or ())
    assert lookups == []  # asking for the key names touched no network
    assert len(names) > 30
    not_secret = ("_API_BASE", "_API_VERSION", "_LOCATION", "_PROJECT")
    keys = {n for n in names if not n.endswith(not_secret)}
    assert {n for n in keys if not is_secret_name(n)} == set()


# -- the environment ------------------------------------------------------------------------


def test_a_key_in_the_environment_is_redacted_and_a_new_value_is_seen_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, second = secret("sk-"), secret("sk-")
    monkeypatch.setenv("TENX_TEST_API_KEY", first)
    assert redact(f"key {first} refused") == "key [REDACTED:TENX_TEST_API_KEY] refused"
    monkeypatch.setenv("TENX_TEST_API_KEY", second)  # the same name, a new value
    assert redact(f"key {second}") == "key [REDACTED:TENX_TEST_API_KEY]"
    monkeypatch.delenv("TENX_TEST_API_KEY")
    assert redact(f"key {second}") == f"key {second}"  # no longer a credential of the process


def test_values_of_other_variables_and_short_values_are_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TENX_TEST_GREETING", "hello-world-12345")
    monkeypatch.setenv("TENX_TEST_TOKEN", "true")  # too short to be a key
    assert redact("hello-world-12345 true") == "hello-world-12345 true"


def test_the_longest_value_is_replaced_first(monkeypatch: pytest.MonkeyPatch) -> None:
    short = secret("k")
    monkeypatch.setenv("TENX_TEST_SECRET", short)
    monkeypatch.setenv("TENX_TEST_LONG_SECRET", short + "-extended")
    assert redact(f"{short}-extended") == "[REDACTED:TENX_TEST_LONG_SECRET]"


def test_what_a_partial_mask_leaves_of_a_longer_key_goes_too() -> None:
    assert redact("API key not valid: REDACTEDxYz12345abc") == "API key not valid: REDACTED"


# -- credentials given as settings --------------------------------------------------------


def test_settings_credentials_are_remembered_with_their_names() -> None:
    key, token, bearer = secret("sk-"), secret("ya29."), secret()
    remember_settings(
        {
            "api_key": key,
            "temperature": 0.5,
            "max_tokens": 100,
            "extra_headers": {"Authorization": f"Bearer {bearer}", "X-Trace": "trace-123456789"},
            "azure_ad_token": token,
        }
    )
    text = f"{key} {token} Bearer {bearer} trace-123456789"
    assert redact(bearer) == "[REDACTED:Authorization]"  # the token alone too
    assert redact(text) == (
        "[REDACTED:api_key] [REDACTED:azure_ad_token] [REDACTED:Authorization] trace-123456789"
    )


def test_add_secret_registers_any_other_credential() -> None:
    value = secret("db-password-")
    add_secret(value, "database password")
    assert redact(f"login failed: {value}") == "login failed: [REDACTED:database password]"


def test_redact_value_walks_containers_and_keeps_clean_ones_as_they_are() -> None:
    value = secret()
    add_secret(value)
    dirty = {"a": [value, 1, (f"x{value}", b"y" + value.encode())], "b": None}
    assert redact_value(dirty) == {
        "a": ["[REDACTED:credential]", 1, ("x[REDACTED:credential]", b"y[REDACTED:credential]")],
        "b": None,
    }
    clean = {"a": ["nothing here", 1, ("x", b"y")], "b": None}
    assert redact_value(clean) is clean


# -- exceptions ---------------------------------------------------------------------------


class ProviderError(Exception):
    def __init__(self, message: str, body: bytes, response: httpx.Response) -> None:
        super().__init__(message)
        self.message = message
        self.body = body
        self.response = response
        self.details = {"echo": message}


def test_an_exception_chain_is_scrubbed_in_place() -> None:
    key = secret("gsk_")
    add_secret(key, "api_key")
    request = httpx.Request("POST", "https://x.test/v1", headers={"authorization": f"Bearer {key}"})
    response = httpx.Response(401, content=f'{{"key": "{key}"}}'.encode(), request=request)
    response.read()
    root = ValueError(f"bad key {key}")
    provider = ProviderError(f"refused {key}", key.encode(), response)
    provider.__cause__ = root
    provider.add_note(f"sent {key}")
    top = RuntimeError("wrapped")
    top.__context__ = provider
    group = ExceptionGroup("several", [top])

    assert scrub_exception(group) is group
    cleaned = provider.response
    shown = [
        str(root),
        repr(provider.args),
        provider.message,
        repr(provider.body),
        repr(provider.details),
        repr(provider.__notes__),
        cleaned.text,
        repr(cleaned.headers),
        repr(cleaned.request.headers),
    ]
    assert not [s for s in shown if key in s]
    assert cleaned.status_code == 401
    assert cleaned.json() == {"key": "[REDACTED:api_key]"}
    assert cleaned.request.url == request.url
    # the HTTP objects are replaced by cleaned copies: whoever else holds them sees no change
    assert cleaned is not response
    assert request.headers["authorization"] == f"Bearer {key}"
    assert key in response.text


def test_graph_errors_redact_their_message_and_context_and_stay_so() -> None:
    key = secret("sk-ant-")
    add_secret(key, "api_key")
    error = ModelAuthError(f"refused {key}", context={"detail": [f"echo {key}"], "n": 1})
    assert key not in error.message
    for shown in (str(error), repr(error), repr(error.args)):
        assert key not in shown
    assert error.context == {"detail": ["echo [REDACTED:api_key]"], "n": 1}
    error.context["late"] = key  # set afterwards: still not shown
    assert key not in repr(error.to_dict())
    again = pickle.loads(pickle.dumps(error))
    assert key not in repr(again.to_dict())
    wrapped = NodeError(f"Error in node 'x': {ValueError(key)}")
    assert key not in str(wrapped)
    assert isinstance(error, GraphError)


# -- logs ---------------------------------------------------------------------------------


def test_a_protected_logger_redacts_its_messages_and_their_exceptions(
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = secret("AIza")
    add_secret(key, "api_key")
    logger = protect_logger(f"tenxgraph.test.{uuid.uuid4().hex}")
    assert protect_logger(logger) is logger
    assert sum(isinstance(f, RedactingFilter) for f in logger.filters) == 1  # once
    caplog.set_level(logging.DEBUG)
    try:
        raise ValueError(f"provider said {key}")
    except ValueError:
        logger.debug("calling with %s", key, exc_info=True)
    (record,) = [r for r in caplog.records if r.name == logger.name]
    assert record.getMessage() == "calling with [REDACTED:api_key]"
    assert key not in caplog.text


def test_protect_loggers_covers_tenxgraph_loggers_made_before() -> None:
    logger = logging.getLogger(f"tenxgraph.test.early{uuid.uuid4().hex}")
    redaction.protect_loggers()
    assert any(isinstance(f, RedactingFilter) for f in logger.filters)
    assert any(isinstance(f, RedactingFilter) for f in logging.getLogger("LiteLLM").filters)
