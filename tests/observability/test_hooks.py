"""`RunHooks`: what a run tells code of yours, in order, without message contents, and never
at the cost of the run."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from typing import Any

import pytest

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.llm.retry import RetryConfig
from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.message import TokenUsages
from tenxgraph.observability import (
    Interrupted,
    ModelCallFinished,
    NodeFinished,
    NodeStarted,
    RunFinished,
    RunHooks,
    RunStarted,
    ToolFinished,
    Usage,
)
from tenxgraph.prebuilt import tools_condition
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils.constants import END, START
from tenxgraph.utils.interrupt import interrupt
from tests.observability._usage_models import Priced, add, cost_of, tokens_of, tool_rounds

RETRY = RetryConfig(max_retries=2, initial_delay=0, jitter=False)


class Record:
    """A hook that is a plain callable: every event, in order."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def __call__(self, event: Any) -> None:
        self.events.append(event)

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


def said(text: str) -> dict[str, Any]:
    return {"messages": [Message.text_message(text)]}


def thread(**more: Any) -> dict[str, Any]:
    return {"thread_id": uuid.uuid4().hex, **more}


def tool_loop(model: Any, tools: ToolNode | None = None, **compile_options: Any) -> Any:
    """agent -> tools -> agent, as ReactAgent builds it, compiled with `compile_options`."""
    tools = tools or ToolNode([add])
    graph = StateGraph()
    graph.add_node("agent", Agent(model, tool_node=tools, retry_config=RETRY))
    graph.add_node("tools", tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    compile_options.setdefault("checkpointer", InMemoryCheckpointer())
    return graph.compile(**compile_options)


def outline(events: list[Any]) -> list[tuple[Any, ...]]:
    """Each event as (kind, node, step) where it has them."""
    shown: list[tuple[Any, ...]] = []
    for event in events:
        if isinstance(event, NodeStarted | NodeFinished):
            shown.append((type(event).__name__, event.node, event.step))
        elif isinstance(event, ModelCallFinished | ToolFinished):
            shown.append((type(event).__name__, event.node))
        else:
            shown.append((type(event).__name__,))
    return shown


async def test_the_events_of_a_tool_loop_come_in_order() -> None:
    hook = Record()
    model = Priced(tool_rounds(1))
    app = tool_loop(model, hooks=[hook], name="loop")
    config = thread()
    result = await app.ainvoke(said("sum"), config)
    assert outline(hook.events) == [
        ("RunStarted",),
        ("NodeStarted", "agent", 1),
        ("ModelCallFinished", "agent"),
        ("NodeFinished", "agent", 1),
        ("NodeStarted", "tools", 2),
        ("ToolFinished", "tools"),
        ("ToolFinished", "tools"),
        ("NodeFinished", "tools", 2),
        ("NodeStarted", "agent", 3),
        ("ModelCallFinished", "agent"),
        ("NodeFinished", "agent", 3),
        ("RunFinished",),
    ]
    run_ids = {e.run_id for e in hook.events}
    assert len(run_ids) == 1
    assert {e.thread_id for e in hook.events} == {config["thread_id"]}
    started, finished = hook.events[0], hook.events[-1]
    assert started == RunStarted(started.run_id, config["thread_id"], "loop")
    calls = hook.of(ModelCallFinished)
    for n, call in enumerate(calls):
        assert call.model == "Priced"  # a client object is named by its class
        assert call.streamed is False
        assert call.error is None
        assert call.usage is not None
        assert (call.usage.prompt_tokens, call.usage.completion_tokens) == tokens_of(n)
        assert call.cost == pytest.approx(cost_of(n))
        assert call.finish_reason in {"tool_calls", "stop"}
    tools = hook.of(ToolFinished)
    assert sorted(t.call_id for t in tools) == ["c1a", "c1b"]
    assert all(t.tool == "add" and not t.replayed and not t.is_error for t in tools)
    assert all(t.error is None and t.duration >= 0 for t in tools)
    assert all(e.error is None for e in hook.of(NodeFinished))
    assert isinstance(finished, RunFinished)
    assert finished.status == "completed"
    assert finished.error is None
    assert finished.graph == "loop"
    assert finished.usage.as_token_usage() == result["token_usage"]
    assert finished.usage.model_calls == 2


async def test_streamed_model_calls_are_reported_as_streamed() -> None:
    hook = Record()
    app = tool_loop(Priced(tool_rounds(0)), hooks=hook)
    [c async for c in app.astream(said("hi"), thread())]
    (call,) = hook.of(ModelCallFinished)
    assert call.streamed is True
    assert call.time_to_first_token is not None
    assert call.cost == pytest.approx(cost_of(0))


async def test_parallel_nodes_share_their_step() -> None:
    hook = Record()
    graph = StateGraph()
    graph.add_node("a", lambda state: None)
    graph.add_node("b", lambda state: None)
    graph.add_edge(START, "a")
    graph.add_edge(START, "b")
    await graph.compile(hooks=hook).ainvoke(said("hi"), thread())
    steps = {(e.node, e.step) for e in hook.of(NodeStarted)}
    assert steps == {("a", 1), ("b", 1)}
    assert {(e.node, e.step) for e in hook.of(NodeFinished)} == steps


async def test_a_pause_is_an_interrupt_event_and_an_interrupted_run() -> None:
    hook = Record()
    app = tool_loop(Priced(tool_rounds(1)), ToolNode([add], requires_approval=True), hooks=[hook])
    config = thread()
    paused = await app.ainvoke(said("sum"), config)
    assert "interrupted" in paused
    (pause,) = hook.of(Interrupted)
    assert pause.node == "tools"
    assert pause.reason == paused["interrupted"]["reason"]
    assert pause.run_id == hook.events[0].run_id
    finished = hook.events[-1]
    assert isinstance(finished, RunFinished)
    assert finished.status == "interrupted"
    assert finished.error is None
    assert finished.usage.model_calls == 1
    assert not hook.of(ToolFinished)  # no tool ran: they wait for approval
    # the node that paused did not fail
    assert [e.error for e in hook.of(NodeFinished) if e.node == "tools"] == [None]
    pending = (await app.aget_state(config)).context[-1].tool_call_blocks()
    hook.events.clear()
    await app.ainvoke({"resume": {c.id: "approve" for c in pending}}, config)
    assert hook.events[-1].status == "completed"
    assert len(hook.of(ToolFinished)) == 2
    assert hook.events[0].run_id != pause.run_id  # the resume is a run of its own


class Slow(RunHooks):
    """Coroutine methods that only record after yielding to the loop: awaited, or lost."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def on_run_start(self, event: RunStarted) -> None:
        await asyncio.sleep(0)
        self.seen.append("run_start")

    async def on_model_call(self, event: ModelCallFinished) -> None:
        await asyncio.sleep(0)
        self.seen.append("model_call")

    async def on_tool_end(self, event: ToolFinished) -> None:
        await asyncio.sleep(0)
        self.seen.append(f"tool_end {event.call_id}")

    async def on_run_end(self, event: RunFinished) -> None:
        await asyncio.sleep(0)
        self.seen.append(f"run_end {event.status}")


async def test_async_hooks_are_awaited_in_the_run() -> None:
    hooks = Slow()
    await tool_loop(Priced(tool_rounds(1)), hooks=[hooks]).ainvoke(said("sum"), thread())
    assert hooks.seen[0] == "run_start"
    assert hooks.seen[-1] == "run_end completed"
    assert hooks.seen.count("model_call") == 2
    assert sorted(s for s in hooks.seen if s.startswith("tool_end")) == [
        "tool_end c1a",
        "tool_end c1b",
    ]


class Broken(RunHooks):
    def on_node_start(self, event: NodeStarted) -> None:
        raise RuntimeError("hook bug")

    async def on_run_end(self, event: RunFinished) -> None:
        raise ValueError("async hook bug")


async def test_a_failing_hook_is_logged_and_the_run_is_unchanged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="tenxgraph.hooks")
    after = Record()  # a hook after the broken one is still told
    quiet = await tool_loop(Priced(tool_rounds(1))).ainvoke(said("sum"), thread())
    loud = await tool_loop(Priced(tool_rounds(1)), hooks=[Broken(), after]).ainvoke(
        said("sum"), thread()
    )
    assert loud["token_usage"] == quiet["token_usage"]
    assert [m.text() for m in loud["messages"]] == [m.text() for m in quiet["messages"]]
    assert outline(after.events)[-1] == ("RunFinished",)
    failures = [r for r in caplog.records if r.name == "tenxgraph.hooks"]
    assert failures
    assert all(r.levelno == logging.ERROR for r in failures)
    assert {r.exc_info[0] for r in failures if r.exc_info} == {RuntimeError, ValueError}
    assert sum(r.exc_info is not None and r.exc_info[0] is RuntimeError for r in failures) == 3


async def test_hooks_of_compile_and_of_the_call_are_both_told() -> None:
    graph_hook, call_hook, order = Record(), Record(), []
    app = tool_loop(Priced(tool_rounds(0)), hooks=[graph_hook, lambda e: order.append("graph")])
    await app.ainvoke(said("hi"), thread(hooks=[call_hook, lambda e: order.append("call")]))
    assert outline(graph_hook.events) == outline(call_hook.events)
    assert outline(call_hook.events)[0] == ("RunStarted",)
    assert order[:2] == ["graph", "call"]  # the graph's first
    # a call without hooks of its own: only the graph's
    graph_hook.events.clear()
    call_hook.events.clear()
    await app.ainvoke(said("again"), thread())
    assert graph_hook.events
    assert not call_hook.events


def test_a_hook_that_is_not_one_is_refused_at_compile() -> None:
    graph = StateGraph()
    graph.add_node("n", lambda state: None)
    graph.add_edge(START, "n")
    for bad in (42, [42], "on_run_end", [Record(), None], RunHooks):
        with pytest.raises(TypeError, match="hook"):
            graph.compile(hooks=bad)


async def test_a_hook_that_is_not_one_is_refused_at_the_call() -> None:
    graph = StateGraph()
    graph.add_node("n", lambda state: None)
    graph.add_edge(START, "n")
    app = graph.compile()
    for bad in (42, ["x"], RunHooks):
        with pytest.raises(TypeError, match="hook"):
            await app.ainvoke(said("hi"), thread(hooks=bad))


SECRET = "zebra-7731"  # in every message of the run: the user's, the model's, the tool's


def echo(text: str) -> str:
    """Echo."""
    return f"{text} back"


async def test_events_carry_no_message_contents() -> None:
    from tenxgraph.core.state.message_block import ToolCallBlock

    def reply(messages: list[Message]) -> Any:
        if messages[-1].role == "user":
            return ToolCallBlock(id="e1", name="echo", args={"text": SECRET})
        return f"the tool said {SECRET}"

    hook = Record()
    app = tool_loop(Priced(reply), ToolNode([echo]), hooks=hook)
    config = thread()
    result = await app.ainvoke(said(f"say {SECRET}"), config)
    assert SECRET in result["messages"][-1].text()
    assert len(hook.events) > 6
    for event in hook.events:
        for field in dataclasses.fields(event):
            value = getattr(event, field.name)
            assert not isinstance(value, Message)
            assert isinstance(value, str | int | float | bool | TokenUsages | Usage | None), (
                f"{type(event).__name__}.{field.name} is a {type(value).__name__}"
            )
        assert SECRET not in repr(event)


async def test_a_recorded_tool_result_is_reported_replayed_on_resume() -> None:
    from tenxgraph.core.state.message_block import ToolCallBlock

    def ask(question: str) -> str:
        """Ask a person."""
        return str(interrupt({"question": question}, message=question))

    def reply(messages: list[Message]) -> Any:
        if messages[-1].role == "user":
            return [
                ToolCallBlock(id="sum", name="add", args={"a": 1, "b": 2}),
                ToolCallBlock(id="ask", name="ask", args={"question": "ok?"}),
            ]
        return "done"

    hook = Record()
    app = tool_loop(Priced(reply), ToolNode([add, ask]), hooks=hook)
    config = thread()
    paused = await app.ainvoke(said("go"), config)
    assert paused["interrupted"]["node"] == "tools"
    first = {t.call_id: t for t in hook.of(ToolFinished)}
    assert set(first) == {"sum"}  # the paused call did not finish
    assert first["sum"].replayed is False
    assert hook.events[-1].status == "interrupted"
    hook.events.clear()
    await app.ainvoke({"resume": "yes"}, config)
    again = {t.call_id: t for t in hook.of(ToolFinished)}
    assert set(again) == {"sum", "ask"}
    assert again["sum"].replayed is True  # its recorded result, not run again
    assert again["ask"].replayed is False
    assert not again["ask"].is_error
    assert hook.events[-1].status == "completed"


async def test_a_failing_node_is_a_node_error_and_a_run_error() -> None:
    def boom(state: AgentState) -> None:
        raise ValueError("bad input")

    hook = Record()
    graph = StateGraph()
    graph.add_node("boom", boom)
    graph.add_edge(START, "boom")
    app = graph.compile(hooks=[hook])
    with pytest.raises(Exception, match="bad input") as raised:
        await app.ainvoke(said("hi"), thread())
    (ended,) = hook.of(NodeFinished)
    assert ended.node == "boom"
    assert ended.error is not None
    assert "bad input" in str(ended.error)
    finished = hook.events[-1]
    assert isinstance(finished, RunFinished)
    assert finished.status == "error"
    assert finished.error is raised.value


async def test_a_failed_model_attempt_is_reported_then_the_answer() -> None:
    from tenxgraph.core.exceptions import ModelUnavailableError

    down = ModelUnavailableError("down", context={"status_code": 503})
    hook = Record()
    app = tool_loop(Priced(tool_rounds(0), failures={0: down}), hooks=hook)
    result = await app.ainvoke(said("hi"), thread())
    failed, answered = hook.of(ModelCallFinished)
    assert failed.error is down
    assert failed.usage is None
    assert failed.cost is None
    assert answered.error is None
    assert answered.cost == pytest.approx(cost_of(1))
    assert result["token_usage"]["model_calls"] == 1


async def test_a_react_agent_takes_hooks_and_a_name_at_compile() -> None:
    from tenxgraph.prebuilt import ReactAgent

    hook = Record()
    app = ReactAgent(Priced(tool_rounds(1)), [add], retry_config=RETRY).compile(
        hooks=[hook], name="react"
    )
    await app.ainvoke(said("sum"), thread())
    assert hook.events[0].graph == "react"
    assert len(hook.of(ToolFinished)) == 2
    assert hook.events[-1].status == "completed"
    with pytest.raises(TypeError, match="hook"):
        ReactAgent(Priced(tool_rounds(0)), [add]).compile(hooks=[1])


async def test_a_stream_the_consumer_stops_reading_ends_cancelled_and_still_counts() -> None:
    import contextlib

    hook = Record()
    model = Priced(tool_rounds(1))
    app = tool_loop(model, hooks=hook)
    config = thread()
    async with contextlib.aclosing(app.astream(said("sum"), config)) as chunks:
        async for chunk in chunks:
            if chunk.message is not None and chunk.message.role == "tool":
                break  # after the first model call and the tools
    finished = hook.events[-1]
    assert isinstance(finished, RunFinished)
    assert finished.status == "cancelled"
    assert finished.error is not None
    assert finished.usage.model_calls == model.calls == 1
    state = await app.aget_state(config)
    assert state is not None
    assert state.execution_meta.usage.model_calls == 1  # what was spent stays counted


async def test_the_interrupt_event_carries_the_interrupt_as_the_caller_gets_it() -> None:
    hook = Record()
    app = tool_loop(Priced(tool_rounds(1)), ToolNode([add], requires_approval=True), hooks=hook)
    paused = await app.ainvoke(said("sum"), thread())
    (pause,) = hook.of(Interrupted)
    assert pause.data == paused["interrupt"]  # the question, with the pending calls' arguments
    assert pause.reason == "tool_approval"
    assert [c["id"] for c in pause.data["value"]["tool_calls"]] == ["c1a", "c1b"]
