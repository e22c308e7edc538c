"""OpenTelemetry traces of runs, checked with the SDK's in-memory exporter: the span tree (run,
nodes, model calls, tool calls), the GenAI attributes, contents only when asked and never a
credential, errors, parallel nodes, a resume in another process, and no cost without a
provider."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import tenxgraph
from tenxgraph.core.exceptions import ModelAuthError, NodeError
from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import AgentState, Message, ToolCallBlock
from tenxgraph.observability import CONTENT_ENV, Tracing
from tenxgraph.observability.settings import tracer_for
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import interrupt
from tenxgraph.utils.constants import END, START
from tests.core.llm._support import USAGE_EVENT, event, sse
from tests.observability import _resume_worker
from tests.providers.test_agent_end_to_end import QUESTION, WeatherTools, build_app, full_providers
from tests.providers.test_transcripts import KEY_ENVS, SECRET, Provider

KEY = "sk-otel-test-5f2c9a0b7d1e4f3a"


# -- setup -----------------------------------------------------------------------------------


class Traced:
    """A tracer provider of our own, its spans kept in memory."""

    def __init__(self, record_content: bool | None = None) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracing = Tracing(tracer_provider=self.provider, record_content=record_content)

    @property
    def spans(self) -> Sequence[ReadableSpan]:
        return self.exporter.get_finished_spans()

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, [s.name for s in self.spans]
        return found[0]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        """`parent`'s children, in the order they started."""
        own = parent.context.span_id  # type: ignore[union-attr]
        found = [s for s in self.spans if s.parent is not None and s.parent.span_id == own]
        return sorted(found, key=lambda s: s.start_time or 0)

    def root(self) -> ReadableSpan:
        roots = [s for s in self.spans if s.parent is None]
        assert len(roots) == 1, [s.name for s in roots]
        return roots[0]

    def everything(self) -> str:
        """Every attribute, event and status text of every span, as one string."""
        parts: list[str] = []
        for span in self.spans:
            parts.append(span.name)
            parts.append(json.dumps(dict(span.attributes or {}), default=str))
            for item in span.events:
                parts.append(json.dumps(dict(item.attributes or {}), default=str))
            parts.append(span.status.description or "")
        return "\n".join(parts)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@pytest.fixture(autouse=True)
def no_content_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Content recording as the test sets it, not as the developer's shell does (model
    retries do not wait: the package's `slept`)."""
    monkeypatch.delenv(CONTENT_ENV, raising=False)


def inp(text: str) -> dict[str, Any]:
    return {"messages": [Message.text_message(text)]}


def two_lookups(messages: list[Message], info: ModelInfo) -> Any:
    """Asks for two lookups at once, then answers from their results."""
    if messages[-1].role == "tool":
        return "Paris is sunny and Rome is warm."
    return [
        ToolCallBlock(id="call_1", name="lookup", args={"city": "Paris"}),
        ToolCallBlock(id="call_2", name="lookup", args={"city": "Rome"}),
    ]


def lookup(city: str) -> str:
    """The weather in `city`."""
    return f"{city}: fine"


def react(traced: Traced, model: Any = None, tools: Sequence[Any] = (lookup,)) -> Any:
    agent = ReactAgent(model or FunctionModel(two_lookups), list(tools))
    return agent.compile(name="weather", tracing=traced.tracing)


async def run(app: Any, text: str, streamed: bool, config: dict[str, Any] | None = None) -> None:
    config = config or {"thread_id": "t"}
    if streamed:
        async for _ in app.astream(inp(text), config):
            pass
    else:
        await app.ainvoke(inp(text), config)


# -- 1. the tree of a ReAct run ------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True], ids=["ainvoke", "astream"])
async def test_a_react_run_is_one_tree_of_run_nodes_model_and_tool_calls(streamed: bool) -> None:
    traced = Traced()
    await run(react(traced), "weather?", streamed)

    root = traced.root()
    assert root.name == "invoke_agent weather"
    assert attrs(root)["gen_ai.operation.name"] == "invoke_agent"
    assert attrs(root)["tenxgraph.status"] == "completed"
    assert attrs(root)["tenxgraph.model_calls"] == 2
    nodes = traced.children(root)
    assert [n.name for n in nodes] == ["node agent", "node tools", "node agent"]

    for node in (nodes[0], nodes[2]):
        (chat,) = traced.children(node)
        assert chat.name == "chat function"
        assert chat.kind == SpanKind.CLIENT
        a = attrs(chat)
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.request.stream"] is streamed
        assert a["gen_ai.usage.input_tokens"] > 0
        assert a["gen_ai.usage.output_tokens"] > 0
        assert ("gen_ai.response.time_to_first_chunk" in a) is streamed
    assert attrs(traced.children(nodes[0])[0])["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert attrs(traced.children(nodes[2])[0])["gen_ai.response.finish_reasons"] == ("stop",)

    tools = traced.children(nodes[1])
    assert [t.name for t in tools] == ["execute_tool lookup"] * 2
    assert {attrs(t)["gen_ai.tool.call.id"] for t in tools} == {"call_1", "call_2"}
    for tool_span in tools:
        assert attrs(tool_span)["gen_ai.tool.name"] == "lookup"
        assert attrs(tool_span)["tenxgraph.tool.replayed"] is False
        assert tool_span.status.status_code != StatusCode.ERROR

    chats = traced.named("chat function")
    total_in = sum(attrs(c)["gen_ai.usage.input_tokens"] for c in chats)
    assert attrs(root)["gen_ai.usage.input_tokens"] == total_in
    assert len(traced.spans) == 1 + 3 + 2 + 2
    assert {s.context.trace_id for s in traced.spans} == {root.context.trace_id}  # type: ignore[union-attr]


# -- 2. a real provider (litellm over mocked HTTP) -------------------------------------------


def completion(content: str = "Hello") -> dict[str, Any]:
    return {
        "id": "chatcmpl-otel",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }


def streamed_answer(*pieces: str) -> httpx.Response:
    events = [event({"role": "assistant", "content": ""})]
    events += [event({"content": p}) for p in pieces]
    return sse(*events, event({}, "stop"), USAGE_EVENT)


def openai_app(traced: Traced, **options: Any) -> Any:
    graph = StateGraph()
    graph.add_node("agent", Agent("openai/gpt-4o-mini", api_key=KEY, temperature=0.3, **options))
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile(name="chat", tracing=traced.tracing)


@pytest.mark.parametrize("record_content", [None, True], ids=["default", "content"])
@pytest.mark.parametrize("streamed", [False, True], ids=["ainvoke", "astream"])
async def test_an_openai_call_has_the_genai_attributes_and_never_the_key(
    openai_api: respx.Route, streamed: bool, record_content: bool | None
) -> None:
    if streamed:
        openai_api.mock(return_value=streamed_answer("Hel", "lo"))
    else:
        openai_api.mock(return_value=httpx.Response(200, json=completion()))
    traced = Traced(record_content)
    await run(openai_app(traced, max_tokens=50), "hi", streamed)

    chat = traced.one("chat gpt-4o-mini")
    a = attrs(chat)
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == "gpt-4o-mini"
    assert a["gen_ai.response.model"].startswith("gpt-4o-mini")
    assert a["gen_ai.request.temperature"] == 0.3
    assert a["gen_ai.request.max_tokens"] == 50
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    usage = (9, 4) if streamed else (12, 5)
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == usage
    assert ("gen_ai.response.time_to_first_chunk" in a) is streamed
    if streamed:
        assert a["gen_ai.response.time_to_first_chunk"] >= 0
    assert ("gen_ai.output.messages" in a) is bool(record_content)
    assert openai_api.calls[0].request.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in traced.everything()
    assert KEY[-8:] not in traced.everything()


PROVIDER_NAMES = {"openai": "openai", "anthropic": "anthropic", "gemini": "gcp.gemini"}


@pytest.mark.parametrize("streamed", [False, True], ids=["ainvoke", "astream"])
@pytest.mark.parametrize("provider", full_providers(), ids=lambda p: p.name)
async def test_every_recorded_provider_gives_the_same_tree(
    provider: Provider, streamed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tool loop of tests/providers, over each provider's transcripts, traced with
    contents recorded: the tree, the provider's conventional name, and never the key."""
    for name in KEY_ENVS:
        monkeypatch.delenv(name, raising=False)
    calls_case = provider.case("stream_tools" if streamed else "parallel_tools")
    text_case = provider.case("stream_text" if streamed else "plain")
    traced = Traced(record_content=True)
    app = build_app(provider, WeatherTools(), tracing=traced.tracing)
    with respx.mock(using="httpx") as mock:
        provider.route(mock).mock(
            side_effect=[calls_case.http_response(), text_case.http_response()]
        )
        await run(app, QUESTION, streamed)

    nodes = traced.children(traced.root())
    assert [n.name for n in nodes] == ["node agent", "node tools", "node agent"]
    calls = len(calls_case.expect["tool_calls"])
    assert [t.name.split()[0] for t in traced.children(nodes[1])] == ["execute_tool"] * calls
    wire, bare = provider.model.split("/", 1)
    for node in (nodes[0], nodes[2]):
        (chat,) = traced.children(node)
        a = attrs(chat)
        assert chat.name == f"chat {bare}"
        assert a["gen_ai.request.model"] == bare
        if wire in PROVIDER_NAMES:
            assert a["gen_ai.provider.name"] == PROVIDER_NAMES[wire]
        assert a["gen_ai.usage.input_tokens"] > 0
        assert ("gen_ai.response.time_to_first_chunk" in a) is streamed
    assert SECRET not in traced.everything()


# -- 3. contents -------------------------------------------------------------------------------

CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
)


def recorded(traced: Traced) -> set[str]:
    return {k for s in traced.spans for k in attrs(s) if k in CONTENT_KEYS}


async def test_contents_are_not_recorded_by_default() -> None:
    traced = Traced()
    await run(react(traced), "weather in Paris?", False)
    assert recorded(traced) == set()
    assert "Paris" not in traced.everything()


async def test_contents_are_recorded_when_asked() -> None:
    traced = Traced(record_content=True)
    await run(react(traced), "weather in Paris?", False)
    assert recorded(traced) == set(CONTENT_KEYS)
    first_chat = traced.children(traced.children(traced.root())[0])[0]
    asked = json.loads(attrs(first_chat)["gen_ai.input.messages"])
    assert asked[-1]["role"] == "user"
    assert asked[-1]["parts"][0]["text"] == "weather in Paris?"
    (paris,) = [t for t in traced.named("execute_tool lookup") if "call_1" in str(attrs(t))]
    assert json.loads(attrs(paris)["gen_ai.tool.call.arguments"]) == {"city": "Paris"}
    assert "Paris: fine" in attrs(paris)["gen_ai.tool.call.result"]


@pytest.mark.parametrize("value", ["true", "True", "1"])
async def test_the_genai_environment_variable_turns_contents_on(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(CONTENT_ENV, value)
    traced = Traced()
    await run(react(traced), "weather?", False)
    assert recorded(traced) == set(CONTENT_KEYS)


async def test_the_environment_variable_does_not_override_record_content_false(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CONTENT_ENV, "true")
    traced = Traced(record_content=False)
    await run(react(traced), "weather?", False)
    assert recorded(traced) == set()


async def test_a_known_credential_is_redacted_from_recorded_contents(
    openai_api: respx.Route,
) -> None:
    """The Agent's api_key, in the user's text, in a tool's arguments and in its result."""
    openai_api.mock(return_value=httpx.Response(200, json=completion(f"Your key is {KEY}")))
    traced = Traced(record_content=True)
    await run(openai_app(traced), f"remember {KEY}", False)
    assert "gen_ai.input.messages" in attrs(traced.one("chat gpt-4o-mini"))
    assert KEY not in traced.everything()
    assert "[REDACTED" in attrs(traced.one("chat gpt-4o-mini"))["gen_ai.input.messages"]

    def leak(messages: list[Message], info: ModelInfo) -> Any:
        if messages[-1].role == "tool":
            return "done"
        return ToolCallBlock(id="call_1", name="store", args={"token": KEY})

    def store(token: str) -> str:
        """Keep a token."""
        return f"stored {token}"

    traced = Traced(record_content=True)
    await run(react(traced, FunctionModel(leak), [store]), "keep it", False)
    tool_span = traced.one("execute_tool store")
    assert "[REDACTED" in attrs(tool_span)["gen_ai.tool.call.arguments"]
    assert "[REDACTED" in attrs(tool_span)["gen_ai.tool.call.result"]
    assert KEY not in traced.everything()


# -- 4. errors ---------------------------------------------------------------------------------


async def test_a_failing_node_marks_its_span_and_the_run_span_as_errors() -> None:
    def broken(state: AgentState) -> None:
        raise ValueError(f"bad input near {KEY}")

    Agent("openai/gpt-4o-mini", api_key=KEY)  # makes KEY a known credential
    graph = StateGraph()
    graph.add_node("broken", broken)
    graph.add_edge(START, "broken")
    graph.add_edge("broken", END)
    traced = Traced()
    app = graph.compile(tracing=traced.tracing)
    with pytest.raises(NodeError):
        await app.ainvoke(inp("go"), {"thread_id": "t"})

    root = traced.root()
    (node,) = traced.children(root)
    assert node.name == "node broken"
    assert node.status.status_code == StatusCode.ERROR
    assert attrs(node)["error.type"] == "ValueError"  # what the node raised
    assert [e.name for e in node.events] == ["exception"]
    assert root.status.status_code == StatusCode.ERROR
    assert attrs(root)["tenxgraph.status"] == "error"
    assert attrs(root)["error.type"] == "NodeError"  # what the caller got
    assert KEY not in traced.everything()


async def test_a_raising_tool_marks_its_span_and_the_run_goes_on() -> None:
    def flaky(city: str) -> str:
        """The weather, unless it is Rome."""
        if city == "Rome":
            raise RuntimeError("no data for Rome")
        return f"{city}: fine"

    flaky.__name__ = "lookup"
    traced = Traced()
    await run(react(traced, tools=[flaky]), "weather?", False)

    root = traced.root()
    assert attrs(root)["tenxgraph.status"] == "completed"
    assert root.status.status_code != StatusCode.ERROR
    spans = {attrs(s)["gen_ai.tool.call.id"]: s for s in traced.named("execute_tool lookup")}
    assert spans["call_2"].status.status_code == StatusCode.ERROR
    assert spans["call_1"].status.status_code != StatusCode.ERROR
    assert [n.name for n in traced.children(root)] == ["node agent", "node tools", "node agent"]


@pytest.mark.parametrize("streamed", [False, True], ids=["ainvoke", "astream"])
async def test_a_retried_model_call_has_a_span_per_attempt(
    openai_api: respx.Route, streamed: bool
) -> None:
    openai_api.side_effect = [
        httpx.Response(500, json={"error": {"message": "try later", "type": "server_error"}}),
        streamed_answer("Hello", " you") if streamed else httpx.Response(200, json=completion()),
    ]
    traced = Traced()
    await run(openai_app(traced), "hi", streamed)

    (node,) = traced.children(traced.root())
    first, second = traced.children(node)
    assert first.name == second.name == "chat gpt-4o-mini"
    assert first.status.status_code == StatusCode.ERROR
    assert "error.type" in attrs(first)
    assert second.status.status_code != StatusCode.ERROR
    assert attrs(second)["gen_ai.usage.output_tokens"] == (4 if streamed else 5)
    assert attrs(traced.root())["tenxgraph.model_calls"] == 1
    assert KEY not in traced.everything()


async def test_a_stream_that_breaks_after_its_first_piece_fails_its_chat_span() -> None:
    async def pieces(messages: list[Message], info: ModelInfo) -> Any:
        yield "Hel"
        raise ConnectionError("the connection dropped")

    graph = StateGraph()
    graph.add_node("agent", Agent(FunctionModel(lambda m, i: "unused", pieces, "broken")))
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    traced = Traced()
    with pytest.raises(NodeError):
        await run(graph.compile(tracing=traced.tracing), "hi", True)

    (node,) = traced.children(traced.root())
    (chat,) = traced.children(node)
    assert chat.status.status_code == StatusCode.ERROR
    assert attrs(chat)["error.type"] == "ConnectionError"
    assert "gen_ai.response.time_to_first_chunk" in attrs(chat)
    assert attrs(node)["error.type"] == "ConnectionError"
    assert attrs(traced.root())["tenxgraph.status"] == "error"


async def test_a_fallback_model_has_its_own_span(openai_api: respx.Route) -> None:
    openai_api.side_effect = [
        httpx.Response(500, json={"error": {"message": "down", "type": "server_error"}}),
    ]
    graph = StateGraph()
    agent = Agent(
        "openai/gpt-4o-mini",
        api_key=KEY,
        retry_config=False,
        fallback_models=[FunctionModel(lambda m, i: "from the fallback", model_name="spare")],
    )
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    traced = Traced()
    await run(graph.compile(tracing=traced.tracing), "hi", False)

    (node,) = traced.children(traced.root())
    first, second = traced.children(node)
    assert (first.name, second.name) == ("chat gpt-4o-mini", "chat spare")
    assert first.status.status_code == StatusCode.ERROR
    assert second.status.status_code != StatusCode.ERROR


async def test_a_provider_error_that_echoes_the_key_is_recorded_redacted(
    openai_api: respx.Route,
) -> None:
    message = f"Incorrect API key provided: {KEY}. You can find your API key at ..."
    openai_api.mock(
        return_value=httpx.Response(401, json={"error": {"message": message, "type": "auth"}})
    )
    traced = Traced(record_content=True)
    with pytest.raises(ModelAuthError):
        await run(openai_app(traced), "hi", False)

    chat = traced.one("chat gpt-4o-mini")
    assert chat.status.status_code == StatusCode.ERROR
    assert "Incorrect API key" in traced.everything()
    assert KEY not in traced.everything()
    assert KEY[-8:] not in traced.everything()


class Sleeper:
    """A node that says when it started, then waits until cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def __call__(self, state: AgentState) -> str:
        self.started.set()
        await asyncio.Event().wait()
        return "never"


def sleeper_app(traced: Traced, sleeper: Sleeper) -> Any:
    graph = StateGraph()
    graph.add_node("sleeper", sleeper)
    graph.add_edge(START, "sleeper")
    graph.add_edge("sleeper", END)
    return graph.compile(tracing=traced.tracing)


async def test_a_stopped_run_is_not_an_error() -> None:
    traced, sleeper = Traced(), Sleeper()
    app = sleeper_app(traced, sleeper)
    running = asyncio.create_task(app.ainvoke(inp("go"), {"thread_id": "t"}))
    await sleeper.started.wait()
    await app.astop({"thread_id": "t"})
    assert (await running)["interrupted"]["reason"] == "stop_requested"

    root = traced.root()
    assert attrs(root)["tenxgraph.status"] == "interrupted"
    (node,) = traced.children(root)
    assert attrs(node)["tenxgraph.stopped"] is True
    assert "error.type" not in attrs(node)
    assert all(s.status.status_code != StatusCode.ERROR for s in traced.spans)


async def test_a_cancelled_run_ends_its_spans_cancelled_not_failed() -> None:
    traced, sleeper = Traced(), Sleeper()
    running = asyncio.create_task(
        sleeper_app(traced, sleeper).ainvoke(inp("go"), {"thread_id": "t"})
    )
    await sleeper.started.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running

    root = traced.root()
    assert attrs(root)["tenxgraph.status"] == "cancelled"
    (node,) = traced.children(root)
    assert attrs(node)["tenxgraph.cancelled"] is True
    assert all(s.status.status_code != StatusCode.ERROR for s in traced.spans)


async def test_a_stream_left_early_ends_every_span() -> None:
    traced = Traced()
    app = react(traced, FunctionModel(lambda m, i: "a long answer in many small pieces"))
    stream = app.astream(inp("hi"), {"thread_id": "t"})
    async for chunk in stream:
        if chunk.message is not None and chunk.message.delta:
            break
    await stream.aclose()

    root = traced.root()
    assert attrs(root)["tenxgraph.status"] == "cancelled"
    (node,) = traced.children(root)
    (chat,) = traced.children(node)
    assert attrs(chat)["tenxgraph.cancelled"] is True
    assert all(s.status.status_code != StatusCode.ERROR for s in traced.spans)
    assert trace.get_current_span() is trace.INVALID_SPAN


# -- 5. parallel nodes -------------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True], ids=["ainvoke", "astream"])
async def test_parallel_nodes_each_hold_their_own_model_call(streamed: bool) -> None:
    graph = StateGraph()
    graph.add_node("left", Agent(FunctionModel(lambda m, i: "left", model_name="lm")))
    graph.add_node("right", Agent(FunctionModel(lambda m, i: "right", model_name="rm")))
    graph.add_edge(START, "left")
    graph.add_edge(START, "right")
    graph.add_edge("left", END)
    graph.add_edge("right", END)
    traced = Traced()
    await run(graph.compile(tracing=traced.tracing), "go", streamed)

    nodes = {n.name: n for n in traced.children(traced.root())}
    assert set(nodes) == {"node left", "node right"}
    assert [c.name for c in traced.children(nodes["node left"])] == ["chat lm"]
    assert [c.name for c in traced.children(nodes["node right"])] == ["chat rm"]


# -- 6. a pause and its resume in another process ------------------------------------------


def worker_env() -> dict[str, str]:
    """The environment of a worker: this tenxgraph and these tests importable."""
    src = str(Path(tenxgraph.__file__).resolve().parent.parent)
    root = str(Path(__file__).resolve().parent.parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([src, root])
    env.pop(CONTENT_ENV, None)
    return env


async def test_a_resumed_run_links_to_the_span_of_the_run_that_paused(tmp_path: Path) -> None:
    db = str(tmp_path / "threads.db")
    traced = Traced()
    app = _resume_worker.app_for(db, traced.tracing)
    paused = await app.ainvoke(inp("go"), {"thread_id": "t1"})
    await app.aclose()
    assert paused["interrupted"]["node"] == "ask"

    first = traced.root()
    assert attrs(first)["tenxgraph.status"] == "interrupted"
    assert attrs(first)["tenxgraph.interrupt.node"] == "ask"
    (node,) = traced.children(first)
    assert node.status.status_code != StatusCode.ERROR
    assert attrs(node)["tenxgraph.paused"] is True

    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        _resume_worker.__file__,
        db,
        "t1",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=worker_env(),
    )
    out, err = await asyncio.wait_for(worker.communicate(), 120)
    assert worker.returncode == 0, err.decode()
    report = json.loads(out.decode().strip().splitlines()[-1])
    assert report["answer"] == "told yes"
    (second,) = [s for s in report["spans"] if s["name"] == "invoke_agent approval"]
    assert second["attributes"]["tenxgraph.status"] == "completed"
    context = first.context
    assert context is not None
    assert second["links"] == [
        {
            "trace_id": format(context.trace_id, "032x"),
            "span_id": format(context.span_id, "016x"),
            "attributes": {"tenxgraph.link": "resumes"},
        }
    ]
    assert second["trace_id"] != format(context.trace_id, "032x")  # a trace of its own


async def test_a_tool_that_asks_a_person_is_paused_not_failed() -> None:
    def lookup(city: str) -> str:
        """The weather in `city`, once a person confirms Rome."""
        if city == "Rome":
            return f"Rome: {interrupt('look Rome up?')}"
        return f"{city}: fine"

    traced = Traced(record_content=True)
    app = react(traced, tools=[lookup])
    await run(app, "weather?", False)
    first = traced.root()
    assert attrs(first)["tenxgraph.status"] == "interrupted"
    spans = {attrs(s)["gen_ai.tool.call.id"]: s for s in traced.named("execute_tool lookup")}
    assert spans["call_2"].status.status_code != StatusCode.ERROR
    assert attrs(spans["call_2"])["tenxgraph.paused"] is True
    assert "gen_ai.tool.call.result" not in attrs(spans["call_2"])
    assert "tenxgraph.paused" not in attrs(spans["call_1"])

    traced.exporter.clear()
    await app.ainvoke({"resume": "sunny"}, {"thread_id": "t"})
    second = traced.root()
    assert attrs(second)["tenxgraph.status"] == "completed"
    assert [link.context.span_id for link in second.links] == [first.context.span_id]  # type: ignore[union-attr]
    spans = {attrs(s)["gen_ai.tool.call.id"]: s for s in traced.named("execute_tool lookup")}
    assert attrs(spans["call_1"])["tenxgraph.tool.replayed"] is True  # done before the pause
    assert "Rome: sunny" in attrs(spans["call_2"])["gen_ai.tool.call.result"]


@pytest.mark.parametrize("how", ["interrupt_before", "approval"])
async def test_a_breakpoint_or_an_approval_pause_is_traced_and_linked(how: str) -> None:
    traced = Traced()
    if how == "approval":
        agent = ReactAgent(FunctionModel(two_lookups), [lookup], requires_approval=True)
        app = agent.compile(tracing=traced.tracing)
    else:
        agent = ReactAgent(FunctionModel(two_lookups), [lookup])
        app = agent.compile(interrupt_before=["tools"], tracing=traced.tracing)
    config = {"thread_id": "t"}
    paused = await app.ainvoke(inp("weather?"), config)
    assert paused["interrupted"]["node"] == "tools"
    first = traced.root()
    assert attrs(first)["tenxgraph.status"] == "interrupted"
    assert traced.named("execute_tool lookup") == []

    traced.exporter.clear()
    approve = {"call_1": "approve", "call_2": "approve"}
    resume = {"resume": approve} if how == "approval" else None
    await app.ainvoke(resume, config)
    second = traced.root()
    assert attrs(second)["tenxgraph.status"] == "completed"
    assert [link.context.span_id for link in second.links] == [first.context.span_id]  # type: ignore[union-attr]
    assert len(traced.named("execute_tool lookup")) == 2


async def test_a_resume_links_only_to_the_run_that_paused_last() -> None:
    """Paused by a traced run, resumed and paused again by an untraced one: the run that
    resumes that second pause links to nothing, not to the first run."""

    def ask(state: AgentState) -> str:
        return f"{interrupt('first?')} {interrupt('second?')}"

    def app_for(tracing: Tracing | bool, store: Any) -> Any:
        graph = StateGraph()
        graph.add_node("ask", ask)
        graph.add_edge(START, "ask")
        graph.add_edge("ask", END)
        return graph.compile(checkpointer=store, tracing=tracing)

    traced, store = Traced(), InMemoryCheckpointer()
    config = {"thread_id": "t"}
    await app_for(traced.tracing, store).ainvoke(inp("go"), config)
    second = await app_for(False, store).ainvoke({"resume": "a"}, config)
    assert second["interrupted"]["node"] == "ask"
    traced.exporter.clear()
    done = await app_for(traced.tracing, store).ainvoke({"resume": "b"}, config)
    assert done["messages"][-1].text() == "a b"
    assert traced.root().links == ()


async def test_a_run_that_did_not_resume_a_pause_has_no_link() -> None:
    traced = Traced()
    app = react(traced)
    await run(app, "one", False)
    await run(app, "two", False)
    assert all(not s.links for s in traced.spans)


# -- 7. no tracing -----------------------------------------------------------------------------


async def test_disabled_tracing_makes_no_spans() -> None:
    traced = Traced()
    off = Tracing(tracer_provider=traced.provider, enabled=False)
    assert tracer_for(off) is None
    app = ReactAgent(FunctionModel(two_lookups), [lookup]).graph.compile(tracing=off)
    await run(app, "weather?", False)
    assert traced.spans == ()
    app = ReactAgent(FunctionModel(two_lookups), [lookup]).graph.compile(tracing=False)
    await run(app, "weather?", False)
    assert traced.spans == ()


def test_without_a_configured_provider_there_is_no_tracer() -> None:
    assert not isinstance(trace.get_tracer_provider(), TracerProvider), "a test set the global"
    assert tracer_for(Tracing()) is None


def run_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=worker_env(),
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


GRAPH = """
import asyncio, sys
from tenxgraph.core.graph import Agent, ToolNode
from tenxgraph.core.llm import TestModel
from tenxgraph.core.state import Message
from tenxgraph.prebuilt import ReactAgent, tools_condition
from tenxgraph.storage.checkpointer import InMemoryCheckpointer

def lookup(city: str) -> str:
    '''The weather in `city`.'''
    return city + ": fine"

async def go():
    app = ReactAgent(TestModel(), [lookup]).compile()
    out = await app.ainvoke({"messages": [Message.text_message("hi")]}, {"thread_id": "t"})
    assert out["messages"][-1].role == "assistant"
"""


def test_a_run_without_tracing_does_not_import_opentelemetry() -> None:
    code = GRAPH + "asyncio.run(go())\nprint([m for m in sys.modules if 'opentelemetry' in m])"
    assert run_python(code) == "[]"


def test_the_global_tracer_provider_is_used_when_set() -> None:
    code = GRAPH + (
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "exporter = InMemorySpanExporter()\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "trace.set_tracer_provider(provider)\n"
        "asyncio.run(go())\n"
        "print(sorted(s.name for s in exporter.get_finished_spans()))\n"
    )
    names = run_python(code)
    assert names == str(
        sorted(
            [
                "invoke_agent agent",  # a ReactAgent is named "agent"
                "node agent",
                "node tools",
                "node agent",
                "chat test",
                "chat test",
                "execute_tool lookup",
            ]
        )
    )


# -- 8. the user's own spans -------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True], ids=["ainvoke", "astream"])
async def test_a_span_opened_in_a_node_is_a_child_of_the_node_span(streamed: bool) -> None:
    traced = Traced()
    tracer = traced.provider.get_tracer("mine")

    def work(state: AgentState) -> Message:
        with tracer.start_as_current_span("my work"):
            return Message.text_message("done", "assistant")

    async def talk(state: AgentState) -> Any:
        with tracer.start_as_current_span("my talk"):
            yield Message.text_message("typing", "assistant", "m1", delta=True)
            with tracer.start_as_current_span("my inner talk"):
                pass
        yield Message.text_message("said", "assistant", "m1")

    graph = StateGraph()
    graph.add_node("work", work)
    graph.add_node("talk", talk)
    graph.add_edge(START, "work")
    graph.add_edge("work", "talk")
    graph.add_edge("talk", END)
    await run(graph.compile(tracing=traced.tracing), "go", streamed)

    work_node, talk_node = traced.children(traced.root())
    assert [c.name for c in traced.children(work_node)] == ["my work"]
    assert [c.name for c in traced.children(talk_node)] == ["my talk"]
    assert [c.name for c in traced.children(traced.one("my talk"))] == ["my inner talk"]


async def test_what_a_tool_does_is_under_its_execute_tool_span() -> None:
    """A span the tool opens (sync tools run in a thread, async ones in the loop), and a model
    call made by an agent the tool runs."""
    traced = Traced()
    tracer = traced.provider.get_tracer("mine")
    inner = react(traced, FunctionModel(lambda m, i: "inner answer", model_name="inner"))

    def lookup(city: str) -> str:
        """The weather in `city`."""
        with tracer.start_as_current_span(f"fetch {city}"):
            return f"{city}: fine"

    async def advise(city: str) -> str:
        """Advice for `city`, from another agent."""
        with tracer.start_as_current_span("advise"):
            out = await inner.ainvoke(inp(city), {"thread_id": "inner"})
            return str(out["messages"][-1].text())

    def model(messages: list[Message], info: ModelInfo) -> Any:
        if messages[-1].role == "tool":
            return "done"
        return [
            ToolCallBlock(id="call_1", name="lookup", args={"city": "Paris"}),
            ToolCallBlock(id="call_2", name="advise", args={"city": "Rome"}),
        ]

    await run(react(traced, FunctionModel(model), [lookup, advise]), "weather?", False)
    assert [c.name for c in traced.children(traced.one("execute_tool lookup"))] == ["fetch Paris"]
    (advice,) = traced.children(traced.one("execute_tool advise"))
    assert advice.name == "advise"
    (inner_run,) = traced.children(advice)
    assert inner_run.name == "invoke_agent weather"
    assert [n.name for n in traced.children(inner_run)] == ["node agent"]
    assert [c.name for c in traced.children(traced.children(inner_run)[0])] == ["chat inner"]


def test_a_sync_run_started_inside_a_user_span_is_its_child() -> None:
    """invoke and stream run the graph on a loop of their own: the caller's span goes along."""
    traced = Traced()
    app = react(traced)
    with traced.provider.get_tracer("mine").start_as_current_span("request"):
        app.invoke(inp("weather?"), {"thread_id": "t"})
        for _ in app.stream(inp("weather?"), {"thread_id": "t"}):
            pass
    runs = traced.children(traced.one("request"))
    assert [r.name for r in runs] == ["invoke_agent weather"] * 2


async def test_a_node_span_left_open_across_a_yield_is_closed_in_its_node() -> None:
    """The consumer leaves the stream while the node holds a span of its own open: the span
    ends as the node's child, and neither is left current for the consumer."""
    traced = Traced()
    tracer = traced.provider.get_tracer("mine")

    async def talk(state: AgentState) -> Any:
        with tracer.start_as_current_span("my talk"):
            yield Message.text_message("typing", "assistant", "m1", delta=True)
            yield Message.text_message("more", "assistant", "m1", delta=True)
        yield Message.text_message("said", "assistant", "m1")

    graph = StateGraph()
    graph.add_node("talk", talk)
    graph.add_edge(START, "talk")
    graph.add_edge("talk", END)
    stream = graph.compile(tracing=traced.tracing).astream(inp("go"), {"thread_id": "t"})
    async for chunk in stream:
        if chunk.message is not None and chunk.message.delta:
            break
    await stream.aclose()

    assert trace.get_current_span() is trace.INVALID_SPAN
    assert [c.name for c in traced.children(traced.one("node talk"))] == ["my talk"]


async def test_a_run_started_inside_a_user_span_is_its_child() -> None:
    traced = Traced()
    tracer = traced.provider.get_tracer("mine")
    app = react(traced)
    with tracer.start_as_current_span("request") as outer:
        await run(app, "weather?", False)
    request = traced.one("request")
    (run_span,) = traced.children(request)
    assert run_span.name == "invoke_agent weather"
    assert outer.get_span_context().span_id == request.context.span_id  # type: ignore[union-attr]
    assert trace.get_current_span() is trace.INVALID_SPAN  # nothing left attached


@pytest.mark.parametrize("record_content", [None, True], ids=["default", "content"])
async def test_only_sampling_settings_are_recorded_never_endpoints_or_headers(
    openai_api: respx.Route, record_content: bool | None
) -> None:
    openai_api.mock(return_value=httpx.Response(200, json=completion()))
    traced = Traced(record_content)
    app = openai_app(
        traced, extra_headers={"X-Tenant-Token": "tenant-token-5150"}, organization="org-7788"
    )
    await run(app, "hi", False)
    assert openai_api.calls[0].request.headers["x-tenant-token"] == "tenant-token-5150"
    recorded = traced.everything()
    assert "tenant-token-5150" not in recorded
    assert "org-7788" not in recorded
    assert attrs(traced.one("chat gpt-4o-mini"))["gen_ai.request.temperature"] == 0.3
