"""Secrets, tried as a hostile user would: a provider echoes the caller's key in its error.

- A credential the process was given (an environment variable, or `api_key=` and the other
  credential settings of an Agent) appears nowhere: not in the exception, its chained causes,
  `to_dict()`, DEBUG logs, the CLI's stderr, the stored thread (memory, SQLite, PostgreSQL),
  nor the streamed error chunk. Keys in the formats of OpenAI, Anthropic, Gemini (also of an
  unusual length), Groq, Mistral, Azure and Bedrock (an access key id and its secret).
- A fallback model never receives the primary's key: each route sends only its own.

Provider HTTP is mocked with respx (offline). Only public API of the time before these
promises is imported at module level, so that the suite runs (and fails case by case) against
the old code too.
"""

from __future__ import annotations

import io
import json
import logging
import random
import string
import sys
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from tenxgraph.cli import main as cli_main
from tenxgraph.core.exceptions import GraphError, ModelError
from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.state import Message
from tenxgraph.utils.constants import END, START
from tests._helpers import single_agent
from tests.core.graph._support import inp
from tests.core.llm._support import drain
from tests.storage.conftest import Backend

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
HEX = "0123456789abcdef"
AWS_ID = string.ascii_uppercase + string.digits
AWS_SECRET = ALNUM + "+/"


def fake_key(prefix: str, length: int, alphabet: str, seed: str) -> str:
    """A made-up credential of a provider's shape; each test gets its own, so no key can be
    redacted only because an earlier test registered it."""
    rng = random.Random(seed)
    return prefix + "".join(rng.choice(alphabet) for _ in range(length - len(prefix)))


@dataclass(frozen=True)
class Provider:
    """How one provider is given its credentials, in the environment or as Agent settings."""

    name: str
    model: str
    env: tuple[str, ...]  # the variables holding the credentials
    settings: tuple[str, ...]  # the Agent settings holding the same credentials
    shapes: tuple[tuple[str, int, str], ...]  # (prefix, length, alphabet) of each credential
    env_extra: dict[str, str] = field(default_factory=dict)
    settings_extra: dict[str, str] = field(default_factory=dict)
    status: int = 401

    def keys(self, seed: str) -> tuple[str, ...]:
        return tuple(
            fake_key(*shape, f"{self.name}-{seed}-{i}") for i, shape in enumerate(self.shapes)
        )


AZURE_BASE = "https://tenx-test.openai.azure.com"
PROVIDERS = [
    Provider(
        "openai",
        "openai/gpt-4o-mini",
        ("OPENAI_API_KEY",),
        ("api_key",),
        (("sk-proj-", 164, URLSAFE),),
    ),
    Provider(
        "anthropic",
        "anthropic/claude-sonnet-4-5",
        ("ANTHROPIC_API_KEY",),
        ("api_key",),
        (("sk-ant-api03-", 108, URLSAFE),),
    ),
    Provider(
        "gemini",
        "gemini/gemini-2.5-flash",
        ("GEMINI_API_KEY",),
        ("api_key",),
        (("AIza", 39, URLSAFE),),
        status=400,
    ),
    Provider(  # a key longer than the usual 39 characters: pattern-based masking misses it
        "gemini-long",
        "gemini/gemini-2.5-flash",
        ("GEMINI_API_KEY",),
        ("api_key",),
        (("AIza", 53, URLSAFE),),
        status=400,
    ),
    Provider(
        "groq", "groq/llama-3.1-8b-instant", ("GROQ_API_KEY",), ("api_key",), (("gsk_", 56, ALNUM),)
    ),
    Provider(
        "mistral",
        "mistral/mistral-small-latest",
        ("MISTRAL_API_KEY",),
        ("api_key",),
        (("", 32, ALNUM),),
    ),
    Provider(
        "azure",
        "azure/tenx-deployment",
        ("AZURE_API_KEY",),
        ("api_key",),
        (("", 32, HEX),),
        env_extra={"AZURE_API_BASE": AZURE_BASE, "AZURE_API_VERSION": "2024-06-01"},
        settings_extra={"api_base": AZURE_BASE, "api_version": "2024-06-01"},
    ),
    Provider(
        "bedrock",
        "bedrock/anthropic.claude-3-haiku-20240307-v1:0",
        ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
        ("aws_access_key_id", "aws_secret_access_key"),
        (("AKIA", 20, AWS_ID), ("", 40, AWS_SECRET)),
        env_extra={"AWS_REGION_NAME": "us-east-1"},
        settings_extra={"aws_region_name": "us-east-1"},
        status=403,
    ),
]
# every variable any case sets, cleared first so the host's own keys play no part
ALL_VARIABLES = sorted(
    {v for p in PROVIDERS for v in (*p.env, *p.env_extra)}
    | {"AWS_SESSION_TOKEN", "AWS_PROFILE", "AZURE_OPENAI_API_KEY", "GOOGLE_API_KEY"}
)


@dataclass
class Given:
    """One provider's credentials, given one way, with the mocked provider echoing them."""

    provider: Provider
    via: str  # "env" or "settings"
    keys: tuple[str, ...]
    settings: dict[str, Any]

    def agent(self, **options: Any) -> Agent:
        return Agent(self.provider.model, retry_config=False, **self.settings, **options)


def echo(keys: tuple[str, ...], status: int) -> httpx.Response:
    """A provider error that repeats the credentials it was sent, in its body and a header."""
    shown = ", ".join(keys)
    body = {
        "error": {
            "code": status,
            "message": f"Incorrect API key provided: {shown}. Find your key in the console.",
            "type": "invalid_request_error",
            "status": "INVALID_ARGUMENT" if status == 400 else "UNAUTHENTICATED",
        },
        "message": f"The security token included in the request is invalid: {shown}",
    }
    headers = {"www-authenticate": f'Bearer error="invalid_token", key="{keys[0]}"'}
    return httpx.Response(status, json=body, headers=headers)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ALL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def give(provider: Provider, via: str, monkeypatch: pytest.MonkeyPatch) -> Given:
    keys = provider.keys(f"{via}-{uuid.uuid4().hex}")
    settings: dict[str, Any] = {}
    if via == "env":
        for name, key in zip(provider.env, keys, strict=True):
            monkeypatch.setenv(name, key)
        for name, value in provider.env_extra.items():
            monkeypatch.setenv(name, value)
    else:
        settings = dict(zip(provider.settings, keys, strict=True)) | provider.settings_extra
    return Given(provider, via, keys, settings)


@pytest.fixture(
    params=[(p, via) for p in PROVIDERS for via in ("env", "settings")],
    ids=lambda param: f"{param[0].name}-{param[1]}",
)
def given(request: pytest.FixtureRequest, clean_env: pytest.MonkeyPatch) -> Iterator[Given]:
    provider, via = request.param
    found = give(provider, via, clean_env)
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.route().mock(side_effect=lambda _: echo(found.keys, provider.status))
        yield found


def thread() -> dict[str, Any]:
    return {"thread_id": f"secret-{uuid.uuid4().hex}"}


# -- where a key could show -----------------------------------------------------------------


def chained(error: BaseException) -> list[BaseException]:
    """`error` and every exception linked to it."""
    found: list[BaseException] = []
    pending = [error]
    while pending:
        current = pending.pop()
        if any(current is seen for seen in found):
            continue
        found.append(current)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        pending.extend(v for v in vars(current).values() if isinstance(v, BaseException))
    return found


def exception_texts(error: BaseException) -> list[str]:
    """Everything an exception shows: its traceback as Python prints it, and for it and each
    chained cause, its text, repr, args, attributes and any HTTP exchange it holds."""
    texts = ["".join(traceback.format_exception(error))]
    for current in chained(error):
        texts += [str(current), repr(current), repr(current.args), repr(vars(current))]
        for name in ("message", "body", "litellm_debug_info", "detail"):
            texts.append(repr(getattr(current, name, None)))
        response = getattr(current, "response", None)
        if isinstance(response, httpx.Response):
            texts += [response.text, repr(dict(response.headers))]
            texts.append(repr(dict(response.request.headers)))
        request = getattr(current, "request", None)
        if isinstance(request, httpx.Request):
            texts.append(repr(dict(request.headers)))
    if isinstance(error, GraphError):
        texts.append(json.dumps(error.to_dict(), default=str))
    return texts


PUBLIC_PREFIXES = ("sk-proj-", "sk-ant-api03-", "sk-local-", "AIza", "gsk_", "AKIA", "ghp_")
FRAGMENT = 12  # this many characters of a key in a row are a leak (a masked "sk-****wxyz" is not)


def fragments(key: str) -> set[str]:
    """Every run of FRAGMENT characters of the key's secret part (its public prefix aside)."""
    body = key
    for prefix in PUBLIC_PREFIXES:
        body = body.removeprefix(prefix)
    return {body[i : i + FRAGMENT] for i in range(len(body) - FRAGMENT + 1)}


def assert_hidden(keys: tuple[str, ...], texts: list[str], where: str) -> None:
    """No key shows in `texts`, whole or in part (another library's partial masking of a key
    of unusual length still shows its tail)."""
    joined = "\n".join(texts)
    for key in keys:
        shown = [f for f in fragments(key) if f in joined]
        if shown:
            at = joined.index(shown[0])
            context = joined[max(0, at - 200) : at + 200]
            raise AssertionError(f"the key ({key[:6]}...) shows in {where}: ...{context!r}...")


# -- a provider echoing the key ------------------------------------------------------------


async def test_the_error_and_its_causes_hide_the_key(given: Given) -> None:
    with pytest.raises(ModelError) as info:
        await single_agent(given.agent()).ainvoke(inp("hello"))
    assert info.value.status_code == given.provider.status
    assert_hidden(given.keys, exception_texts(info.value), "the exception or its causes")
    assert "REDACTED" in info.value.message  # the echo is shown, without the key


async def test_debug_logs_hide_the_key(given: Given, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("LiteLLM", "openai", "openai._base_client"):  # their request dumps, asked for
        caplog.set_level(logging.DEBUG, logger=name)
    with pytest.raises(ModelError) as info:
        await single_agent(given.agent()).ainvoke(inp("hello"))
    logging.getLogger("tenxgraph.test").debug("failed", exc_info=info.value)
    texts = [caplog.text, *(r.getMessage() for r in caplog.records)]
    assert [r for r in caplog.records if r.name == "LiteLLM" and r.levelno == logging.DEBUG]
    assert_hidden(given.keys, texts, "the DEBUG logs")


async def test_the_streamed_error_chunk_hides_the_key(given: Given) -> None:
    chunks: list[Any] = []
    with pytest.raises(ModelError):
        await drain(single_agent(given.agent()).astream(inp("hello")), chunks)
    errors = [c for c in chunks if c.event == "error"]
    assert errors, [c.event for c in chunks]
    texts = [c.model_dump_json() for c in chunks] + [
        json.dumps(c.data, default=str) for c in errors
    ]
    assert_hidden(given.keys, texts, "the streamed chunks")


@pytest.mark.parametrize("via", ["env", "settings"])
@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
async def test_the_stored_thread_hides_the_key(
    backend: Backend, clean_env: pytest.MonkeyPatch, provider: Provider, via: str
) -> None:
    given = give(provider, via, clean_env)
    config = thread()
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.route().mock(side_effect=lambda _: echo(given.keys, provider.status))
        app = single_agent(given.agent(), backend.store)
        with pytest.raises(ModelError):
            await app.ainvoke(inp("hello"), config)
    reopened = backend.open() if backend.is_sql else backend.store
    state = await single_agent(Agent("test"), reopened).aget_state(config)
    assert state is not None
    texts = [state.model_dump_json()]
    if backend.is_sql:
        texts += [repr(row) for row in await stored_rows(backend)]
    assert state.execution_meta.internal_data.get("error")  # the failure was stored
    assert_hidden(given.keys, texts, f"the thread stored on {backend.name}")


async def stored_rows(backend: Backend) -> list[tuple[Any, ...]]:
    """Every row of every table of the backend's storage."""
    if backend.name == "sqlite":
        tables = await backend.sql("SELECT name FROM sqlite_master WHERE type = 'table'")
    else:
        tables = await backend.sql(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
    rows: list[tuple[Any, ...]] = []
    for (name,) in tables:
        rows += await backend.sql(f'SELECT * FROM "{name}"')
    return rows


# -- the CLI ----------------------------------------------------------------------------------


def run_cli(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO("hello\n"))
    capsys.readouterr()
    code = cli_main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
def test_the_cli_stderr_hides_the_key(
    provider: Provider,
    clean_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    given = give(provider, "env", clean_env)
    clean_env.setenv("HOME", str(tmp_path))
    clean_env.delenv("TENXGRAPH_DEBUG", raising=False)
    args = ["chat", "--model", provider.model, "--db", str(tmp_path / "chat.db")]
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.route().mock(side_effect=lambda _: echo(given.keys, provider.status))
        code, out, err = run_cli(args, clean_env, capsys)
    assert code != 0
    assert "tenxgraph: error:" in err
    assert_hidden(given.keys, [out, err], "the CLI's output")


@pytest.mark.parametrize(
    "provider", [p for p in PROVIDERS if p.status == 401], ids=lambda p: p.name
)
def test_the_cli_debug_traceback_hides_the_key(
    provider: Provider,
    clean_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    given = give(provider, "env", clean_env)
    clean_env.setenv("HOME", str(tmp_path))
    clean_env.setenv("TENXGRAPH_DEBUG", "1")
    args = ["chat", "--model", provider.model, "--db", str(tmp_path / "chat.db")]
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.route().mock(side_effect=lambda _: echo(given.keys, provider.status))
        with pytest.raises(ModelError) as info:  # the traceback Python would print
            run_cli(args, clean_env, capsys)
    assert_hidden(given.keys, exception_texts(info.value), "the traceback TENXGRAPH_DEBUG shows")


# -- a node's own error ---------------------------------------------------------------------


async def test_a_node_error_echoing_a_token_hides_it(
    backend: Backend, clean_env: pytest.MonkeyPatch
) -> None:
    token = fake_key("ghp_", 40, ALNUM, uuid.uuid4().hex)
    clean_env.setenv("TENX_SERVICE_TOKEN", token)

    def call_service(state: Any) -> None:
        raise PermissionError(f"service refused token {token}")

    graph = StateGraph()
    graph.add_node("call_service", call_service)
    graph.add_edge(START, "call_service")
    graph.add_edge("call_service", END)
    app = graph.compile(checkpointer=backend.store)
    config = thread()
    chunks: list[Any] = []
    with pytest.raises(GraphError) as info:
        await drain(app.astream(inp("hello"), config), chunks)
    texts = exception_texts(info.value) + [c.model_dump_json() for c in chunks]
    state = await app.aget_state(config)
    assert state is not None
    texts.append(state.model_dump_json())
    assert "[REDACTED:TENX_SERVICE_TOKEN]" in str(info.value)
    assert_hidden((token,), texts, "the node's error, its cause, the chunks or the thread")


async def test_a_tool_error_echoing_a_token_is_redacted_before_the_model_or_the_thread_sees_it(
    backend: Backend, clean_env: pytest.MonkeyPatch
) -> None:
    from tenxgraph.core.llm import FunctionModel
    from tenxgraph.core.state import ToolCallBlock
    from tenxgraph.prebuilt import ReactAgent

    token = fake_key("ghp_", 40, ALNUM, uuid.uuid4().hex)
    clean_env.setenv("TENX_SERVICE_TOKEN", token)
    seen_by_model: list[str] = []

    def call_service() -> str:
        """Call the service."""
        raise PermissionError(f"service refused token {token}")

    def model(messages: list[Message], info: object) -> object:
        if messages[-1].role == "tool":
            seen_by_model.append(messages[-1].model_dump_json())
            return "sorry"
        return [ToolCallBlock(id="c1", name="call_service", args={})]

    app = ReactAgent(FunctionModel(model), [call_service]).compile(checkpointer=backend.store)
    config = thread()
    await app.ainvoke(inp("hello"), config)
    state = await app.aget_state(config)
    assert state is not None
    assert "[REDACTED:TENX_SERVICE_TOKEN]" in seen_by_model[0]
    assert_hidden((token,), [*seen_by_model, state.model_dump_json()], "the tool's error result")


# -- fallbacks: each route sends its own credentials -----------------------------------------

OPENAI_URL = "https://api.openai.com/v1/chat/completions"
ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"
ANTHROPIC_ANSWER = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "from the fallback"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 5, "output_tokens": 3},
}
ANTHROPIC_STREAM = b"".join(
    b"event: " + name.encode() + b"\ndata: " + json.dumps(data).encode() + b"\n\n"
    for name, data in [
        (
            "message_start",
            {"type": "message_start", "message": {**ANTHROPIC_ANSWER, "content": []}},
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "from the fallback"},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 3},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
)


@dataclass(frozen=True)
class Sent:
    """A request as it went out (copied: a failed request is redacted in place afterwards)."""

    url: str
    headers: dict[str, str]
    body: str

    @classmethod
    def of(cls, request: httpx.Request) -> Sent:
        return cls(str(request.url), dict(request.headers), request.content.decode())


@dataclass
class Exchange:
    """The requests each mocked provider received."""

    openai: list[Sent] = field(default_factory=list)
    anthropic: list[Sent] = field(default_factory=list)

    def everything_sent_to_anthropic(self) -> str:
        return "\n".join(f"{r.url}\n{r.headers!r}\n{r.body}" for r in self.anthropic)


@pytest.fixture
def exchange(clean_env: pytest.MonkeyPatch) -> Iterator[Exchange]:
    """OpenAI always overloaded (503), Anthropic answering."""
    seen = Exchange()

    def openai(request: httpx.Request) -> httpx.Response:
        seen.openai.append(Sent.of(request))
        return httpx.Response(503, json={"error": {"message": "overloaded"}})

    def anthropic(request: httpx.Request) -> httpx.Response:
        seen.anthropic.append(Sent.of(request))
        if json.loads(request.content).get("stream"):
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=ANTHROPIC_STREAM
            )
        return httpx.Response(200, json=ANTHROPIC_ANSWER)

    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.post(OPENAI_URL).mock(side_effect=openai)
        mock.post(ANTHROPIC_URL).mock(side_effect=anthropic)
        yield seen


OPENAI_KEY = fake_key("sk-proj-", 164, URLSAFE, "fallback-openai")


@pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "stream"])
async def test_a_fallback_on_another_provider_never_gets_the_primarys_key(
    exchange: Exchange, clean_env: pytest.MonkeyPatch, streamed: bool
) -> None:
    anthropic_key = fake_key("sk-ant-api03-", 108, URLSAFE, uuid.uuid4().hex)
    clean_env.setenv("ANTHROPIC_API_KEY", anthropic_key)
    agent = Agent(
        "openai/gpt-4o-mini",
        api_key=OPENAI_KEY,
        fallback_models=["anthropic/claude-sonnet-4-5"],
        retry_config=False,
    )
    app = single_agent(agent)
    if streamed:
        chunks = [c async for c in app.astream(inp("hello"))]
        answer = [c.message for c in chunks if c.message is not None][-1]
    else:
        answer = (await app.ainvoke(inp("hello")))["messages"][-1]
    assert answer.text() == "from the fallback"
    assert exchange.openai[0].headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert [r.headers["x-api-key"] for r in exchange.anthropic] == [anthropic_key]
    assert OPENAI_KEY not in exchange.everything_sent_to_anthropic()


@pytest.mark.parametrize("form", ["tuple", "dict"])
async def test_a_fallback_given_its_own_key_sends_that_key_only_to_its_provider(
    exchange: Exchange, form: str
) -> None:
    anthropic_key = fake_key("sk-ant-api03-", 108, URLSAFE, uuid.uuid4().hex)
    own = {"api_key": anthropic_key, "max_tokens": 77}
    entry: Any = (
        ("anthropic/claude-sonnet-4-5", own)
        if form == "tuple"
        else {"model": "anthropic/claude-sonnet-4-5", **own}
    )
    agent = Agent(
        "openai/gpt-4o-mini",
        api_key=OPENAI_KEY,
        temperature=0.25,
        fallback_models=[entry],
        retry_config=False,
    )
    result = await single_agent(agent).ainvoke(inp("hello"))
    assert result["messages"][-1].text() == "from the fallback"
    assert [r.headers["x-api-key"] for r in exchange.anthropic] == [anthropic_key]
    sent = json.loads(exchange.anthropic[0].body)
    assert (sent["max_tokens"], sent["temperature"]) == (77, 0.25)  # own, then shared settings
    assert OPENAI_KEY not in exchange.everything_sent_to_anthropic()
    assert anthropic_key not in repr([r.headers for r in exchange.openai])


async def test_a_fallback_on_the_same_provider_with_its_own_base_url_gets_no_key_of_the_primary(
    clean_env: pytest.MonkeyPatch,
) -> None:
    local_key = fake_key("sk-local-", 40, ALNUM, uuid.uuid4().hex)
    seen: list[Sent] = []

    def local(request: httpx.Request) -> httpx.Response:
        seen.append(Sent.of(request))
        answer = {
            "id": "c1",
            "object": "chat.completion",
            "created": 1,
            "model": "llama",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "from the local server"},
                    "finish_reason": "stop",
                }
            ],
        }
        return httpx.Response(200, json=answer)

    agent = Agent(
        "openai/gpt-4o-mini",
        api_key=OPENAI_KEY,
        fallback_models=[
            ("openai/llama", {"api_base": "http://models.internal:8080/v1", "api_key": local_key})
        ],
        retry_config=False,
    )
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.post(OPENAI_URL).mock(return_value=httpx.Response(503, json={"error": {}}))
        mock.post("http://models.internal:8080/v1/chat/completions").mock(side_effect=local)
        result = await single_agent(agent).ainvoke(inp("hello"))
    assert result["messages"][-1].text() == "from the local server"
    assert [r.headers["authorization"] for r in seen] == [f"Bearer {local_key}"]
