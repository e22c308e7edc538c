"""An Agent + tools loop in a StateGraph, against every provider's recorded transcripts.

Turn 1 is the provider's parallel tool call answer, turn 2 its plain text answer: once with
``ainvoke`` (parallel_tools + plain) and once with ``astream`` (stream_tools + stream_text).
Both runs must store the same conversation, and the second model request must send the tool
calls and their results back, paired by id, in the provider's own wire format.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm

import json
import uuid
from typing import Any

import pytest
import respx

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state import Message
from tenxgraph.core.state.message_block import ToolResultBlock
from tenxgraph.prebuilt import tools_condition
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils.constants import START
from tests.providers.test_transcripts import (
    KEY_ENVS,
    SECRET,
    Case,
    Provider,
    assert_no_secret,
    providers,
)

OUTPUTS = {
    "get_weather": {"temperature_c": 18, "sky": "partly cloudy"},
    "get_time": {"local_time": "14:05"},
}
QUESTION = "What is the weather in Paris, and what time is it there?"
NEEDED = ("parallel_tools", "plain", "stream_tools", "stream_text")


class WeatherTools:
    """The two tools, recording the calls they get, in a real `ToolNode`."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

        async def get_weather(city: str, tool_call_id: str) -> dict[str, Any]:
            """Current weather for a city."""
            self.seen.append((tool_call_id, city))
            return OUTPUTS["get_weather"]

        def get_time(tz: str, tool_call_id: str) -> dict[str, Any]:
            """Current local time in an IANA time zone."""
            self.seen.append((tool_call_id, tz))
            return OUTPUTS["get_time"]

        self.node = ToolNode([get_weather, get_time])


def build_app(provider: Provider, tools: WeatherTools, **compile_options: Any) -> Any:
    settings = provider.call_settings()  # api_key for hosted providers, api_base for local
    agent = Agent(provider.model, tool_node="tools", retry_config=False, **settings)
    graph = StateGraph()
    graph.add_node("agent", agent)
    graph.add_node("tools", tools.node)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=InMemoryCheckpointer(), **compile_options)


def shape(messages: list[Message]) -> list[tuple[str, int, int]]:
    """(role, tool calls, tool results) per message."""
    return [
        (
            m.role,
            len(m.tool_call_blocks()),
            sum(isinstance(b, ToolResultBlock) for b in m.content),
        )
        for m in messages
    ]


def check_conversation(stored: list[Message], calls_case: Case, text_case: Case) -> None:
    expected_calls = calls_case.expect["tool_calls"]
    n = len(expected_calls)
    assert shape(stored) == [
        ("user", 0, 0),
        ("assistant", n, 0),
        *[("tool", 0, 1)] * n,
        ("assistant", 0, 0),
    ]
    assert not any(m.delta for m in stored), "delta messages must never be stored"
    calls = stored[1].tool_call_blocks()
    assert [(c.name, c.args) for c in calls] == [(c["name"], c["args"]) for c in expected_calls]
    results = [b for m in stored[2 : 2 + n] for b in m.content if isinstance(b, ToolResultBlock)]
    assert [r.call_id for r in results] == [c.id for c in calls]
    assert [r.output for r in results] == [OUTPUTS[c.name] for c in calls]
    assert stored[-1].text() == text_case.expect["text"]
    assert stored[-1].usages is not None


def body(request: Any) -> dict[str, Any]:
    return json.loads(request.content)


def wire_pairs(provider: Provider, request: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """(the tool calls, the tool results) of the second request, each as (id, name, args or
    output), read in the provider's own format."""
    if provider.wire == "anthropic":
        turns = request["messages"]
        assistant = next(i for i, t in enumerate(turns) if t["role"] == "assistant")
        uses = [b for b in turns[assistant]["content"] if b["type"] == "tool_use"]
        answer = turns[assistant + 1]  # every result in the one user turn right after
        assert answer["role"] == "user"
        results = [b for b in answer["content"] if b["type"] == "tool_result"]
        return (
            [(u["id"], u["name"], u["input"]) for u in uses],
            [(r["tool_use_id"], None, _json(r["content"])) for r in results],
        )
    if provider.wire == "gemini":
        turns = request["contents"]
        model = next(i for i, t in enumerate(turns) if t["role"] == "model")
        calls = [_part(p, "function_call") for p in turns[model]["parts"]]
        answers = [_part(p, "function_response") for t in turns[model + 1 :] for p in t["parts"]]
        return (
            [(c.get("id"), c["name"], c["args"]) for c in calls],
            [(r.get("id"), r["name"], r["response"]) for r in answers],
        )
    turns = request["messages"]  # openai and OpenAI-compatible servers
    assistant = next(t for t in turns if t["role"] == "assistant")
    return (
        [
            (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in assistant["tool_calls"]
        ],
        [(t["tool_call_id"], None, _json(t["content"])) for t in turns if t["role"] == "tool"],
    )


def _part(part: dict[str, Any], name: str) -> Any:
    """A Gemini part's field by its proto name; the API (and litellm) use both spellings."""
    camel = name.split("_")[0] + "".join(w.title() for w in name.split("_")[1:])
    return part[name] if name in part else part[camel]


def _json(content: Any) -> Any:
    if isinstance(content, list):  # content blocks
        content = "".join(b.get("text", "") for b in content)
    return json.loads(content)


def check_second_request(provider: Provider, request: dict[str, Any], calls_case: Case) -> None:
    calls, results = wire_pairs(provider, request)
    expected = calls_case.expect["tool_calls"]
    assert [(name, args) for _, name, args in calls] == [(c["name"], c["args"]) for c in expected]
    if provider.wire == "gemini":
        # Gemini has no call ids of its own: results pair with calls by name and order (if an
        # id is sent at all, it must be the same on both sides)
        assert [(rid, name) for rid, name, _ in results] == [(cid, n) for cid, n, _ in calls]
        assert [out for _, _, out in results] == [OUTPUTS[name] for _, name, _ in calls]
        # the thought signature litellm folded into the first call id goes back on its part
        signed = [
            _part(p, "function_call")["name"]
            for t in request["contents"]
            for p in t["parts"]
            if p.get("thoughtSignature") or p.get("thought_signature")
        ]
        assert signed == ["get_weather"]
        return
    for want, (call_id, _, _) in zip(expected, calls, strict=True):
        assert call_id == want["id"], "the provider's own call id must go back unchanged"
    assert [rid for rid, _, _ in results] == [cid for cid, _, _ in calls]
    assert [out for _, _, out in results] == [OUTPUTS[name] for _, name, _ in calls]


def full_providers() -> list[Provider]:
    return [p for p in providers() if set(NEEDED) <= set(p.case_names())]


@pytest.fixture(autouse=True)
def _no_keys_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_ENVS:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("provider", full_providers(), ids=lambda p: p.name)
async def test_tool_loop_invoke_and_stream(provider: Provider) -> None:
    runs: dict[str, list[Message]] = {}
    for mode, (calls_name, text_name) in {
        "invoke": ("parallel_tools", "plain"),
        "stream": ("stream_tools", "stream_text"),
    }.items():
        calls_case, text_case = provider.case(calls_name), provider.case(text_name)
        tools = WeatherTools()
        app = build_app(provider, tools)
        config = {"thread_id": f"{provider.name}-{mode}-{uuid.uuid4().hex}"}
        user = {"messages": [Message.text_message(QUESTION)]}
        with respx.mock(using="httpx") as mock:
            route = provider.route(mock).mock(
                side_effect=[calls_case.http_response(), text_case.http_response()]
            )
            if mode == "invoke":
                result = await app.ainvoke(user, config)
                assert shape(result["messages"])[-1] == ("assistant", 0, 0)
            else:
                chunks = [c async for c in app.astream(user, config)]
                streamed = [c.message for c in chunks if c.message is not None]
                deltas = [m for m in streamed if m.delta]
                assert deltas, "astream should pass the model's deltas on"
                final_ids = {m.message_id for m in streamed if not m.delta}
                assert {d.message_id for d in deltas} <= final_ids
        assert route.call_count == 2
        stored = await app.aget_state(config)
        assert stored is not None
        check_conversation(stored.context, calls_case, text_case)
        asked = stored.context[1].tool_call_blocks()
        assert sorted(tools.seen) == sorted((c.id, next(iter(c.args.values()))) for c in asked)
        first, second = body(route.calls[0].request), body(route.calls[1].request)
        offered = json.dumps(first.get("tools"))  # each provider's own tool format
        assert "get_weather" in offered, "the tool node's schemas should reach the model"
        assert "get_time" in offered
        assert "tool_call_id" not in offered, "injected parameters are not offered"
        check_second_request(provider, second, calls_case)
        assert_no_secret([m.model_dump(mode="json") for m in stored.context])
        if provider.key_env is not None:
            assert SECRET not in str(route.calls[1].request.url)
        runs[mode] = stored.context
    assert shape(runs["invoke"]) == shape(runs["stream"])
    assert [m.text() for m in runs["invoke"]] == [m.text() for m in runs["stream"]]
