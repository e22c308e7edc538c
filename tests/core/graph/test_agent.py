"""The Agent node in graphs: offline models, and litellm against a mocked provider endpoint."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx
from pydantic import BaseModel

from tenxgraph.core.exceptions import (
    GraphError,
    ModelAuthError,
    ModelRequestError,
    NodeTimeoutError,
    OutputValidationError,
)
from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.llm import FunctionModel, ModelInfo, RetryConfig
from tenxgraph.core.state import AgentState, Message, StreamChunk, TokenUsages
from tenxgraph.core.state.message_block import ToolCallBlock
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils.constants import END, START
from tests.core.graph._support import inp, linear
from tests.core.llm._support import (
    OPENAI_URL,
    USAGE_EVENT,
    completion,
    drain,
    event,
    sent,
    sse,
)

ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"
KEY = "sk-test-0123456789abcdef"


def sse_text(*pieces: str) -> httpx.Response:
    """A streamed OpenAI answer of `pieces`, ending with a usage event."""
    events = [event({"role": "assistant", "content": ""})]
    events += [event({"content": p}) for p in pieces]
    return sse(*events, event({}, "stop"), USAGE_EVENT)


class Recorder:
    """A FunctionModel function that answers `reply` and keeps what it was asked."""

    def __init__(self, reply: Any = "ok") -> None:
        self.reply = reply
        self.calls: list[tuple[list[Message], ModelInfo]] = []

    def __call__(self, messages: list[Message], info: ModelInfo) -> Any:
        self.calls.append((messages, info))
        return self.reply

    @property
    def messages(self) -> list[tuple[str, str]]:
        return [(m.role, m.text()) for m in self.calls[-1][0]]

    @property
    def info(self) -> ModelInfo:
        return self.calls[-1][1]


def tool_schema(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }


class Tools:
    """Stands in for a ToolNode: a node that can list its tools' schemas."""

    def __init__(self, *names: str) -> None:
        self.names = names
        self.asked_tags: list[Any] = []

    def all_tools(self, tags: set[str] | None = None) -> list[dict[str, Any]]:
        self.asked_tags.append(tags)
        return [tool_schema(n) for n in self.names]

    def __call__(self, state: AgentState) -> None:
        return None


def offered(recorder: Recorder) -> list[str]:
    return [t["function"]["name"] for t in recorder.info.tools]


# -- the class ------------------------------------------------------------------------------


def test_agent_is_exported_from_the_package_core_and_graph() -> None:
    from tenxgraph import Agent as top
    from tenxgraph.core import Agent as core
    from tenxgraph.core.graph import Agent as graph

    assert top is core is graph is Agent


async def test_construction_needs_no_key_or_network(
    openai_api: respx.Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    openai_api.mock(return_value=httpx.Response(200, json=completion()))
    agent = Agent("openai/gpt-4o-mini", temperature=0)
    app = linear(("agent", agent))
    assert repr(agent) == "Agent(model='openai/gpt-4o-mini')"
    with pytest.raises(ModelAuthError, match="OPENAI_API_KEY"):
        await app.ainvoke(inp("hi"))
    assert openai_api.call_count == 0


def test_output_type_other_than_text_is_rejected() -> None:
    with pytest.raises(ValueError, match="output_type='json' is not supported"):
        Agent("test", output_type="json")


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"output_schema": dict}, TypeError),
        ({"tool_node": 42}, TypeError),
        ({"reasoning_config": "high"}, TypeError),
        ({"reasoning_config": {"level": "high"}}, ValueError),
        ({"system_prompt": [{"role": "system"}]}, TypeError),
        ({"retry_config": 5}, TypeError),
    ],
)
def test_invalid_arguments_fail_at_construction(kwargs: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        Agent("test", **kwargs)


def test_model_names_are_checked() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        Agent(" ")
    with pytest.raises(TypeError, match="ModelClient"):
        Agent(42)  # type: ignore[arg-type]


# -- the request ----------------------------------------------------------------------------


class Profile(AgentState):
    user_name: str = "Ada"
    level: int = 1


async def test_system_prompt_placeholders_are_filled_from_state_fields() -> None:
    recorder = Recorder()
    prompt = 'Help {user_name} (level {level}). Answer like {"a": {value}}, {unknown}, {context}.'
    agent = Agent(
        FunctionModel(recorder),
        system_prompt=[prompt, {"role": "system", "content": "Second for {user_name}."}],
    )
    app = linear(("agent", agent), state=Profile)
    await app.ainvoke(inp("hi", user_name="Bob"))
    assert recorder.messages == [
        ("system", 'Help Bob (level 1). Answer like {"a": {value}}, {unknown}, {context}.'),
        ("system", "Second for Bob."),
        ("user", "hi"),
    ]
    assert agent.system_prompt[0] == prompt  # the template itself is kept


async def test_context_summary_is_a_system_note_ahead_of_the_history() -> None:
    recorder = Recorder()

    def summarize(state: AgentState) -> AgentState:
        state.context_summary = "They talked about cats."
        return state

    agent = Agent(FunctionModel(recorder), system_prompt="Be kind.")
    app = linear(summarize, ("agent", agent))
    await app.ainvoke(inp("and dogs?"))
    assert recorder.messages == [
        ("system", "Be kind."),
        ("system", "Summary of the earlier conversation:\nThey talked about cats."),
        ("user", "and dogs?"),
    ]


async def test_extra_kwargs_reach_the_provider_and_ainvoke_makes_one_plain_call(
    openai_api: respx.Route,
) -> None:
    openai_api.mock(return_value=httpx.Response(200, json=completion("Hi!")))
    agent = Agent("openai/gpt-4o-mini", api_key=KEY, temperature=0.1, max_tokens=64, seed=7)
    result = await linear(("agent", agent)).ainvoke(inp("hi"))
    assert result["messages"][-1].text() == "Hi!"
    assert openai_api.call_count == 1
    body = sent(openai_api)
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.1, 64, 7)
    assert "stream" not in body
    assert "stream_options" not in body
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert openai_api.calls[0].request.headers["authorization"] == f"Bearer {KEY}"


async def test_the_history_goes_to_the_model_on_the_next_turn(openai_api: respx.Route) -> None:
    openai_api.mock(return_value=httpx.Response(200, json=completion("Hi!")))
    app = linear(
        ("agent", Agent("openai/gpt-4o-mini", api_key=KEY)), checkpointer=InMemoryCheckpointer()
    )
    config = {"thread_id": "history"}
    await app.ainvoke(inp("first"), config)
    await app.ainvoke(inp("second"), config)
    assert sent(openai_api)["messages"] == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "Hi!"},
        {"role": "user", "content": "second"},
    ]


# -- tools ----------------------------------------------------------------------------------


async def test_tool_node_object_offers_its_tools() -> None:
    recorder = Recorder()
    tools = Tools("search", "fetch")
    agent = Agent(FunctionModel(recorder), tool_node=tools, tools_tags=["web"])
    await linear(("agent", agent)).ainvoke(inp("hi"))
    assert offered(recorder) == ["search", "fetch"]
    assert tools.asked_tags == [{"web"}]


async def test_an_async_all_tools_is_awaited() -> None:
    class AsyncTools:
        async def all_tools(self) -> list[dict[str, Any]]:
            return [tool_schema("remote")]

    recorder = Recorder()
    await linear(("agent", Agent(FunctionModel(recorder), tool_node=AsyncTools()))).ainvoke(
        inp("hi")
    )
    assert offered(recorder) == ["remote"]


def graph_with_tools(agent: Agent, tools: Any) -> StateGraph:
    graph = StateGraph()
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", "tools")
    graph.add_edge("tools", END)
    return graph


async def test_tool_node_by_name_is_resolved_per_graph_without_changing_the_agent() -> None:
    recorder = Recorder()
    agent = Agent(FunctionModel(recorder), tool_node="tools")
    first = graph_with_tools(agent, Tools("alpha")).compile()
    second = graph_with_tools(agent, Tools("beta", "gamma")).compile()
    await first.ainvoke(inp("hi"))
    assert offered(recorder) == ["alpha"]
    await second.ainvoke(inp("hi"))
    assert offered(recorder) == ["beta", "gamma"]
    await first.ainvoke(inp("hi"))
    assert offered(recorder) == ["alpha"]
    assert agent.tool_node == "tools"
    assert agent._tools is None


def test_an_unknown_tool_node_name_fails_at_compile() -> None:
    graph = StateGraph()
    graph.add_node("agent", Agent("test", tool_node="toolz"))
    graph.add_edge(START, "agent")
    with pytest.raises(GraphError) as info:
        graph.compile()
    assert info.value.error_code == "GRAPH_005"
    assert "toolz" in str(info.value)


def test_a_tool_node_name_that_is_not_a_tool_node_fails_at_compile() -> None:
    def plain(state: AgentState) -> None:
        return None

    with pytest.raises(GraphError) as info:
        graph_with_tools(Agent("test", tool_node="tools"), plain).compile()
    assert info.value.error_code == "GRAPH_006"
    assert "function" in str(info.value)


async def test_the_test_model_calls_the_tools_it_is_offered() -> None:
    result = await linear(("agent", Agent("test", tool_node=Tools("search")))).ainvoke(inp("hi"))
    (call,) = result["messages"][-1].tool_call_blocks()
    assert call.name == "search"
    assert call.args == {"q": "a"}


# -- structured output ----------------------------------------------------------------------


class Forecast(BaseModel):
    city: str
    high: int


async def test_output_schema_fills_parsed_content() -> None:
    recorder = Recorder('{"city": "Oslo", "high": 4}')
    agent = Agent(FunctionModel(recorder), output_schema=Forecast)
    result = await linear(("agent", agent)).ainvoke(inp("forecast?"))
    answer = result["messages"][-1]
    assert answer.parsed_content == Forecast(city="Oslo", high=4)
    assert "parse_error" not in answer.metadata
    assert recorder.info.output_schema is Forecast


async def test_an_answer_that_never_matches_the_schema_raises_after_one_correction() -> None:
    recorder = Recorder("it will be sunny")
    agent = Agent(FunctionModel(recorder), output_schema=Forecast)
    with pytest.raises(OutputValidationError) as info:
        await linear(("agent", agent)).ainvoke(inp("forecast?"))
    assert info.value.error_code == "OUTPUT_001"
    assert info.value.raw_text == "it will be sunny"
    assert info.value.errors[0]["type"] == "json_invalid"
    assert len(recorder.calls) == 2  # output_retries=1: one correction asked for
    retry = recorder.calls[1][0]
    assert [m.role for m in retry[-2:]] == ["assistant", "user"]
    assert "Invalid JSON" in retry[-1].text()


async def test_output_schema_under_astream_parses_the_final_message() -> None:
    agent = Agent(FunctionModel(Recorder('{"city": "Rome", "high": 30}')), output_schema=Forecast)
    chunks = [c async for c in linear(("agent", agent)).astream(inp("forecast?"))]
    final = chunks[-1].message
    assert final is not None
    assert not final.delta
    assert final.parsed_content == Forecast(city="Rome", high=30)


async def test_output_schema_over_litellm(openai_api: respx.Route) -> None:
    openai_api.mock(
        return_value=httpx.Response(200, json=completion('{"city": "Oslo", "high": 4}'))
    )
    agent = Agent("openai/gpt-4o-mini", api_key=KEY, output_schema=Forecast)
    answer = (await linear(("agent", agent)).ainvoke(inp("forecast?")))["messages"][-1]
    assert answer.parsed_content == Forecast(city="Oslo", high=4)
    response_format = sent(openai_api)["response_format"]
    assert response_format["type"] == "json_schema"
    assert set(response_format["json_schema"]["schema"]["properties"]) == {"city", "high"}


# -- streaming ------------------------------------------------------------------------------


def described(chunks: list[StreamChunk]) -> list[tuple[str, str, bool]]:
    return [
        (c.message.role, c.message.text(), c.message.delta)
        for c in chunks
        if c.event == "message" and c.message is not None
    ]


async def test_astream_streams_deltas_then_the_final_message_which_alone_is_stored(
    openai_api: respx.Route,
) -> None:
    openai_api.mock(return_value=sse_text("Hel", "lo ", "there"))
    checkpointer = InMemoryCheckpointer()
    app = linear(("agent", Agent("openai/gpt-4o-mini", api_key=KEY)), checkpointer=checkpointer)
    config = {"thread_id": "stream"}
    chunks = [c async for c in app.astream(inp("hi"), config)]
    assert described(chunks) == [
        ("user", "hi", False),
        ("assistant", "Hel", True),
        ("assistant", "lo ", True),
        ("assistant", "there", True),
        ("assistant", "Hello there", False),
    ]
    messages = [c.message for c in chunks if c.message is not None]
    assert len({m.message_id for m in messages[1:]}) == 1
    final = messages[-1]
    assert final.usages is not None
    assert final.usages.prompt_tokens == 9
    body = sent(openai_api)
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert openai_api.call_count == 1
    state = await app.aget_state(config)
    assert state is not None
    assert [(m.role, m.text(), m.delta) for m in state.context] == [
        ("user", "hi", False),
        ("assistant", "Hello there", False),
    ]


async def test_astream_with_the_offline_model_streams_too() -> None:
    agent = Agent(FunctionModel(Recorder("one two three four")))
    chunks = [c async for c in linear(("agent", agent)).astream(inp("hi"))]
    assert described(chunks) == [
        ("user", "hi", False),
        ("assistant", "one two ", True),
        ("assistant", "three four", True),
        ("assistant", "one two three four", False),
    ]


# -- usage ----------------------------------------------------------------------------------


async def test_token_usage_in_the_result_sums_the_answers_usages() -> None:
    def answer(prompt: int, completion: int, reasoning: int) -> Message:
        message = Message.text_message("x", "assistant")
        message.usages = TokenUsages(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=prompt + completion,
            reasoning_tokens=reasoning,
        )
        return message

    first = Agent(FunctionModel(lambda m, i: answer(10, 3, 1)))
    second = Agent(FunctionModel(lambda m, i: answer(20, 7, 0)))
    result = await linear(("first", first), ("second", second)).ainvoke(inp("hi"))
    assert result["token_usage"] == {
        "total_input_tokens": 30,
        "total_output_tokens": 10,
        "total_reasoning_tokens": 1,
        "total_tokens": 40,
        "total_cache_read_tokens": 0,
        "total_cache_write_tokens": 0,
        "model_calls": 2,
        "cost": 0.0,  # an offline model costs nothing
        "unpriced_calls": 0,
    }


async def test_token_usage_from_a_provider(openai_api: respx.Route) -> None:
    openai_api.mock(return_value=httpx.Response(200, json=completion()))
    result = await linear(("agent", Agent("openai/gpt-4o-mini", api_key=KEY))).ainvoke(inp("hi"))
    assert result["token_usage"] == {
        "total_input_tokens": 12,
        "total_output_tokens": 5,
        "total_reasoning_tokens": 2,
        "total_tokens": 17,
        "total_cache_read_tokens": 0,
        "total_cache_write_tokens": 0,
        "model_calls": 1,
        "cost": pytest.approx(12 * 1.5e-7 + 5 * 6e-7),  # litellm's prices for gpt-4o-mini
        "unpriced_calls": 0,
    }


# -- errors, retries, fallbacks -------------------------------------------------------------


async def test_a_provider_error_surfaces_as_our_exception(
    openai_api: respx.Route, slept: list[float]
) -> None:
    openai_api.mock(return_value=httpx.Response(401, json={"error": {"message": "bad key"}}))
    app = linear(("agent", Agent("openai/gpt-4o-mini", api_key=KEY)))
    with pytest.raises(ModelAuthError) as info:
        await app.ainvoke(inp("hi"))
    assert info.value.status_code == 401
    assert info.value.error_code == "MODEL_AUTH_001"
    assert openai_api.call_count == 1  # 401 is not retried
    assert slept == []


async def test_a_provider_error_under_astream_is_an_error_chunk_then_the_exception(
    openai_api: respx.Route,
) -> None:
    openai_api.mock(return_value=httpx.Response(401, json={"error": {"message": "bad key"}}))
    app = linear(("agent", Agent("openai/gpt-4o-mini", api_key=KEY)))
    chunks: list[StreamChunk] = []
    with pytest.raises(ModelAuthError):
        await drain(app.astream(inp("hi")), chunks)
    assert [c.event for c in chunks] == ["message", "error"]
    assert chunks[-1].data is not None
    assert chunks[-1].data["error_code"] == "MODEL_AUTH_001"
    assert chunks[-1].data["error_type"] == "ModelAuthError"


async def test_a_rate_limit_is_retried_after_the_providers_retry_after(
    openai_api: respx.Route, slept: list[float]
) -> None:
    openai_api.mock(
        side_effect=[
            httpx.Response(429, json={"error": {"message": "slow"}}, headers={"retry-after": "7"}),
            httpx.Response(200, json=completion("finally")),
        ]
    )
    app = linear(("agent", Agent("openai/gpt-4o-mini", api_key=KEY)))
    result = await app.ainvoke(inp("hi"))
    assert result["messages"][-1].text() == "finally"
    assert openai_api.call_count == 2
    assert slept == [7.0]


async def test_fallback_models_take_over_when_the_primary_keeps_failing(
    slept: list[float],
) -> None:
    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        model = json.loads(request.content)["model"]
        asked.append(model)
        if model == "gpt-4o-mini":
            return httpx.Response(503, json={"error": {"message": "overloaded"}})
        return httpx.Response(200, json=completion("from the fallback", model=model))

    agent = Agent(
        "openai/gpt-4o-mini",
        api_key=KEY,
        fallback_models=["openai/gpt-4o"],
        retry_config=RetryConfig(max_retries=2, initial_delay=0.5),
    )
    routes = agent._routes
    app = linear(("agent", agent))
    with respx.mock(using="httpx") as mock:
        mock.post(OPENAI_URL).mock(side_effect=answer)
        result = await app.ainvoke(inp("hi"))
        final = result["messages"][-1]
        assert final.text() == "from the fallback"
        assert final.metadata["model"] == "gpt-4o"
        assert asked == ["gpt-4o-mini"] * 3 + ["gpt-4o"]
        assert slept == [0.5, 1.0]
        asked.clear()
        await app.ainvoke(inp("again"))
        assert asked == ["gpt-4o-mini"] * 3 + ["gpt-4o"]  # each call starts at the primary
    assert agent._routes is routes
    assert agent.model == "openai/gpt-4o-mini"
    assert agent.fallback_models == ["openai/gpt-4o"]


# -- reasoning ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "settings"),
    [
        (None, {}),
        (False, {}),
        (True, {"reasoning_effort": "medium"}),
        ({"effort": "low"}, {"reasoning_effort": "low"}),
        ({"budget_tokens": 2048}, {"thinking": {"type": "enabled", "budget_tokens": 2048}}),
    ],
)
async def test_reasoning_config_becomes_provider_settings(
    config: Any, settings: dict[str, Any]
) -> None:
    recorder = Recorder()
    agent = Agent(FunctionModel(recorder), reasoning_config=config, temperature=1)
    await linear(("agent", agent)).ainvoke(inp("hi"))
    assert recorder.info.settings == {"temperature": 1, **settings}


async def test_reasoning_effort_reaches_an_openai_reasoning_model(openai_api: respx.Route) -> None:
    openai_api.mock(return_value=httpx.Response(200, json=completion(model="o3-mini")))
    agent = Agent("openai/o3-mini", api_key=KEY, reasoning_config={"effort": "low"})
    await linear(("agent", agent)).ainvoke(inp("hi"))
    assert sent(openai_api)["reasoning_effort"] == "low"


async def test_reasoning_effort_on_a_model_without_reasoning_is_a_request_error(
    openai_api: respx.Route, slept: list[float]
) -> None:
    agent = Agent("openai/gpt-4o-mini", api_key=KEY, reasoning_config={"effort": "low"})
    with pytest.raises(ModelRequestError, match="reasoning_effort"):
        await linear(("agent", agent)).ainvoke(inp("hi"))
    assert openai_api.call_count == 0
    assert slept == []


async def test_thinking_budget_reaches_anthropic_and_the_signed_thinking_comes_back() -> None:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "Let me think.", "signature": "sig=="},
            {"type": "text", "text": "Done."},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    agent = Agent(
        "anthropic/claude-sonnet-4-5",
        api_key="sk-ant-test",
        reasoning_config={"budget_tokens": 2048},
    )
    with respx.mock(using="httpx") as mock:
        route = mock.post(ANTHROPIC_URL).mock(return_value=httpx.Response(200, json=message))
        result = await linear(("agent", agent)).ainvoke(inp("hi"))
    assert sent(route)["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    answer = result["messages"][-1]
    assert answer.text() == "Done."
    assert answer.reasoning == "Let me think."
    assert answer.content[0].signature == "sig=="  # type: ignore[union-attr]
    assert answer.metadata["provider"] == "anthropic"


# -- a small loop ---------------------------------------------------------------------------


async def test_an_agent_answering_with_tool_calls_and_text_over_turns() -> None:
    """FunctionModel deciding from the history: a tool call first, then an answer."""

    def decide(messages: list[Message], info: ModelInfo) -> Any:
        if any(m.role == "tool" for m in messages):
            return "done"
        return [ToolCallBlock(id="c1", name="search", args={"q": "x"})]

    def run_tools(state: AgentState) -> Message:
        (call,) = state.context[-1].tool_call_blocks()
        from tenxgraph.core.state.message_block import ToolResultBlock

        return Message.tool_message([ToolResultBlock(call_id=call.id, output="found")])

    graph = StateGraph()
    graph.add_node("agent", Agent(FunctionModel(decide)))
    graph.add_node("tools", run_tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges(
        "agent", lambda s: "tools" if s.context[-1].has_tool_calls() else END
    )
    graph.add_edge("tools", "agent")
    result = await graph.compile().ainvoke(inp("hi"), response_granularity="partial")
    assert [(m.role, m.has_tool_calls()) for m in result["context"]] == [
        ("user", False),
        ("assistant", True),
        ("tool", False),
        ("assistant", False),
    ]
    assert result["context"][-1].text() == "done"


def test_the_sync_api_calls_litellm_from_its_own_loop_thread(openai_api: respx.Route) -> None:
    """`invoke`/`stream` run the graph on a private event-loop thread; litellm's clients are
    cached per loop, so the same app must work there, and again on a second call."""
    openai_api.mock(return_value=httpx.Response(200, json=completion("sync hello")))
    app = linear(("agent", Agent("openai/gpt-4o-mini", api_key=KEY)))
    assert app.invoke(inp("hi"))["messages"][-1].text() == "sync hello"
    openai_api.mock(return_value=sse_text("a ", "b"))
    pieces = [c.message.text() for c in app.stream(inp("again")) if c.message and c.message.delta]
    assert "".join(pieces) == "a b"
    assert openai_api.call_count == 2


class Hangs:
    """A model that starts streaming and then never sends another piece."""

    def __init__(self) -> None:
        self.closed = False
        self.started = asyncio.Event()

    async def acomplete(self, request: Any) -> Message:
        raise AssertionError("streamed only")

    async def astream(self, request: Any) -> AsyncIterator[Message]:
        try:
            yield Message.text_message("thinking", "assistant", "h", delta=True)
            self.started.set()
            await asyncio.Event().wait()
            yield Message.text_message("never", "assistant", "h")
        finally:
            self.closed = True


async def test_node_timeout_stops_a_hung_model_stream_and_closes_it() -> None:
    model = Hangs()
    app = linear(("agent", Agent(model, retry_config=False)))
    chunks: list[StreamChunk] = []
    with pytest.raises(NodeTimeoutError):
        await drain(app.astream(inp("hi"), {"node_timeout": 0.05}), chunks)
    assert [c.message.text() for c in chunks if c.message and c.message.delta] == ["thinking"]
    assert model.closed


async def test_stop_cancels_a_model_stream_and_closes_it() -> None:
    model = Hangs()
    app = linear(("agent", Agent(model, retry_config=False)), checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "stop-me"}

    async def consume() -> list[StreamChunk]:
        return [c async for c in app.astream(inp("hi"), config)]

    task = asyncio.create_task(consume())
    await model.started.wait()
    assert (await app.astop(config))["ok"] is True
    await task
    assert model.closed
    state = await app.aget_state(config)
    assert state is not None
    assert [m.role for m in state.context] == ["user"]  # nothing half-streamed was stored


async def test_two_agents_in_parallel_stream_interleaved_and_both_answers_are_kept() -> None:
    graph = StateGraph()
    graph.add_node("a", Agent(FunctionModel(lambda m, i: "from a, a long answer")))
    graph.add_node("b", Agent(FunctionModel(lambda m, i: "from b, another answer")))
    graph.add_edge(START, "a")
    graph.add_edge(START, "b")
    graph.add_edge("a", END)
    graph.add_edge("b", END)
    app = graph.compile(checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "both"}
    deltas: dict[Any, list[str]] = {}
    async for chunk in app.astream(inp("go"), config):
        if chunk.message is not None and chunk.message.delta:
            deltas.setdefault(chunk.message.message_id, []).append(chunk.message.text())
    assert sorted("".join(v) for v in deltas.values()) == [
        "from a, a long answer",
        "from b, another answer",
    ]
    state = await app.aget_state(config)
    assert state is not None
    assert sorted(m.text() for m in state.context if m.role == "assistant") == [
        "from a, a long answer",
        "from b, another answer",
    ]
    assert not any(m.delta for m in state.context)


# -- ainvoke: the Agent answers in one piece --------------------------------------------------


class HangsWhole:
    """A model whose non-streamed call never returns."""

    def __init__(self) -> None:
        self.cancelled = False

    async def acomplete(self, request: Any) -> Message:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        raise AssertionError("unreachable")

    def astream(self, request: Any) -> AsyncIterator[Message]:
        raise AssertionError("not streamed")


async def test_node_timeout_stops_a_hung_model_call_under_ainvoke() -> None:
    model = HangsWhole()
    app = linear(("agent", Agent(model, retry_config=False)))
    with pytest.raises(NodeTimeoutError, match="agent"):
        await app.ainvoke(inp("hi"), {"node_timeout": 0.05})
    assert model.cancelled


async def test_ainvoke_and_astream_store_the_same_answer() -> None:
    recorder = Recorder("the answer")
    app = linear(("agent", Agent(FunctionModel(recorder))), checkpointer=InMemoryCheckpointer())
    whole = await app.ainvoke(inp("hi"), {"thread_id": "whole"})
    async for _ in app.astream(inp("hi"), {"thread_id": "streamed"}):
        pass
    kept = [await app.aget_state({"thread_id": t}) for t in ("whole", "streamed")]
    assert [m.text() for m in whole["messages"]] == ["hi", "the answer"]
    for state in kept:
        assert state is not None
        assert [(m.role, m.text()) for m in state.context] == [
            ("user", "hi"),
            ("assistant", "the answer"),
        ]


async def test_an_agent_subclass_with_its_own_call_runs_through_it_under_ainvoke() -> None:
    class Polite(Agent):
        async def __call__(self, state: AgentState, config: dict[str, Any]) -> AsyncIterator[Any]:
            async for item in super().__call__(state, config):
                if isinstance(item, Message) and not item.delta:
                    item.content[0].text += ", please"  # type: ignore[union-attr]
                yield item

    app = linear(("agent", Polite(FunctionModel(Recorder("sit down")))))
    result = await app.ainvoke(inp("hi"))
    assert result["messages"][-1].text() == "sit down, please"
