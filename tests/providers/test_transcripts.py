"""Every transcript in ``providers/<name>/*.json`` replayed through `LiteLLMClient`.

Each transcript holds one provider HTTP exchange written from that provider's public API
documentation. respx serves it in place of the provider (``using="httpx"`` intercepts litellm's
default aiohttp transport too), and the resulting `Message` or `ModelError` must hold what the
transcript's ``expect`` says. The folder layout and schema are described in providers/README.md;
adding a folder or a case file is enough for it to be tested here.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm

import json
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from tenxgraph.core.exceptions import ModelError
from tenxgraph.core.llm import LiteLLMClient, ModelRequest
from tenxgraph.core.state import Message
from tenxgraph.core.state.message_block import ReasoningBlock

PROVIDERS_DIR = Path(__file__).resolve().parents[2] / "providers"
SECRET = "sk-test-secret"  # the api_key every hosted provider is called with here

# the environment variables litellm would read a key from; removed so results never depend on
# the developer's shell
KEY_ENVS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")

FULL_CASES = frozenset(
    {
        "plain",
        "parallel_tools",
        "reasoning",
        "cached_usage",
        "stream_text",
        "stream_tools",
        "error_429",
        "error_401",
        "error_context",
    }
)
LOCAL_CASES = frozenset({"plain", "parallel_tools", "stream_text", "stream_tools", "error_context"})
CASE_KEYS = frozenset(
    {
        "case",
        "description",
        "model",
        "stream",
        "request",
        "response",
        "expect",
        "expect_request",
        "expect_url",
    }
)
EXPECT_KEYS = frozenset(
    {
        "text",
        "tool_calls",
        "reasoning",
        "signature",
        "usage",
        "finish_reason",
        "error",
        "status_code",
        "retry_after",
    }
)
# what each error's message must tell the user to do
ERROR_HINTS = {
    "ModelRateLimitError": "slow down",
    "ModelAuthError": "check the API key",
    "ModelContextWindowError": "trim the conversation",
    "ModelUnavailableError": "try again",
    "ModelRequestError": "check the model name",
}


# -- loading ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Provider:
    """One ``providers/<name>/`` folder and its provider.json."""

    name: str
    folder: Path
    model: str
    key_env: str | None
    url: str | None
    url_regex: str | None
    settings: dict[str, Any]

    @classmethod
    def load(cls, folder: Path) -> Provider:
        data = json.loads((folder / "provider.json").read_text())
        return cls(
            name=folder.name,
            folder=folder,
            model=data["model"],
            key_env=data.get("key_env"),
            url=data.get("url"),
            url_regex=data.get("url_regex"),
            settings=dict(data.get("settings") or {}),
        )

    @property
    def wire(self) -> str:
        """The litellm provider (and wire format) the model name routes to."""
        return self.model.split("/", 1)[0]

    def call_settings(self) -> dict[str, Any]:
        """provider.json settings, plus the test key for hosted providers."""
        if self.key_env is None:
            return dict(self.settings)
        return {**self.settings, "api_key": SECRET}

    def route(self, mock: respx.MockRouter) -> respx.Route:
        if self.url is not None:
            return mock.post(self.url)
        assert self.url_regex is not None, f"{self.name}/provider.json needs url or url_regex"
        return mock.post(url__regex=self.url_regex)

    def case_names(self) -> list[str]:
        return sorted(p.stem for p in self.folder.glob("*.json") if p.name != "provider.json")

    def case(self, name: str) -> Case:
        return Case(self, name, json.loads((self.folder / f"{name}.json").read_text()))


@dataclass(frozen=True)
class Case:
    """One transcript file."""

    provider: Provider
    name: str
    data: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.provider.name}/{self.name}"

    @property
    def model(self) -> str:
        return self.data.get("model") or self.provider.model

    @property
    def stream(self) -> bool:
        return bool(self.data.get("stream"))

    @property
    def expect(self) -> dict[str, Any]:
        return self.data["expect"]

    @cached_property
    def messages(self) -> list[Message]:
        found = self.data.get("request", {}).get("messages")
        if not found:
            return [Message.text_message("Hello")]
        return [Message.model_validate(m) for m in found]

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.data.get("request", {}).get("tools") or [])

    def model_request(self) -> ModelRequest:
        settings = {
            **self.provider.call_settings(),
            **self.data.get("request", {}).get("settings", {}),
        }
        return ModelRequest(
            model=self.model, messages=list(self.messages), tools=self.tools, settings=settings
        )

    def http_response(self) -> httpx.Response:
        response = self.data["response"]
        headers = response.get("headers") or {}
        if "sse" in response:
            return httpx.Response(
                response["status"], headers=headers, content=response["sse"].encode()
            )
        return httpx.Response(
            response["status"], headers=headers, content=json.dumps(response["json"]).encode()
        )


def providers() -> list[Provider]:
    return [
        Provider.load(folder)
        for folder in sorted(PROVIDERS_DIR.iterdir())
        if (folder / "provider.json").is_file()
    ]


def all_cases() -> Iterator[Case]:
    for provider in providers():
        for name in provider.case_names():
            yield provider.case(name)


CASES = list(all_cases())


@pytest.fixture(autouse=True)
def _no_keys_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_ENVS:
        monkeypatch.delenv(name, raising=False)


# -- checks shared with the end-to-end test ----------------------------------------------------


def assert_subset(expected: Any, actual: Any, where: str = "body") -> None:
    """`expected` is contained in `actual`: dicts by key (recursively), lists item by item
    (same length), anything else by equality."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: expected an object, got {actual!r}"
        for key, value in expected.items():
            assert key in actual, f"{where}: no key {key!r} in {sorted(actual)}"
            assert_subset(value, actual[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), f"{where}: expected a list, got {actual!r}"
        assert len(actual) == len(expected), f"{where}: {len(actual)} items, expected {expected!r}"
        for i, (want, got) in enumerate(zip(expected, actual, strict=True)):
            assert_subset(want, got, f"{where}[{i}]")
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def assert_no_secret(*values: Any) -> None:
    for value in values:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        assert SECRET not in text


def check_request(case: Case, request: httpx.Request) -> None:
    """The wire request: the expected body keys, the key sent in a header and never in the URL."""
    body = json.loads(request.content)
    assert_subset(case.data.get("expect_request", {}), body)
    if "expect_url" in case.data:
        assert case.data["expect_url"] in str(request.url)
    assert SECRET not in str(request.url)  # query strings end up in access logs
    header_values = " ".join(request.headers.values())
    if case.provider.key_env is None:
        assert SECRET not in header_values
    else:
        assert SECRET in header_values, "the api_key setting did not reach the request"


def check_tool_calls(message: Message, expected: list[dict[str, Any]]) -> None:
    blocks = message.tool_call_blocks()
    assert [(b.name, b.args) for b in blocks] == [(c["name"], c["args"]) for c in expected]
    for block, want in zip(blocks, expected, strict=True):
        assert block.id, "every tool call needs an id to pair its result with"
        if "id" in want:
            assert block.id == want["id"]
    assert len({b.id for b in blocks}) == len(blocks), "tool call ids must be unique"
    assert "tool_call_errors" not in message.metadata
    # the OpenAI-format copy agrees with the blocks
    wire = message.tools_calls or []
    assert [
        (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in wire
    ] == [(b.id, b.name, b.args) for b in blocks]


def check_message(message: Message, expect: dict[str, Any]) -> None:
    assert message.role == "assistant"
    assert not message.delta
    if "text" in expect:
        assert message.text() == expect["text"]
    if "tool_calls" in expect:
        check_tool_calls(message, expect["tool_calls"])
    reasoning_blocks = [b for b in message.content if isinstance(b, ReasoningBlock)]
    if "reasoning" in expect:
        assert message.reasoning == expect["reasoning"]
        if expect["reasoning"] is None:
            assert reasoning_blocks == []
        else:
            assert "".join(b.summary for b in reasoning_blocks) == expect["reasoning"]
    if "signature" in expect:
        assert [b.signature for b in reasoning_blocks if b.signature] == [expect["signature"]]
    if "usage" in expect:
        assert message.usages is not None, "no usage on the final message"
        got = message.usages.model_dump()
        assert {k: got[k] for k in expect["usage"]} == expect["usage"]
    if "finish_reason" in expect:
        assert message.metadata.get("finish_reason") == expect["finish_reason"]


def assemble_fragments(deltas: list[Message]) -> list[tuple[str | None, str, str]]:
    """Tool calls put together from the deltas' `tools_calls` fragments, as a consumer of the
    stream would: pieces with the same index belong together, except that a new id at an
    index already in use starts a new call. Returns (id, name, arguments) per call."""
    calls: list[list[Any]] = []
    slot_of: dict[int, int] = {}
    for delta in deltas:
        for fragment in delta.tools_calls or ():
            index = fragment.get("index") or 0
            call_id = fragment.get("id")
            function = fragment.get("function") or {}
            slot = slot_of.get(index)
            if slot is None or (call_id and calls[slot][0] not in (None, call_id)):
                slot = len(calls)
                calls.append([call_id, "", ""])
                slot_of[index] = slot
            call = calls[slot]
            if call_id and call[0] is None:
                call[0] = call_id
            call[1] += function.get("name") or ""
            call[2] += function.get("arguments") or ""
    return [(c[0], c[1], c[2]) for c in calls]


def check_stream(messages: list[Message], expect: dict[str, Any]) -> Message:
    """The deltas and the final message of one `astream`; returns the final message."""
    assert messages, "the stream yielded nothing"
    final, deltas = messages[-1], messages[:-1]
    assert not final.delta, "the last message of a stream must be the complete one"
    assert deltas, "a streamed answer should come in pieces"
    assert all(d.delta for d in deltas)
    assert {d.message_id for d in deltas} == {final.message_id}
    assert "".join(d.text() for d in deltas) == final.text()
    assert "".join(d.reasoning or "" for d in deltas) == (final.reasoning or "")
    assembled = assemble_fragments(deltas)
    final_calls = [
        (c["id"], c["function"]["name"], c["function"]["arguments"])
        for c in final.tools_calls or ()
    ]
    assert [(name, json.loads(args or "{}")) for _, name, args in assembled] == [
        (name, json.loads(args)) for _, name, args in final_calls
    ]
    for (streamed_id, _, _), (final_id, _, _) in zip(assembled, final_calls, strict=True):
        assert streamed_id in (None, final_id)
    assert final.usages is not None, "a stream asked for include_usage must end with usage"
    check_message(final, expect)
    return final


# -- the tests -------------------------------------------------------------------------------


def test_every_provider_folder_is_complete() -> None:
    found = providers()
    assert {p.name for p in found} >= {"openai", "anthropic", "gemini", "local_openai_compatible"}
    for provider in found:
        assert (provider.folder / "README.md").is_file(), f"{provider.name} has no README.md"
        assert (provider.url is None) != (provider.url_regex is None), provider.name
        assert "/" in provider.model, f"{provider.name}: prefix the model with its provider"
        required = FULL_CASES if provider.key_env else LOCAL_CASES
        missing = required - set(provider.case_names())
        assert not missing, f"{provider.name} lacks {sorted(missing)}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_transcript_schema(case: Case) -> None:
    data = case.data
    assert data["case"] == case.name, "the case field must match the file name"
    assert set(data) <= CASE_KEYS, f"unknown keys {sorted(set(data) - CASE_KEYS)}"
    assert set(case.expect) <= EXPECT_KEYS, (
        f"unknown expect {sorted(set(case.expect) - EXPECT_KEYS)}"
    )
    assert isinstance(data.get("stream"), bool)
    response = data["response"]
    assert ("json" in response) != ("sse" in response)
    if "error" in case.expect:
        assert "status_code" in case.expect
    else:
        assert response["status"] == 200
        assert ("sse" in response) == case.stream


SUCCESS = [c for c in CASES if "error" not in c.expect]
ERRORS = [c for c in CASES if "error" in c.expect]


async def answer(client: LiteLLMClient, case: Case) -> list[Message]:
    """Every message of a stream, or the one complete answer."""
    if case.stream:
        return [m async for m in client.astream(case.model_request())]
    return [await client.acomplete(case.model_request())]


@pytest.mark.parametrize("case", SUCCESS, ids=lambda c: c.id)
async def test_replay(case: Case) -> None:
    client = LiteLLMClient()
    with respx.mock(using="httpx") as mock:
        route = case.provider.route(mock).mock(return_value=case.http_response())
        messages = await answer(client, case)
        if case.stream:
            final = check_stream(messages, case.expect)
        else:
            [final] = messages
            check_message(final, case.expect)
    assert route.call_count == 1
    check_request(case, route.calls.last.request)
    assert final.metadata["provider"] == case.provider.wire
    assert_no_secret(final.model_dump(mode="json"))


@pytest.mark.parametrize("stream", [False, True], ids=["acomplete", "astream"])
@pytest.mark.parametrize("case", ERRORS, ids=lambda c: c.id)
async def test_error(case: Case, stream: bool) -> None:
    # an error answer arrives before any chunk, so a stream must fail the same way
    case = Case(case.provider, case.name, {**case.data, "stream": stream})
    client = LiteLLMClient()
    with respx.mock(using="httpx") as mock:
        route = case.provider.route(mock).mock(return_value=case.http_response())
        with pytest.raises(ModelError) as caught:
            await answer(client, case)
    # one request: neither litellm nor the provider SDK retried (nor slept) behind our back
    assert route.call_count == 1
    check_request(case, route.calls.last.request)
    error = caught.value
    expect = case.expect
    assert type(error).__name__ == expect["error"]
    assert error.status_code == expect["status_code"]
    assert error.provider == case.provider.wire
    assert error.model == case.model
    if "retry_after" in expect:
        want = expect["retry_after"]
        assert error.context.get("retry_after") == (None if want is None else pytest.approx(want))
    assert ERROR_HINTS[type(error).__name__] in error.message
    assert error.context.get("detail"), "the provider's own words should be kept"
    assert_no_secret(str(error), error.message, error.context, error.to_dict())
    # nor in the chained litellm exception a logged traceback would show
    assert_no_secret("".join(traceback.format_exception(error)))
