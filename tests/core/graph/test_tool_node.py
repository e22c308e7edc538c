"""ToolNode: results, concurrency, timeouts, return values, errors the model reads, injected
parameters, replay from the tool ledger, streamed progress, and the tools it offers.

The model side is a `FunctionModel` playing a script (see `Script`); tools coordinate through
asyncio events, never sleeps. Each wait is bounded by `asyncio.timeout(WAIT)`, so a regression
fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
import respx
from pydantic import BaseModel, Field

import tenxgraph.core.graph.tool_node as tool_node_module
from tenxgraph.core.graph import Agent, CompiledGraph, StateGraph, ToolNode
from tenxgraph.core.graph.ledger import idempotency_key
from tenxgraph.core.graph.node import NodeEvent
from tenxgraph.core.graph.tool_node import pending_calls, tool_calls_of
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.llm.wire_in import parse_arguments
from tenxgraph.core.llm.wire_out import UNANSWERED_CALL
from tenxgraph.core.state import (
    AgentState,
    Message,
    StreamChunk,
    StreamEvent,
    ToolCallBlock,
    ToolResult,
    ToolResultBlock,
    append_items,
)
from tenxgraph.storage.checkpointer import BaseCheckpointer, InMemoryCheckpointer
from tenxgraph.utils import (
    DEFAULT_MAX_PARALLEL_TOOLS,
    DEFAULT_TOOL_TIMEOUT_SECONDS,
    interrupt,
    tool,
)
from tenxgraph.utils.constants import END, START
from tests._helpers import asking, results, roles, thread, tool_call, tools_only
from tests.core.graph._support import inp, user
from tests.core.llm._support import Script as ScriptedModel
from tests.core.llm._support import sent

WAIT = 5.0  # seconds: the bound on any wait that would hang if the behaviour regressed
KEY = "sk-test-0123456789abcdef"


# -- helpers --------------------------------------------------------------------------------


class Script(ScriptedModel):
    """Answers "done" once the script runs out."""

    after = "done"

    def results_seen(self, n: int = -1) -> dict[str, ToolResultBlock]:
        """The tool results the n-th model call was shown, by call id."""
        return results(self.seen[n])


def route(state: AgentState) -> str:
    return "tools" if state.context[-1].has_tool_calls() else END


def loop(
    tools: ToolNode | Iterable[Callable[..., Any]],
    script: Script,
    *,
    state: type[AgentState] | None = None,
    checkpointer: BaseCheckpointer | None = None,
    **agent_options: Any,
) -> CompiledGraph:
    """START -> agent -> (tools -> agent)* -> END, the agent played by `script`."""
    node = tools if isinstance(tools, ToolNode) else ToolNode(tools)
    graph = StateGraph(state)
    graph.add_node("agent", Agent(FunctionModel(script), tool_node=node, **agent_options))
    graph.add_node("tools", node)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


class Ran:
    """What a ToolNode yielded when driven directly: its tool messages and state updates."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.updates: list[dict[str, Any]] = []

    def block(self, i: int) -> ToolResultBlock:
        return only_result(self.messages[i])


async def drive(node: ToolNode, state: AgentState, config: dict[str, Any] | None = None) -> Ran:
    """Run `node` as a graph would, outside a graph (no ledger, no streaming)."""
    ran = Ran()
    async with asyncio.timeout(WAIT):
        async for item in node(state, config or {}):
            assert not isinstance(item, NodeEvent)  # progress events only when streaming
            if isinstance(item, list):
                ran.messages.extend(item)
            else:
                ran.updates.append(item)
    return ran


async def run_node(
    node: ToolNode,
    *calls: ToolCallBlock,
    config: dict[str, Any] | None = None,
    state: AgentState | None = None,
) -> Ran:
    """Drive `node` on a history ending with an assistant message asking for `calls`."""
    state = state if state is not None else AgentState()
    state.context = [user("go"), asking(*calls)]
    return await drive(node, state, config)


def only_result(message: Message) -> ToolResultBlock:
    assert message.role == "tool"
    [block] = message.content
    assert isinstance(block, ToolResultBlock)
    return block


async def invoke(app: CompiledGraph, data: Any, config: dict[str, Any] | None = None) -> Any:
    async with asyncio.timeout(WAIT):
        return await app.ainvoke(data, config, response_granularity="full")


async def stream(
    app: CompiledGraph, data: Any, config: dict[str, Any] | None = None, **kw: Any
) -> list[StreamChunk]:
    async with asyncio.timeout(WAIT):
        return [c async for c in app.astream(data, config, **kw)]


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Counter:
    """A tool with a side effect: how often it really ran."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self) -> str:
        """Count."""
        self.calls += 1
        return "counted"


class Gate:
    """`work` calls that wait until `release_at` of them run at once; `peak` is the most that
    ever ran at the same time. The release comes on the next turn of the event loop, after
    every call that could start at that moment has started."""

    def __init__(self, release_at: int) -> None:
        self.release_at = release_at
        self.running = 0
        self.peak = 0
        self.release = asyncio.Event()

    async def work(self, n: int) -> int:
        self.running += 1
        self.peak = max(self.peak, self.running)
        if self.running == self.release_at:
            asyncio.get_running_loop().call_soon(self.release.set)
        try:
            await self.release.wait()
        finally:
            self.running -= 1
        return n


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BaseCheckpointer]:
    found: BaseCheckpointer
    if request.param == "memory":
        found = InMemoryCheckpointer()
    else:
        from tenxgraph.storage.checkpointer import SqliteCheckpointer

        found = SqliteCheckpointer(tmp_path / "tools.db")
    try:
        yield found
    finally:
        await found.aclose()


# -- one tool message per call, in call order -------------------------------------------------


async def test_results_come_back_one_message_per_call_in_call_order_not_finish_order() -> None:
    second_done = asyncio.Event()

    async def slow() -> str:
        await second_done.wait()
        return "slow"

    async def fast() -> str:
        second_done.set()
        return "fast"

    ran = await run_node(ToolNode([slow, fast]), tool_call("slow", "a"), tool_call("fast", "b"))
    assert [m.role for m in ran.messages] == ["tool", "tool"]
    assert [ran.block(i).call_id for i in range(2)] == ["a", "b"]
    assert [ran.block(i).output for i in range(2)] == ["slow", "fast"]


async def test_a_result_block_carries_call_id_output_status_and_the_call_metadata() -> None:
    def broken() -> None:
        raise RuntimeError("nope")

    ran = await run_node(
        ToolNode([add, broken]), tool_call("add", "c1", a=2, b=3), tool_call("broken", "c2")
    )
    ok, failed = ran.block(0), ran.block(1)
    assert (ok.call_id, ok.output, ok.status, ok.is_error) == ("c1", 5, "completed", False)
    assert (failed.call_id, failed.status, failed.is_error) == ("c2", "failed", True)
    assert ran.messages[0].metadata == {
        "function_name": "add",
        "function_argument": {"a": 2, "b": 3},
        "tool_call_id": "c1",
    }
    assert ran.messages[1].metadata == {
        "function_name": "broken",
        "function_argument": {},
        "tool_call_id": "c2",
    }


async def test_in_a_graph_the_results_are_stored_and_shown_to_the_next_model_call() -> None:
    def weather(city: str) -> str:
        return f"sunny in {city}"

    def time_in(city: str) -> str:
        return f"noon in {city}"

    script = Script(
        [tool_call("weather", "w", city="Oslo"), tool_call("time_in", "t", city="Rome")], "ok"
    )
    result = await invoke(loop([weather, time_in], script), inp("hi"))
    context = result["state"].context
    assert roles(context) == ["user", "assistant", "tool", "tool", "assistant"]
    assert [only_result(m).output for m in context[2:4]] == ["sunny in Oslo", "noon in Rome"]
    assert len(script.seen) == 2
    seen = script.results_seen()
    assert {k: v.output for k, v in seen.items()} == {"w": "sunny in Oslo", "t": "noon in Rome"}
    assert context[-1].text() == "ok"


async def test_calls_that_already_have_a_result_are_not_run_again() -> None:
    counter = Counter()
    state = AgentState(
        context=[
            user("go"),
            asking(tool_call("counter", "old"), tool_call("counter", "new")),
            Message.tool_message([ToolResultBlock(call_id="old", output="earlier")]),
        ]
    )
    ran = await drive(ToolNode([counter]), state)
    assert [ran.block(0).call_id] == ["new"]
    assert counter.calls == 1


def test_pending_calls_is_none_when_the_last_answer_asks_for_nothing() -> None:
    assert pending_calls([user("hi"), Message.text_message("hello", "assistant")]) is None
    assert pending_calls([user("hi")]) is None
    answered = [
        asking(tool_call("x", "c1")),
        Message.tool_message([ToolResultBlock(call_id="c1", output=1)]),
    ]
    assert pending_calls(answered) is None


def test_tool_calls_of_reads_openai_tools_calls_when_the_message_has_no_call_blocks() -> None:
    message = Message(
        role="assistant",
        content=[],
        tools_calls=[
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": {"y": 2}}},
        ],
    )
    [first, second] = tool_calls_of(message)
    assert (first.id, first.name, first.args, first.error) == ("c1", "f", {"x": 1}, None)
    assert (second.id, second.name, second.args, second.error) == ("c2", "g", {"y": 2}, None)


async def test_invoke_runs_one_call_outside_a_graph() -> None:
    def echo(text: str) -> str:
        return text.upper()

    message = await ToolNode([echo]).invoke("echo", {"text": "hi"}, "c9")
    block = only_result(message)
    assert (block.call_id, block.output, block.status) == ("c9", "HI", "completed")
    assert message.metadata["function_name"] == "echo"


# -- sync and async tools ---------------------------------------------------------------------


async def test_async_tools_run_on_the_event_loop_and_sync_tools_in_a_worker_thread() -> None:
    loop_thread = threading.get_ident()
    seen: dict[str, int] = {}

    async def on_loop() -> str:
        seen["async"] = threading.get_ident()
        return "a"

    def in_thread() -> str:
        seen["sync"] = threading.get_ident()
        return "s"

    ran = await run_node(
        ToolNode([on_loop, in_thread]), tool_call("on_loop"), tool_call("in_thread")
    )
    assert [ran.block(i).output for i in range(2)] == ["a", "s"]
    assert seen["async"] == loop_thread
    assert seen["sync"] != loop_thread


async def test_sync_tools_run_concurrently() -> None:
    barrier = threading.Barrier(3, timeout=WAIT)  # broken (an error result) if run one by one

    def meet(n: int) -> int:
        barrier.wait()
        return n

    ran = await run_node(ToolNode([meet]), *(tool_call("meet", f"c{n}", n=n) for n in range(3)))
    assert [ran.block(i).output for i in range(3)] == [0, 1, 2]
    assert not any(ran.block(i).is_error for i in range(3))


# -- concurrency ------------------------------------------------------------------------------


async def test_calls_run_concurrently() -> None:
    gate = Gate(release_at=3)  # each waits until all three have started: a deadlock if serial
    ran = await run_node(
        ToolNode([gate.work]), *(tool_call("work", f"c{n}", n=n) for n in range(3))
    )
    assert [ran.block(i).output for i in range(3)] == [0, 1, 2]
    assert gate.peak == 3


async def test_max_parallel_tools_caps_the_calls_running_at_once() -> None:
    gate = Gate(release_at=2)
    calls = [tool_call("work", f"c{n}", n=n) for n in range(5)]
    ran = await run_node(ToolNode([gate.work]), *calls, config={"max_parallel_tools": 2})
    assert [ran.block(i).output for i in range(5)] == [0, 1, 2, 3, 4]
    assert gate.peak == 2


async def test_at_most_eight_calls_run_at_once_by_default() -> None:
    assert DEFAULT_MAX_PARALLEL_TOOLS == 8
    gate = Gate(release_at=8)
    calls = [tool_call("work", f"c{n}", n=n) for n in range(12)]
    ran = await run_node(ToolNode([gate.work]), *calls)
    assert len(ran.messages) == 12
    assert gate.peak == 8


async def test_max_parallel_tools_from_the_run_config_applies_in_a_graph() -> None:
    gate = Gate(release_at=2)
    script = Script([tool_call("work", f"c{n}", n=n) for n in range(4)], "ok")
    result = await invoke(loop([gate.work], script), inp("go"), {"max_parallel_tools": 2})
    assert len(results(result["state"].context)) == 4
    assert gate.peak == 2


# -- timeouts ---------------------------------------------------------------------------------


async def test_tool_timeout_turns_a_hung_tool_into_an_error_result_and_others_finish() -> None:
    async def hang() -> str:
        await asyncio.Event().wait()
        return "never"

    def quick() -> str:
        return "quick"

    ran = await run_node(
        ToolNode([hang, quick]),
        tool_call("hang"),
        tool_call("quick"),
        config={"tool_timeout": 0.05},
    )
    hung = ran.block(0)
    assert hung.is_error
    assert hung.status == "failed"
    assert hung.output == "Error: Tool 'hang' did not finish within 0.05 s and was stopped."
    assert ran.block(1).output == "quick"


async def test_tool_timeout_applies_to_sync_tools_too() -> None:
    release = threading.Event()

    def block() -> str:
        release.wait(WAIT)
        return "late"

    try:
        ran = await run_node(ToolNode([block]), tool_call("block"), config={"tool_timeout": 0.05})
    finally:
        release.set()  # let the worker thread end
    assert ran.block(0).is_error
    assert "did not finish within 0.05 s" in ran.block(0).output


async def test_a_timeout_error_the_tool_raises_itself_is_its_failure_not_the_time_limit() -> None:
    async def ask_upstream() -> str:
        raise TimeoutError("the upstream service did not answer")

    ran = await run_node(ToolNode([ask_upstream]), tool_call("ask_upstream"))
    assert ran.block(0).is_error
    assert ran.block(0).output == (
        "Error: Tool 'ask_upstream' failed: TimeoutError: the upstream service did not answer"
    )


async def test_without_tool_timeout_the_default_of_300_seconds_applies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert DEFAULT_TOOL_TIMEOUT_SECONDS == 300.0
    monkeypatch.setattr(tool_node_module, "DEFAULT_TOOL_TIMEOUT_SECONDS", 0.05)

    async def hang() -> str:
        await asyncio.Event().wait()
        return "never"

    ran = await run_node(ToolNode([hang]), tool_call("hang"))
    assert "did not finish within 0.05 s" in ran.block(0).output


# -- return values ----------------------------------------------------------------------------


class Quote(BaseModel):
    symbol: str
    price: float
    at: datetime.date


@pytest.mark.parametrize(
    ("value", "output"),
    [
        ("plain text", "plain text"),
        ('{"looks": "like json"}', '{"looks": "like json"}'),  # a str stays a str
        ({"a": 1, "b": [True, None]}, {"a": 1, "b": [True, None]}),
        ([1, "x", {"y": 2.5}], [1, "x", {"y": 2.5}]),
        (("t", 1), ["t", 1]),
        (
            Quote(symbol="X", price=1.5, at=datetime.date(2024, 5, 1)),
            {"symbol": "X", "price": 1.5, "at": "2024-05-01"},
        ),
        (None, None),
    ],
    ids=["str", "json-str", "dict", "list", "tuple", "model", "none"],
)
async def test_return_values_become_json_ready_outputs(value: Any, output: Any) -> None:
    def give() -> Any:
        return value

    ran = await run_node(ToolNode([give]), tool_call("give"))
    block = ran.block(0)
    assert block.output == output
    assert type(block.output) is type(output)
    assert not block.is_error


async def test_a_tool_returning_a_message_answers_with_its_text() -> None:
    def reply() -> Message:
        return Message.text_message("from a message", "assistant")

    ran = await run_node(ToolNode([reply]), tool_call("reply"))
    assert ran.block(0).output == "from a message"


class Notes(AgentState):
    notes: Annotated[list[str], append_items] = Field(default_factory=list)
    owner: str = ""


async def test_a_tool_result_answers_the_model_and_updates_state_through_the_reducer() -> None:
    def remember(note: str) -> ToolResult:
        return ToolResult(f"noted {note}", state={"notes": [note], "owner": "ann"})

    script = Script([tool_call("remember", "r", note="milk")], "ok")
    result = await invoke(
        loop([remember], script, state=Notes), inp("go", notes=["eggs"], owner="bob")
    )
    state = result["state"]
    assert state.notes == ["eggs", "milk"]
    assert state.owner == "ann"
    stored = [m for m in state.context if m.role == "tool"]  # stored, unlike 10xgraph
    assert [only_result(m).output for m in stored] == ["noted milk"]
    assert script.results_seen()["r"].output == "noted milk"


async def test_a_tool_result_with_is_error_is_a_failed_result() -> None:
    def refuse() -> ToolResult:
        return ToolResult("not allowed", is_error=True)

    ran = await run_node(ToolNode([refuse]), tool_call("refuse"))
    assert ran.updates == []
    block = ran.block(0)
    assert (block.output, block.is_error, block.status) == ("not allowed", True, "failed")


async def test_concurrent_tool_results_merge_through_the_reducer_in_call_order() -> None:
    second_done = asyncio.Event()

    async def first() -> ToolResult:
        await second_done.wait()  # finishes last
        return ToolResult("1", state={"notes": ["from first"]})

    async def second() -> ToolResult:
        second_done.set()
        return ToolResult("2", state={"notes": ["from second"]})

    script = Script([tool_call("first"), tool_call("second")], "ok")
    result = await invoke(loop([first, second], script, state=Notes), inp("go"))
    assert result["state"].notes == ["from first", "from second"]


async def test_a_field_without_reducer_takes_the_value_of_the_later_call() -> None:
    second_done = asyncio.Event()

    async def first() -> ToolResult:
        await second_done.wait()  # finishes last, yet is the earlier call
        return ToolResult("1", state={"owner": "first"})

    async def second() -> ToolResult:
        second_done.set()
        return ToolResult("2", state={"owner": "second"})

    script = Script([tool_call("first"), tool_call("second")], "ok")
    result = await invoke(loop([first, second], script, state=Notes), inp("go"))
    assert result["state"].owner == "second"


# -- every failure is an error result the model reads ------------------------------------------


async def test_an_unknown_tool_name_is_an_error_listing_the_available_tools() -> None:
    def sub(a: int, b: int) -> int:
        return a - b

    ran = await run_node(ToolNode([sub, add]), tool_call("mul", a=1, b=2))
    block = ran.block(0)
    assert block.is_error
    assert block.status == "failed"
    assert block.output == "Error: There is no tool named 'mul'. Available tools: add, sub."


async def test_arguments_that_are_not_json_are_an_error_quoting_them() -> None:
    raw = '{"a": 1, "b": '
    args, error = parse_arguments(raw)  # what the model layer keeps for such a call
    assert args == {}
    assert error is not None
    message = asking(tool_call("add", "bad"), metadata={"tool_call_errors": {"bad": error}})
    ran = await drive(ToolNode([add]), AgentState(context=[user("go"), message]))
    block = ran.block(0)
    assert block.is_error
    assert "not valid JSON" in block.output
    assert raw in block.output
    assert "Call the tool again with a JSON object" in block.output


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [('{"a": 1,', "not valid JSON"), ("[1, 2]", "must be a JSON object, got list")],
)
async def test_bad_arguments_in_openai_tools_calls_are_an_error(
    arguments: str, expected: str
) -> None:
    counter = Counter()
    message = Message(
        role="assistant",
        content=[],
        tools_calls=[
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "counter", "arguments": arguments},
            }
        ],
    )
    ran = await drive(ToolNode([counter]), AgentState(context=[user("go"), message]))
    block = ran.block(0)
    assert block.is_error
    assert expected in block.output
    assert counter.calls == 0


async def test_arguments_failing_validation_are_an_error_naming_the_parameter() -> None:
    ran = await run_node(ToolNode([add]), tool_call("add", a="two", b=2))
    block = ran.block(0)
    assert block.is_error
    assert block.output.startswith("Error: Invalid arguments for tool 'add': a: ")
    assert "valid integer" in block.output
    assert block.output.endswith("Fix the arguments and call the tool again.")


async def test_a_missing_or_unknown_argument_is_an_error_naming_it() -> None:
    ran = await run_node(
        ToolNode([add]), tool_call("add", "m", a=1), tool_call("add", "u", a=1, b=2, c=3)
    )
    assert "b: Field required" in ran.block(0).output
    assert "c: Extra inputs are not permitted" in ran.block(1).output


async def test_an_exception_inside_a_tool_is_an_error_naming_it() -> None:
    def divide(a: int, b: int) -> float:
        return a / b

    ran = await run_node(ToolNode([divide]), tool_call("divide", a=1, b=0))
    assert ran.block(0).output == (
        "Error: Tool 'divide' failed: ZeroDivisionError: division by zero"
    )


async def test_every_kind_of_failure_reaches_the_next_model_call_and_the_run_completes() -> None:
    async def hang() -> str:
        await asyncio.Event().wait()
        return "never"

    def boom() -> str:
        raise ValueError("kaboom")

    bad_json = asking(
        tool_call("add", "json"),
        tool_call("nope", "unknown"),
        tool_call("add", "invalid", a="x", b=1),
        tool_call("boom", "raises"),
        tool_call("hang", "slow"),
        tool_call("add", "fine", a=1, b=2),
        metadata={"tool_call_errors": {"json": parse_arguments("{oops")[1]}},
    )
    script = Script(bad_json, "I will try again")
    result = await invoke(loop([add, boom, hang], script), inp("go"), {"tool_timeout": 0.05})
    state = result["state"]
    assert state.execution_meta.status == "completed"
    assert state.context[-1].text() == "I will try again"
    seen = script.results_seen()
    assert list(seen) == ["json", "unknown", "invalid", "raises", "slow", "fine"]
    errors = {k: v.output for k, v in seen.items() if v.is_error}
    assert "not valid JSON" in errors["json"]
    assert "no tool named 'nope'" in errors["unknown"]
    assert "Invalid arguments for tool 'add': a:" in errors["invalid"]
    assert "ValueError: kaboom" in errors["raises"]
    assert "did not finish within 0.05 s" in errors["slow"]
    assert seen["fine"].output == 3
    assert not seen["fine"].is_error


# -- injected parameters ----------------------------------------------------------------------


class Account(AgentState):
    customer: str = ""


def whoami(query: str, state: AgentState, config: dict[str, Any], tool_call_id: str) -> dict:
    """Look up who is asking.

    Args:
        query: What to look up.
    """
    assert isinstance(state, Account)
    return {
        "query": query,
        "customer": state.customer,
        "tenant": config.get("tenant"),
        "thread": config.get("thread_id"),
        "call": tool_call_id,
        "history": len(state.context),
    }


async def test_injected_parameters_are_not_offered_to_the_model() -> None:
    script = Script("no tools today")
    await invoke(loop([whoami], script, state=Account), inp("hi"))
    [offered] = script.infos[0].tools
    assert offered["function"]["name"] == "whoami"
    parameters = offered["function"]["parameters"]
    assert list(parameters["properties"]) == ["query"]
    assert parameters["required"] == ["query"]


async def test_injected_parameters_receive_the_state_the_config_and_the_call_id() -> None:
    script = Script([tool_call("whoami", "call-42", query="me")], "ok")
    config = {"thread_id": "th-1", "tenant": "acme"}
    result = await invoke(loop([whoami], script, state=Account), inp("hi", customer="ann"), config)
    output = results(result["state"].context)["call-42"].output
    assert output == {
        "query": "me",
        "customer": "ann",
        "tenant": "acme",
        "thread": "th-1",
        "call": "call-42",
        "history": 2,  # the user turn and the assistant turn asking for the call
    }


async def test_the_model_cannot_set_an_injected_parameter() -> None:
    ran = await run_node(
        ToolNode([whoami]), tool_call("whoami", query="x", tool_call_id="forged"), state=Account()
    )
    assert ran.block(0).is_error
    assert "tool_call_id: Extra inputs are not permitted" in ran.block(0).output


async def test_the_idempotency_key_is_the_same_when_a_resumed_step_runs_the_tool_again(
    store: BaseCheckpointer,
) -> None:
    keys: list[str] = []

    def pay(amount: int, idempotency_key: str) -> str:
        """Pay, after asking."""
        keys.append(idempotency_key)
        return f"paid {amount}: {interrupt('pay?')}"

    script = Script([tool_call("pay", "p1", amount=3)], "done")
    app = loop([pay], script, checkpointer=store)
    config = thread()
    await invoke(app, inp("go"), config)
    await invoke(app, {"resume": "yes"}, config)
    assert len(keys) == 2
    assert keys[0] == keys[1]


def test_the_idempotency_key_differs_by_thread_message_and_call() -> None:
    key = idempotency_key("t", "m", "c")
    assert key == idempotency_key("t", "m", "c")
    assert key.startswith("tx_")
    assert len(key) == 35
    others = {
        idempotency_key("t2", "m", "c"),
        idempotency_key("t", "m2", "c"),
        idempotency_key("t", "m", "c2"),
        idempotency_key("t\x00m", "", "c"),  # the parts are not just glued together
    }
    assert key not in others
    assert len(others) == 4
    assert idempotency_key("t", 5, "c") == idempotency_key("t", "5", "c")  # as the ledger keys


async def test_invoke_outside_a_graph_also_gives_an_idempotency_key() -> None:
    def charge(idempotency_key: str) -> str:
        """Charge."""
        return idempotency_key

    node = ToolNode([charge])
    message = await node.invoke("charge", {}, "c1", config={"thread_id": "t"})
    assert message.content[0].output == idempotency_key("t", None, "c1")


# -- cancellation -----------------------------------------------------------------------------


async def test_a_tool_raising_cancelled_error_by_itself_is_an_error_and_the_others_finish() -> None:
    async def gives_up() -> str:
        """Give up."""
        raise asyncio.CancelledError

    ran = await run_node(
        ToolNode([gives_up, add]), tool_call("gives_up"), tool_call("add", a=1, b=2)
    )
    assert ran.block(0).is_error
    assert "raised CancelledError although nothing cancelled it" in ran.block(0).output
    assert ran.block(1).output == 3


async def test_cancelling_the_run_still_cancels_a_running_tool() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def slow() -> str:
        """Wait."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    app = tools_only([slow], checkpointer=InMemoryCheckpointer())
    run = asyncio.create_task(app.ainvoke({"messages": [user("go"), asking(tool_call("slow"))]}))
    async with asyncio.timeout(WAIT):
        await started.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert cancelled.is_set()


async def test_a_tool_swallowing_the_run_cancellation_into_its_own_does_not_hide_it() -> None:
    """A tool that turns the cancellation it received into a new CancelledError: the task is
    still being cancelled, so the run is cancelled, not answered with an error result."""
    started = asyncio.Event()

    async def rewrap() -> str:
        """Wait."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise asyncio.CancelledError("rewrapped") from None
        return "never"

    node = ToolNode([rewrap])
    state = AgentState()
    state.context = [user("go"), asking(tool_call("rewrap"))]
    running = asyncio.create_task(drive(node, state))
    async with asyncio.timeout(WAIT):
        await started.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running


async def test_a_state_update_that_cannot_be_recorded_is_an_error_result_not_a_crash() -> None:
    class Files(AgentState):
        blob: bytes = b""

    def save() -> ToolResult:
        """Save."""
        return ToolResult("saved", state={"blob": b"\xff\xfe"})

    script = Script([tool_call("save")], "done")
    app = loop([save], script, state=Files, checkpointer=InMemoryCheckpointer())
    result = await invoke(app, inp("go"), thread())
    block = results(result["state"].context)["call_save"]
    assert block.is_error
    assert "cannot be recorded as JSON" in block.output
    assert result["state"].execution_meta.status == "completed"


# -- replay safety ----------------------------------------------------------------------------


def approve() -> str:
    """Ask a human."""
    answer = interrupt("approve?")
    return f"approved: {answer}"


def interrupted_of(chunks: list[StreamChunk]) -> dict[str, Any]:
    [paused] = [
        c for c in chunks if c.event == StreamEvent.UPDATES and c.data["status"] == "interrupted"
    ]
    return paused.data["interrupt"]


def position(chunks: list[StreamChunk], status: str, call_id: str) -> int:
    """Where the one chunk with this `status` for this call is."""
    [found] = [
        i
        for i, c in enumerate(chunks)
        if c.data and c.data.get("status") == status and c.data.get("tool_call_id") == call_id
    ]
    return found


def tool_result_chunks(chunks: list[StreamChunk]) -> dict[str, dict[str, Any]]:
    return {
        c.data["tool_call_id"]: c.data
        for c in chunks
        if c.data is not None and c.data.get("status") == "tool_result"
    }


@pytest.mark.parametrize("how", ["ainvoke", "astream"])
async def test_resume_after_an_interrupt_in_one_tool_replays_the_finished_call(
    store: BaseCheckpointer, how: str
) -> None:
    counter = Counter()
    script = Script([tool_call("counter", "call_count"), tool_call("approve", "call_ask")], "done")
    app = loop([counter, approve], script, checkpointer=store)
    config = thread()

    if how == "ainvoke":
        asked = (await invoke(app, inp("go"), config))["state"].execution_meta.interrupt_data
    else:
        asked = interrupted_of(await stream(app, inp("go"), config))
    assert asked["key"] == "tool:call_ask:0"
    assert asked["tool_call_id"] == "call_ask"
    assert asked["node"] == "tools"
    assert asked["value"] == "approve?"
    assert counter.calls == 1
    paused = await app.aget_state(config)
    assert paused is not None
    assert paused.execution_meta.status == "interrupted_before"
    assert roles(paused.context) == ["user", "assistant"]  # no half-done step is kept

    if how == "ainvoke":
        await invoke(app, {"resume": "yes"}, config)
    else:
        resumed = tool_result_chunks(await stream(app, {"resume": "yes"}, config))
        assert resumed["call_count"]["replayed"] is True
        assert resumed["call_ask"]["replayed"] is False
    assert counter.calls == 1  # replayed from the ledger, not executed again
    state = await app.aget_state(config)
    assert state is not None
    assert state.execution_meta.status == "completed"
    assert roles(state.context) == ["user", "assistant", "tool", "tool", "assistant"]
    outputs = {k: v.output for k, v in results(state.context).items()}
    assert outputs == {"call_count": "counted", "call_ask": "approved: yes"}
    assert len(script.seen) == 2


async def test_replayed_tool_results_apply_their_state_updates_once(
    store: BaseCheckpointer,
) -> None:
    ran: list[str] = []

    def remember() -> ToolResult:
        ran.append("remember")
        return ToolResult("noted", state={"notes": ["once"], "owner": "ann"})

    script = Script([tool_call("remember"), tool_call("approve")], "done")
    app = loop([remember, approve], script, state=Notes, checkpointer=store)
    config = thread()
    await invoke(app, inp("go"), config)
    result = await invoke(app, {"resume": "ok"}, config)
    assert ran == ["remember"]
    assert result["state"].notes == ["once"]
    assert result["state"].owner == "ann"


async def test_two_interrupting_tools_are_answered_one_after_the_other(
    store: BaseCheckpointer,
) -> None:
    asked: list[str] = []

    def confirm(what: str) -> str:
        asked.append(what)
        return f"{what}: {interrupt(f'confirm {what}?')}"

    script = Script(
        [tool_call("confirm", "c1", what="a"), tool_call("confirm", "c2", what="b")], "done"
    )
    app = loop([confirm], script, checkpointer=store)
    config = thread()
    first = await invoke(app, inp("go"), config)
    assert first["state"].execution_meta.interrupt_data["key"] == "tool:c1:0"
    second = await invoke(app, {"resume": "yes"}, config)
    assert second["state"].execution_meta.interrupt_data["key"] == "tool:c2:0"
    await invoke(app, {"resume": "no"}, config)
    state = await app.aget_state(config)
    assert state is not None
    assert state.execution_meta.status == "completed"
    assert {k: v.output for k, v in results(state.context).items()} == {
        "c1": "a: yes",
        "c2": "b: no",
    }
    # c1: asked in run 1, finished in run 2, replayed from the ledger in run 3;
    # c2: asked in runs 1 and 2, finished in run 3
    assert asked.count("a") == 2
    assert asked.count("b") == 3


async def test_a_call_recorded_in_the_ledger_before_the_step_runs_is_replayed(
    store: BaseCheckpointer,
) -> None:
    counter = Counter()
    config = thread()
    recorded = Message.tool_message(
        [ToolResultBlock(call_id="c1", output="from the ledger", status="completed")],
        meta={"function_name": "counter", "function_argument": {}, "tool_call_id": "c1"},
    )
    await store.aput_tool_result(
        config["thread_id"], "asst-1", "c1", {"message": recorded.model_dump(mode="json")}
    )
    script = Script(
        asking(tool_call("counter", "c1"), tool_call("counter", "c2"), message_id="asst-1")
    )
    result = await invoke(loop([counter], script, checkpointer=store), inp("go"), config)
    assert counter.calls == 1  # only c2
    outputs = {k: v.output for k, v in results(result["state"].context).items()}
    assert outputs == {"c1": "from the ledger", "c2": "counted"}


async def test_after_a_crash_in_the_tools_step_finished_calls_are_replayed(
    store: BaseCheckpointer,
) -> None:
    counter = Counter()
    started = asyncio.Event()
    runs = 0

    async def stuck() -> str:
        nonlocal runs
        runs += 1
        if runs == 1:
            started.set()
            await asyncio.Event().wait()  # the process "dies" here
        return "unstuck"

    script = Script([tool_call("counter", "c1"), tool_call("stuck", "c2")], "done")
    config = {**thread(), "max_parallel_tools": 1}  # c2 starts once c1 is recorded
    first = asyncio.create_task(
        loop([counter, stuck], script, checkpointer=store).ainvoke(inp("go"), config)
    )
    async with asyncio.timeout(WAIT):
        await started.wait()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first

    app = loop([counter, stuck], script, checkpointer=store)  # a new process, say
    await invoke(app, None, config)
    assert counter.calls == 1
    assert runs == 2
    state = await app.aget_state(config)
    assert state is not None
    assert state.execution_meta.status == "completed"
    outputs = {k: v.output for k, v in results(state.context).items()}
    assert outputs == {"c1": "counted", "c2": "unstuck"}


async def test_an_app_compiled_to_keep_nothing_has_no_ledger_and_nothing_to_resume() -> None:
    """A graph compiled with `checkpointer=False` keeps no thread, so no step ever runs again:
    the same input runs the tool again, and a paused run cannot be resumed (and says so)."""
    counter = Counter()
    app = tools_only([counter], checkpointer=False)
    asked = asking(tool_call("counter", "c1"), message_id="asst-1")
    config = thread()
    for _ in range(2):
        await invoke(app, {"messages": [user("go"), asked]}, config)
    assert counter.calls == 2
    paused = loop([approve], Script([tool_call("approve")], "done"), checkpointer=False)
    await invoke(paused, inp("go"), config)
    with pytest.raises(ValueError, match="Nothing to resume"):
        await invoke(paused, {"resume": "yes"}, config)


# -- streaming --------------------------------------------------------------------------------


@pytest.mark.parametrize("granularity", ["low", "full"])
async def test_astream_shows_each_call_starting_then_its_result(granularity: str) -> None:
    def weather(city: str) -> str:
        return f"sunny in {city}"

    def boom() -> str:
        raise RuntimeError("x")

    script = Script([tool_call("weather", "w", city="Oslo"), tool_call("boom", "b")], "ok")
    app = loop([weather, boom], script)
    chunks = await stream(app, inp("go"), response_granularity=granularity)
    for call_id, name, args, is_error in (
        ("w", "weather", {"city": "Oslo"}, False),
        ("b", "boom", {}, True),
    ):
        start = position(chunks, "invoking_tool", call_id)
        end = position(chunks, "tool_result", call_id)
        assert start < end
        assert chunks[start].event == StreamEvent.UPDATES
        assert chunks[start].data == {
            "status": "invoking_tool",
            "tool_name": name,
            "args": args,
            "tool_call_id": call_id,
            "node": "tools",
        }
        done = chunks[end]
        assert done.event == StreamEvent.MESSAGE
        assert done.data["tool_name"] == name
        assert done.data["is_error"] is is_error
        assert done.data["replayed"] is False
        assert done.data["duration_ms"] >= 0
        assert done.message is not None
        assert only_result(done.message).call_id == call_id


async def test_astream_sends_each_tool_message_once() -> None:
    def weather(city: str) -> str:
        return f"sunny in {city}"

    script = Script([tool_call("weather", "w", city="Oslo")], "ok")
    chunks = await stream(loop([weather], script), inp("go"))
    tool_chunks = [c for c in chunks if c.message is not None and c.message.role == "tool"]
    assert len(tool_chunks) == 1
    assert tool_chunks[0].data["status"] == "tool_result"


async def test_astream_shows_tool_progress_when_the_tool_node_runs_beside_another_node() -> None:
    def weather(city: str) -> str:
        return f"sunny in {city}"

    def asker(state: AgentState) -> Message:
        return asking(tool_call("weather", "w", city="Oslo"))

    def audit(state: AgentState) -> None:
        return None

    graph = StateGraph()
    graph.add_node("asker", asker)
    graph.add_node("tools", ToolNode([weather]))
    graph.add_node("audit", audit)
    graph.add_edge(START, "asker")
    graph.add_edge("asker", "tools")  # tools and audit run in the same step
    graph.add_edge("asker", "audit")
    graph.add_edge("tools", END)
    graph.add_edge("audit", END)
    chunks = await stream(graph.compile(), inp("go"))
    assert position(chunks, "invoking_tool", "w") < position(chunks, "tool_result", "w")
    tool_chunks = [c for c in chunks if c.message is not None and c.message.role == "tool"]
    assert len(tool_chunks) == 1
    assert tool_chunks[0].message.text() == "sunny in Oslo"


async def test_ainvoke_and_astream_give_the_same_conversation() -> None:
    def weather(city: str) -> str:
        return f"sunny in {city}"

    def replies() -> Script:
        return Script(
            [tool_call("weather", "w", city="Oslo"), tool_call("weather", "v", city="Rome")], "ok"
        )

    invoked = await loop([weather], replies()).ainvoke(inp("go"))
    chunks = await stream(loop([weather], replies()), inp("go"))
    streamed = [c.message for c in chunks if c.message is not None and not c.message.delta]
    assert [(m.role, m.text()) for m in streamed] == [
        (m.role, m.text()) for m in invoked["messages"]
    ]
    assert roles(streamed) == ["user", "assistant", "tool", "tool", "assistant"]


# -- an unanswered call, sent to a provider ----------------------------------------------------


def provider_answer(message: dict[str, Any], finish: str = "stop") -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        },
    )


async def test_a_call_left_without_a_result_is_answered_with_a_stand_in_on_the_wire(
    openai_api: respx.Route,
) -> None:
    openai_api.mock(return_value=provider_answer({"role": "assistant", "content": "sorry"}))

    def earlier_turn(state: AgentState) -> Message:  # asked for a tool nobody ran
        return asking(tool_call("lookup", "dangling", q="x"))

    graph = StateGraph()
    graph.add_node("earlier", earlier_turn)
    graph.add_node("agent", Agent("openai/gpt-4o-mini", api_key=KEY))
    graph.add_edge(START, "earlier")
    graph.add_edge("earlier", "agent")
    graph.add_edge("agent", END)
    # not bounded by WAIT: the first litellm call pays for importing it
    result = await graph.compile().ainvoke(inp("hi"), response_granularity="full")

    wire = sent(openai_api)["messages"]
    assert [m["role"] for m in wire] == ["user", "assistant", "tool"]
    assert wire[1]["tool_calls"][0]["id"] == "dangling"
    assert wire[2] == {"role": "tool", "tool_call_id": "dangling", "content": UNANSWERED_CALL}
    assert roles(result["state"].context) == ["user", "assistant", "assistant"]  # not stored


async def test_arguments_a_provider_sent_as_broken_json_become_an_error_result(
    openai_api: respx.Route,
) -> None:
    broken = '{"a": 1, "b":'
    openai_api.mock(
        side_effect=[
            provider_answer(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "add", "arguments": broken},
                        }
                    ],
                },
                "tool_calls",
            ),
            provider_answer({"role": "assistant", "content": "let me retry"}),
        ]
    )
    node = ToolNode([add])
    graph = StateGraph()
    graph.add_node("agent", Agent("openai/gpt-4o-mini", api_key=KEY, tool_node=node))
    graph.add_node("tools", node)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    result = await graph.compile().ainvoke(inp("add"), response_granularity="full")

    block = results(result["state"].context)["call_1"]
    assert block.is_error
    assert "not valid JSON" in block.output
    wire = sent(openai_api)["messages"]
    # sent back as valid JSON (some servers refuse a history holding the broken text); the
    # tool result says what was wrong
    assert wire[1]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert wire[2]["role"] == "tool"
    assert wire[2]["tool_call_id"] == "call_1"
    assert "not valid JSON" in wire[2]["content"]
    assert result["state"].context[-1].text() == "let me retry"


# -- the tools a node offers ------------------------------------------------------------------


@tool(tags=["math"])
def multiply(a: int, b: int) -> int:
    """Multiply two numbers."""
    return a * b


@tool(tags=["text", "public"])
def shout(text: str) -> str:
    """Shout some text."""
    return text.upper()


def names(schemas: list[dict[str, Any]]) -> list[str]:
    return [s["function"]["name"] for s in schemas]


async def test_all_tools_returns_the_openai_schemas_sync_and_async() -> None:
    node = ToolNode(f for f in (add, multiply))  # any iterable
    schemas = await node.all_tools()
    assert schemas == node.all_tools_sync()
    assert names(schemas) == ["add", "multiply"]
    assert schemas[0] == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": False,
            },
        },
    }


async def test_all_tools_filters_by_tags() -> None:
    node = ToolNode([add, multiply, shout])
    assert names(await node.all_tools(tags=["math"])) == ["multiply"]
    assert names(node.all_tools_sync(tags={"public", "math"})) == ["multiply", "shout"]
    assert node.all_tools_sync(tags=["unknown"]) == []


async def test_an_agent_with_tools_tags_offers_only_those_tools() -> None:
    script = Script("no calls")
    await invoke(loop([add, multiply, shout], script, tools_tags=["text"]), inp("hi"))
    assert names(script.infos[0].tools) == ["shout"]


def test_a_single_tag_given_as_a_string_is_one_tag_not_its_letters() -> None:
    node = ToolNode([add, multiply, shout])
    assert names(node.all_tools_sync(tags="math")) == ["multiply"]


async def test_an_agent_with_a_string_tag_or_no_tags_offers_what_it_names() -> None:
    one, none = Script("no calls"), Script("no calls")
    await invoke(loop([add, multiply, shout], one, tools_tags="text"), inp("hi"))
    await invoke(loop([add, multiply, shout], none, tools_tags=[]), inp("hi"))
    assert names(one.infos[0].tools) == ["shout"]
    assert none.infos[0].tools == []  # an empty tag set offers nothing, not everything


@pytest.mark.parametrize("limit", [0, -1, 2.5, "8", True])
async def test_a_max_parallel_tools_that_is_not_a_positive_int_is_refused(limit: Any) -> None:
    with pytest.raises(ValueError, match="max_parallel_tools"):
        await run_node(
            ToolNode([add]), tool_call("add", a=1, b=2), config={"max_parallel_tools": limit}
        )


def test_two_tools_with_the_same_name_are_refused() -> None:
    def lookup_tool(answer: str) -> Callable[[], str]:
        def lookup() -> str:
            return answer

        return lookup

    with pytest.raises(ValueError, match="Two tools are named 'lookup'"):
        ToolNode([lookup_tool("a"), lookup_tool("b")])

    @tool(name="add")
    def plus(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ValueError, match="Two tools are named 'add'"):
        ToolNode([add, plus])


def test_the_same_function_given_twice_is_one_tool() -> None:
    assert list(ToolNode([add, add]).tools) == ["add"]


async def test_the_advertised_name_is_the_name_dispatched_on() -> None:
    @tool(name="search_docs")
    def search(query: str) -> str:
        return f"found {query}"

    node = ToolNode([search])
    assert names(node.all_tools_sync()) == ["search_docs"]
    ran = await run_node(node, tool_call("search_docs", "c1", query="x"), tool_call("search", "c2"))
    assert ran.block(0).output == "found x"
    assert ran.block(1).is_error
    assert "There is no tool named 'search'. Available tools: search_docs." in ran.block(1).output


# -- known bugs -------------------------------------------------------------------------------


async def test_a_tool_result_updating_an_unknown_field_is_an_error_result_not_a_crash() -> None:
    def bad() -> ToolResult:
        return ToolResult("ok", state={"no_such_field": 1})

    script = Script([tool_call("bad")], "done")
    result = await invoke(loop([bad], script, checkpointer=InMemoryCheckpointer()), inp("go"))
    block = results(result["state"].context)["call_bad"]
    assert block.is_error
    assert "no_such_field" in block.output


class Item(BaseModel):
    id: str
    qty: int


class Cart(AgentState):
    items: Annotated[list[Item], append_items] = Field(default_factory=list)


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # the dicts, when saved
async def test_replayed_state_updates_keep_their_types() -> None:
    def put() -> ToolResult:
        return ToolResult("added", state={"items": [Item(id="a", qty=1)]})

    script = Script([tool_call("put"), tool_call("approve")], "done")
    app = loop([put, approve], script, state=Cart, checkpointer=InMemoryCheckpointer())
    config = thread()
    await invoke(app, inp("go"), config)
    result = await invoke(app, {"resume": "yes"}, config)
    assert result["state"].items == [Item(id="a", qty=1)]
