"""Graphs the server tests serve, built on offline models: an agent with a tool whose answer
streams in several chunks, an agent whose tool asks a human (`interrupt`), a step held open by
a `Gate` until the test releases it, and a graph with a subgraph node."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

from tenxgraph import END, START, StateGraph
from tenxgraph.core.graph.compiled_graph import CompiledGraph
from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import CustomEvent, Message, ToolCallBlock
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.utils import interrupt

ANSWER_PIECES = ["It is ", "sunny ", "in ", "Lisbon."]


async def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return f"{city}: sunny"


def _weather(messages: list[Message], info: ModelInfo) -> str | ToolCallBlock:
    if messages[-1].role == "tool":
        return "".join(ANSWER_PIECES)
    return ToolCallBlock(id="w1", name="get_weather", args={"city": "Lisbon"})


async def _weather_stream(
    messages: list[Message], info: ModelInfo
) -> AsyncIterator[str | ToolCallBlock]:
    if messages[-1].role != "tool":
        yield ToolCallBlock(id="w1", name="get_weather", args={"city": "Lisbon"})
        return
    for piece in ANSWER_PIECES:
        yield piece


def weather_agent() -> CompiledGraph[Any]:
    """Calls `get_weather` once, then answers in `ANSWER_PIECES`."""
    model = FunctionModel(_weather, _weather_stream)
    return ReactAgent(model, [get_weather], "Use the tools.").compile(name="agent")


async def transfer(amount: int, to: str) -> str:
    """Send money to someone (a human approves it first)."""
    answer = interrupt({"amount": amount, "to": to}, message=f"Send {amount} to {to}?")
    return f"sent {amount} to {to}" if answer == "yes" else f"declined: {answer}"


def _approval(messages: list[Message], info: ModelInfo) -> str | ToolCallBlock:
    if messages[-1].role == "tool":
        return f"done: {messages[-1].text()}"
    return ToolCallBlock(id="t1", name="transfer", args={"amount": 40, "to": "Bob"})


def approval_agent() -> CompiledGraph[Any]:
    """Asks to `transfer`, whose `interrupt` pauses the run until a `resume` answer."""
    return ReactAgent(FunctionModel(_approval), [transfer], "Move money.").compile(name="approval")


class Gate:
    """Holds a graph's step open: `entered` is set when a step starts waiting, `release` lets
    every waiting step (and later ones) finish. Waiting happens in a thread, so a cancelled
    run's step stops at once while its thread waits for `release` (set at teardown)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.started = 0

    async def wait_entered(self) -> None:
        await asyncio.to_thread(self.entered.wait, 10)
        assert self.entered.is_set(), "the held step never started"


def held_graph(gate: Gate) -> CompiledGraph[Any]:
    """One step that says which turn it is, after waiting at `gate`."""

    async def hold(state: Any) -> str:
        gate.started += 1
        gate.entered.set()
        await asyncio.to_thread(gate.release.wait)
        return f"held {len(state.context)}"

    graph = StateGraph()
    graph.add_node("hold", hold)
    graph.add_edge(START, "hold")
    graph.add_edge("hold", END)
    return graph.compile(name="held")


def steps_graph(gate: Gate) -> CompiledGraph[Any]:
    """Two steps: `note` answers "noted <input>" (saved as a step of its own; for the input
    "ask", "noted <the answer to an interrupt>"), then `answer` says which turn it is; it
    first waits at `gate` when `note` said "noted hold"."""

    def note(state: Any) -> str:
        said = state.context[-1].text()
        return f"noted {interrupt('what should I note?') if said == 'ask' else said}"

    async def answer(state: Any) -> str:
        if state.context[-1].text() == "noted hold":
            gate.started += 1
            gate.entered.set()
            await asyncio.to_thread(gate.release.wait)
        return f"answer {len(state.context)}"

    graph = StateGraph()
    graph.add_node("note", note)
    graph.add_node("answer", answer)
    graph.add_edge(START, "note")
    graph.add_edge("note", "answer")
    graph.add_edge("answer", END)
    return graph.compile(name="steps")


def nested_graph() -> CompiledGraph[Any]:
    """A parent whose `child` node is a graph that answers "from child"."""

    def inner(state: Any) -> str:
        return "from child"

    child = StateGraph()
    child.add_node("inner", inner)
    child.add_edge(START, "inner")
    child.add_edge("inner", END)

    def after(state: Any) -> str:
        return "from parent"

    parent = StateGraph()
    parent.add_node("child", child.compile(name="child"))
    parent.add_node("after", after)
    parent.add_edge(START, "child")
    parent.add_edge("child", "after")
    parent.add_edge("after", END)
    return parent.compile(name="nested")


def failing_graph() -> CompiledGraph[Any]:
    """One step that raises."""

    def fail(state: Any) -> str:
        raise RuntimeError("the step broke")

    graph = StateGraph()
    graph.add_node("fail", fail)
    graph.add_edge(START, "fail")
    graph.add_edge("fail", END)
    return graph.compile(name="failing")


def progress_graph() -> CompiledGraph[Any]:
    """One async generator step that streams its progress (`CustomEvent`), then answers."""

    async def work(state: Any) -> AsyncIterator[Any]:
        for done in (1, 2):
            yield CustomEvent({"done": done, "of": 2})
        yield Message.text_message("finished", role="assistant")

    graph = StateGraph()
    graph.add_node("work", work)
    graph.add_edge(START, "work")
    graph.add_edge("work", END)
    return graph.compile(name="progress")


def all_graphs(gate: Gate) -> dict[str, CompiledGraph[Any]]:
    return {
        "agent": weather_agent(),
        "approval": approval_agent(),
        "held": held_graph(gate),
        "nested": nested_graph(),
        "failing": failing_graph(),
        "progress": progress_graph(),
        "steps": steps_graph(gate),
    }
