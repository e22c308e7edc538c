"""Structured output through litellm, on the OpenAI, Anthropic and Gemini wire shapes.

respx stands in for each provider (as in test_transcripts.py). Each provider gets: the mode
`output_mode="auto"` picks for it, read from the request body (OpenAI and Gemini: a JSON
schema response format; Anthropic: the output tool, forced); a valid answer at once; an
invalid one corrected after the model is shown pydantic's errors (read from the second
request body); and two invalid ones, which raise `OutputValidationError`. Streamed and not.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm

import json
from typing import Any

import httpx
import pytest
import respx
from pydantic import BaseModel

from tenxgraph.core.exceptions import OutputValidationError
from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.llm import retry
from tenxgraph.core.state import Message
from tenxgraph.prebuilt import tools_condition
from tenxgraph.utils.constants import START
from tests.core.graph._support import inp, linear
from tests.core.llm._support import USAGE_EVENT, completion, event, sent, sse
from tests.providers.test_transcripts import KEY_ENVS, SECRET, Provider, providers

VALID = {"city": "Oslo", "high": 4}
INVALID = {"city": "Oslo", "high": "warm"}
PYDANTIC_SAYS = "Input should be a valid integer"  # pydantic's error for INVALID


class Forecast(BaseModel):
    """Tomorrow's forecast for one city."""

    city: str
    high: int


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_ENVS:
        monkeypatch.delenv(name, raising=False)

    async def no_wait(seconds: float) -> None:
        return None

    monkeypatch.setattr(retry, "sleep", no_wait)


def provider(name: str) -> Provider:
    return next(p for p in providers() if p.name == name)


# -- provider answers -----------------------------------------------------------------------


def openai_answer(data: dict[str, Any], stream: bool) -> httpx.Response:
    text = json.dumps(data)
    if stream:
        half = len(text) // 2
        return sse(
            event({"role": "assistant", "content": ""}),
            event({"content": text[:half]}),
            event({"content": text[half:]}),
            event({}, "stop"),
            USAGE_EVENT,
        )
    return httpx.Response(200, json=completion(text))


ANTHROPIC_USAGE = {"input_tokens": 20, "output_tokens": 10}


def anthropic_tool_use(
    name: str, data: dict[str, Any], stream: bool, call_id: str = "toolu_1"
) -> httpx.Response:
    """Claude calling tool `name` with `data`: whole, or streamed in two JSON pieces."""
    if not stream:
        return httpx.Response(
            200,
            json={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "tool_use", "id": call_id, "name": name, "input": data}],
                "stop_reason": "tool_use",
                "stop_sequence": None,
                "usage": ANTHROPIC_USAGE,
            },
        )
    text = json.dumps(data)
    half = len(text) // 2
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 20, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            },
        ),
        *[
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": piece},
                },
            )
            for piece in ("", text[:half], text[half:])
        ],
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 10},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    body = "".join(f"event: {kind}\ndata: {json.dumps(data)}\n\n" for kind, data in events)
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def anthropic_answer(data: dict[str, Any], stream: bool) -> httpx.Response:
    return anthropic_tool_use("Forecast", data, stream)


def gemini_answer(data: dict[str, Any], stream: bool) -> httpx.Response:
    text = json.dumps(data)
    usage = {"promptTokenCount": 14, "candidatesTokenCount": 8, "totalTokenCount": 22}

    def chunk(piece: str, finish: str | None) -> dict[str, Any]:
        candidate: dict[str, Any] = {
            "content": {"parts": [{"text": piece}], "role": "model"},
            "index": 0,
        }
        if finish:
            candidate["finishReason"] = finish
        return {
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": "gemini-2.5-flash",
            "responseId": "r1",
        }

    if not stream:
        return httpx.Response(200, json=chunk(text, "STOP"))
    half = len(text) // 2
    body = "".join(
        f"data: {json.dumps(c)}\r\n\r\n"
        for c in (chunk(text[:half], None), chunk(text[half:], "STOP"))
    )
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


ANSWERS = {"openai": openai_answer, "anthropic": anthropic_answer, "gemini": gemini_answer}


def check_mode(name: str, body: dict[str, Any]) -> None:
    """The structured-output mode "auto" picked for the provider, as its request shows it."""
    if name == "openai":
        assert body["response_format"]["type"] == "json_schema"
        schema = body["response_format"]["json_schema"]["schema"]
        assert set(schema["properties"]) == {"city", "high"}
        assert "tools" not in body
    elif name == "anthropic":
        assert [t["name"] for t in body["tools"]] == ["Forecast"]
        assert set(body["tools"][0]["input_schema"]["properties"]) == {"city", "high"}
        assert body["tool_choice"] == {"type": "tool", "name": "Forecast"}
        assert "output_format" not in body
    else:
        config = {k.replace("_", "").lower(): v for k, v in body["generationConfig"].items()}
        assert config["responsemimetype"] == "application/json"
        schema = config.get("responsejsonschema") or config["responseschema"]
        assert set(schema["properties"]) == {"city", "high"}
        assert "tools" not in body


def correction_sent(name: str, body: dict[str, Any]) -> str:
    """The text of the correction the second request ends with, checked to be in the right
    place: the output tool's result for Anthropic (tool mode), a user turn otherwise."""
    if name == "anthropic":
        *_, assistant, last = body["messages"]
        assert assistant["role"] == "assistant"
        assert [b["type"] for b in assistant["content"]] == ["tool_use"]
        assert last["role"] == "user"
        (result,) = last["content"]
        assert result["type"] == "tool_result"
        assert result["tool_use_id"] == "toolu_1"
        return json.dumps(result["content"])
    if name == "gemini":
        *_, model, last = body["contents"]
        assert model["role"] == "model"
        assert json.loads(model["parts"][0]["text"]) == INVALID
        assert last["role"] == "user"
        return str(last["parts"][0]["text"])
    *_, assistant, last = body["messages"]
    assert assistant == {"role": "assistant", "content": json.dumps(INVALID)}
    assert last["role"] == "user"
    return str(last["content"])


def build_agent(name: str, **options: Any) -> Agent:
    found = provider(name)
    return Agent(found.model, output_schema=Forecast, **found.call_settings(), **options)


async def run(agent: Agent, stream: bool) -> tuple[Message, list[Message]]:
    """The stored answer of one run, and the deltas a stream showed."""
    app = linear(("agent", agent))
    if not stream:
        result = await app.ainvoke(inp("Forecast for Oslo?"))
        return result["messages"][-1], []
    chunks = [c async for c in app.astream(inp("Forecast for Oslo?"))]
    messages = [c.message for c in chunks if c.message is not None]
    final = messages[-1]
    assert not final.delta
    return final, [m for m in messages if m.delta]


NAMES = ["openai", "anthropic", "gemini"]
MODES = [pytest.param(False, id="invoke"), pytest.param(True, id="stream")]


@pytest.mark.parametrize("stream", MODES)
@pytest.mark.parametrize("name", NAMES)
async def test_a_valid_answer_first_time(name: str, stream: bool) -> None:
    with respx.mock(using="httpx") as mock:
        route = provider(name).route(mock).mock(return_value=ANSWERS[name](VALID, stream))
        answer, deltas = await run(build_agent(name), stream)
    assert route.call_count == 1
    check_mode(name, sent(route))
    assert answer.parsed_content == Forecast(**VALID)
    assert json.loads(answer.text()) == VALID
    assert not answer.has_tool_calls(), "the output tool call is the answer, not a tool call"
    assert "output_retries" not in answer.metadata
    if stream:  # the deltas are the answer's JSON text, whatever the mode
        assert len(deltas) >= 2
        assert json.loads("".join(d.text() for d in deltas)) == VALID
        assert all(not d.tools_calls for d in deltas)
        assert {d.message_id for d in deltas} == {answer.message_id}


@pytest.mark.parametrize("stream", MODES)
@pytest.mark.parametrize("name", NAMES)
async def test_an_invalid_answer_is_corrected_with_pydantics_errors(
    name: str, stream: bool
) -> None:
    answers = [ANSWERS[name](INVALID, stream), ANSWERS[name](VALID, stream)]
    with respx.mock(using="httpx") as mock:
        route = provider(name).route(mock).mock(side_effect=answers)
        app = linear(("agent", build_agent(name)))
        config = {"thread_id": f"fix-{name}-{stream}"}
        if stream:
            chunks = [c async for c in app.astream(inp("Forecast for Oslo?"), config)]
            answer = chunks[-1].message
            assert answer is not None
        else:
            answer = (await app.ainvoke(inp("Forecast for Oslo?"), config))["messages"][-1]
    assert route.call_count == 2
    first, second = sent(route, 0), sent(route, 1)
    check_mode(name, second)  # asked the same way again
    correction = correction_sent(name, second)
    assert PYDANTIC_SAYS in correction
    assert "high" in correction
    assert "Forecast" in correction
    assert json.dumps(first) not in json.dumps(second)  # the first request ended before
    assert answer.parsed_content == Forecast(**VALID)
    assert answer.metadata["output_retries"] == 1
    stored = await app.aget_state(config)
    assert stored is not None
    # only the question and the valid answer are kept: no failed attempt, no correction
    assert [(m.role, m.text()) for m in stored.context] == [
        ("user", "Forecast for Oslo?"),
        ("assistant", json.dumps(VALID)),
    ]


@pytest.mark.parametrize("stream", MODES)
@pytest.mark.parametrize("name", NAMES)
async def test_two_invalid_answers_raise_output_validation_error(name: str, stream: bool) -> None:
    answers = [ANSWERS[name](INVALID, stream), ANSWERS[name](INVALID, stream)]
    with respx.mock(using="httpx") as mock:
        route = provider(name).route(mock).mock(side_effect=answers)
        with pytest.raises(OutputValidationError) as info:
            await run(build_agent(name), stream)
    assert route.call_count == 2  # output_retries=1 by default
    error = info.value
    assert error.error_code == "OUTPUT_001"
    assert json.loads(error.raw_text) == INVALID
    assert [e["loc"] for e in error.errors] == [["high"]]
    assert PYDANTIC_SAYS in str(error)
    assert error.context["attempts"] == 2
    assert SECRET not in str(error)


async def test_output_retries_zero_raises_at_the_first_invalid_answer() -> None:
    with respx.mock(using="httpx") as mock:
        route = provider("openai").route(mock).mock(return_value=openai_answer(INVALID, False))
        with pytest.raises(OutputValidationError):
            await run(build_agent("openai", output_retries=0), False)
    assert route.call_count == 1


@pytest.mark.parametrize("stream", MODES)
async def test_tool_mode_forced_on_openai(stream: bool) -> None:
    text = json.dumps(VALID)
    if stream:
        answer = sse(
            event(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "Forecast", "arguments": ""},
                        }
                    ],
                }
            ),
            event({"tool_calls": [{"index": 0, "function": {"arguments": text[:9]}}]}),
            event({"tool_calls": [{"index": 0, "function": {"arguments": text[9:]}}]}),
            event({}, "tool_calls"),
            USAGE_EVENT,
        )
    else:
        call = {"id": "call_1", "type": "function"}
        call["function"] = {"name": "Forecast", "arguments": text}
        answer = httpx.Response(200, json=completion(None, tool_calls=[call]))
    with respx.mock(using="httpx") as mock:
        route = provider("openai").route(mock).mock(return_value=answer)
        final, deltas = await run(build_agent("openai", output_mode="tool"), stream)
    body = sent(route)
    assert "response_format" not in body
    assert [t["function"]["name"] for t in body["tools"]] == ["Forecast"]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "Forecast"}}
    assert final.parsed_content == Forecast(**VALID)
    assert final.metadata["output_tool"] == "Forecast"
    if stream:
        assert "".join(d.text() for d in deltas) == text


async def test_text_mode_for_a_model_without_schema_support_reads_fenced_json() -> None:
    local = provider("local_openai_compatible")  # litellm knows nothing of its model
    fenced = "Here it is:\n```json\n" + json.dumps(VALID) + "\n```"
    with respx.mock(using="httpx") as mock:
        route = local.route(mock).mock(
            return_value=httpx.Response(
                200,
                json={
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "created": 1,
                    "model": "llama",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": fenced},
                            "finish_reason": "stop",
                        }
                    ],
                },
            )
        )
        agent = Agent(
            local.model, output_type=Forecast, system_prompt="Be brief.", **local.settings
        )
        answer, _ = await run(agent, False)
    body = sent(route)
    assert "response_format" not in body
    assert "tools" not in body
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "system", "user"]  # the instructions after the prompt
    assert body["messages"][0]["content"] == "Be brief."
    assert '"high"' in body["messages"][1]["content"]
    assert "JSON" in body["messages"][1]["content"]
    assert answer.parsed_content == Forecast(**VALID)


@pytest.mark.parametrize("stream", MODES)
async def test_tool_mode_keeps_the_agents_own_tool_loop(stream: bool) -> None:
    """Anthropic: the model first calls a real tool (the output tool is offered next to it,
    tool_choice "any"), the ToolNode runs it, then the model calls the output tool."""
    seen: list[str] = []

    def get_weather(city: str) -> dict[str, Any]:
        """Current weather for a city."""
        seen.append(city)
        return {"high": 4}

    found = provider("anthropic")
    agent = Agent(found.model, tool_node="tools", output_schema=Forecast, **found.call_settings())
    graph = StateGraph()
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([get_weather]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    app = graph.compile()
    answers = [
        anthropic_tool_use("get_weather", {"city": "Oslo"}, stream, "toolu_w"),
        anthropic_answer(VALID, stream),
    ]
    with respx.mock(using="httpx") as mock:
        route = found.route(mock).mock(side_effect=answers)
        if stream:
            chunks = [c async for c in app.astream(inp("Forecast for Oslo?"))]
            messages = [c.message for c in chunks if c.message and not c.message.delta]
        else:
            messages = (await app.ainvoke(inp("Forecast for Oslo?")))["messages"]
    assert seen == ["Oslo"]
    first, second = sent(route, 0), sent(route, 1)
    assert sorted(t["name"] for t in first["tools"]) == ["Forecast", "get_weather"]
    assert first["tool_choice"] == {"type": "any"}
    assert any(b.get("type") == "tool_result" for b in second["messages"][-1]["content"])
    answer = messages[-1]
    assert answer.parsed_content == Forecast(**VALID)
    assert not answer.has_tool_calls()


def test_output_type_takes_a_model_class_and_conflicts_are_refused() -> None:
    assert Agent("test", output_type=Forecast).output_schema is Forecast
    assert Agent("test", output_type=Forecast, output_schema=Forecast).output_schema is Forecast

    class Other(BaseModel):
        x: int

    with pytest.raises(ValueError, match="differ"):
        Agent("test", output_type=Forecast, output_schema=Other)
    with pytest.raises(ValueError, match="output_mode"):
        Agent("test", output_schema=Forecast, output_mode="json")
    with pytest.raises(ValueError, match="output_retries"):
        Agent("test", output_schema=Forecast, output_retries=-1)


def test_importing_tenxgraph_does_not_need_litellm_for_structured_output() -> None:
    import subprocess
    import sys

    code = (
        "import sys, tenxgraph\n"
        "from tenxgraph.core.llm import structured, settings\n"
        "from tenxgraph.core.graph import Agent\n"
        "assert 'litellm' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
