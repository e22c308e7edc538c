"""ReactAgent: the model -> tools -> model loop, and `tools_condition` for building it by hand."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tenxgraph.core.graph import Agent, CompiledGraph, StateGraph, ToolNode
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.state import AgentState, Message, ToolResultBlock
from tenxgraph.prebuilt import ReactAgent, tools_condition
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import interrupt, tool
from tenxgraph.utils.constants import END, START
from tests._helpers import asking, results, roles, thread, tool_call
from tests.core.graph._support import user
from tests.core.llm._support import Script

# -- helpers --------------------------------------------------------------------------------


def outputs(messages: list[Message]) -> dict[str, Any]:
    """Tool outputs by call id."""
    return {call_id: block.output for call_id, block in results(messages).items()}


def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def to_fahrenheit(celsius: float) -> float:
    """Convert a temperature."""
    return celsius * 9 / 5 + 32


async def run(app: CompiledGraph, text: str, config: dict[str, Any] | None = None) -> AgentState:
    result = await app.ainvoke({"messages": [user(text)]}, config, response_granularity="full")
    state: AgentState = result["state"]
    return state


# -- the loop ---------------------------------------------------------------------------------


async def test_with_the_test_model_it_runs_model_tools_model_and_ends() -> None:
    store = InMemoryCheckpointer()
    app = ReactAgent("test", [weather]).compile(checkpointer=store)
    config = thread()
    state = await run(app, "weather?", config)
    assert roles(state.context) == ["user", "assistant", "tool", "assistant"]
    [asked] = state.context[1].tool_call_blocks()
    assert asked.name == "weather"
    assert outputs(state.context) == {asked.id: "sunny in a"}  # the test model's made-up "a"
    assert state.context[-1].text() == 'Tool results: {"weather": "sunny in a"}'
    assert not state.context[-1].has_tool_calls()
    stored = await app.aget_state(config)
    assert stored is not None
    assert stored.execution_meta.status == "completed"
    assert roles(stored.context) == roles(state.context)


async def test_two_rounds_of_tool_calls_then_an_answer() -> None:
    script = Script(
        [tool_call("weather", "w1", city="Oslo"), tool_call("weather", "w2", city="Rome")],
        tool_call("to_fahrenheit", "f1", celsius=20),
        "Oslo and Rome are sunny; 20 C is 68 F",
    )
    state = await run(ReactAgent(FunctionModel(script), [weather, to_fahrenheit]).compile(), "go")
    assert roles(state.context) == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert outputs(state.context) == {"w1": "sunny in Oslo", "w2": "sunny in Rome", "f1": 68.0}
    assert len(script.seen) == 3
    assert outputs(script.seen[1]) == {"w1": "sunny in Oslo", "w2": "sunny in Rome"}
    assert outputs(script.seen[2])["f1"] == 68.0
    assert state.context[-1].text() == "Oslo and Rome are sunny; 20 C is 68 F"


async def test_an_answer_without_tool_calls_ends_at_once() -> None:
    ran: list[str] = []

    def never() -> str:
        ran.append("never")
        return "x"

    script = Script("hello")
    state = await run(ReactAgent(FunctionModel(script), [never]).compile(), "hi")
    assert roles(state.context) == ["user", "assistant"]
    assert ran == []
    assert len(script.seen) == 1


async def test_the_model_is_offered_the_tools() -> None:
    script = Script("no calls")
    await run(ReactAgent(FunctionModel(script), [weather, to_fahrenheit]).compile(), "hi")
    offered = [t["function"]["name"] for t in script.infos[0].tools]
    assert offered == ["weather", "to_fahrenheit"]


async def test_system_prompt_and_agent_options_reach_the_agent() -> None:
    script = Script("ok")
    react = ReactAgent(
        FunctionModel(script), [weather], system_prompt="You are terse.", temperature=0.2
    )
    await run(react.compile(), "hi")
    [first, second] = script.seen[0]
    assert (first.role, first.text()) == ("system", "You are terse.")
    assert (second.role, second.text()) == ("user", "hi")
    assert script.infos[0].settings["temperature"] == 0.2


async def test_tools_tags_from_the_options_limit_the_offered_tools() -> None:
    @tool(tags=["public"])
    def shout(text: str) -> str:
        return text.upper()

    script = Script("ok")
    await run(
        ReactAgent(FunctionModel(script), [weather, shout], tools_tags=["public"]).compile(), "hi"
    )
    assert [t["function"]["name"] for t in script.infos[0].tools] == ["shout"]


class Customer(AgentState):
    name: str = "nobody"


async def test_a_state_class_and_prompt_placeholders_from_its_fields() -> None:
    script = Script("ok")
    react = ReactAgent(
        FunctionModel(script), [weather], system_prompt="Help {name}.", state=Customer
    )
    app = react.compile()
    result = await app.ainvoke(
        {"messages": [user("hi")], "state": {"name": "Ann"}}, response_granularity="full"
    )
    assert isinstance(result["state"], Customer)
    assert script.seen[0][0].text() == "Help Ann."


async def test_a_tool_node_can_be_passed_as_it_is() -> None:
    node = ToolNode([weather])
    react = ReactAgent(FunctionModel(Script(tool_call("weather", "w", city="Oslo"), "ok")), node)
    assert react.tool_node is node
    state = await run(react.compile(), "go")
    assert outputs(state.context) == {"w": "sunny in Oslo"}


async def test_compile_takes_breakpoints_on_the_nodes_named_agent_and_tools() -> None:
    script = Script(tool_call("weather", "w", city="Oslo"), "ok")
    app = ReactAgent(FunctionModel(script), [weather]).compile(
        checkpointer=InMemoryCheckpointer(), interrupt_before=["tools"]
    )
    config = thread()
    paused = await app.ainvoke({"messages": [user("go")]}, config)
    assert paused["interrupted"]["node"] == "tools"
    assert paused["interrupted"]["reason"] == "interrupt_before"
    done = await app.ainvoke(None, config, response_granularity="full")
    assert outputs(done["state"].context) == {"w": "sunny in Oslo"}
    assert done["state"].context[-1].text() == "ok"


async def test_an_interrupt_in_a_tool_pauses_and_resume_replays_the_finished_calls() -> None:
    charged: list[int] = []

    def charge(amount: int) -> str:
        charged.append(amount)
        return f"charged {amount}"

    def approve() -> str:
        return f"approved: {interrupt('approve?')}"

    script = Script([tool_call("charge", "c", amount=5), tool_call("approve", "a")], "done")
    app = ReactAgent(FunctionModel(script), [charge, approve]).compile(
        checkpointer=InMemoryCheckpointer()
    )
    config = thread()
    paused = await app.ainvoke({"messages": [user("go")]}, config)
    assert paused["interrupt"]["key"] == "tool:a:0"
    result = await app.ainvoke({"resume": "yes"}, config, response_granularity="full")
    assert charged == [5]
    assert outputs(result["state"].context) == {"c": "charged 5", "a": "approved: yes"}
    assert result["state"].context[-1].text() == "done"


# -- tools_condition --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("context", "route"),
    [
        ([user("hi"), asking(tool_call("weather", "w", city="x"))], "tools"),
        ([user("hi"), Message.text_message("hello", "assistant")], END),
        (
            [
                asking(tool_call("weather", "w", city="x")),
                Message.tool_message([ToolResultBlock(call_id="w", output="sunny")]),
            ],
            END,
        ),
        ([user("hi")], END),
        ([], END),
        (
            [
                user("hi"),
                asking(tool_call("weather", "w", city="x")),
                Message.text_message("note", "system"),
            ],
            "tools",
        ),
        (
            [
                user("hi"),
                Message(
                    role="assistant",
                    content=[],
                    tools_calls=[
                        {
                            "id": "w",
                            "type": "function",
                            "function": {"name": "weather", "arguments": json.dumps({})},
                        }
                    ],
                ),
            ],
            "tools",
        ),
    ],
    ids=[
        "calls",
        "text-answer",
        "after-results",
        "no-answer-yet",
        "empty",
        "system-note-after-calls",
        "openai-tools-calls-only",
    ],
)
def test_tools_condition_routes_to_tools_only_when_the_last_answer_asks_for_them(
    context: list[Message], route: str
) -> None:
    assert tools_condition(AgentState(context=context)) == route


async def test_tools_condition_builds_the_same_loop_by_hand() -> None:
    script = Script(tool_call("weather", "w", city="Oslo"), "sunny, then")
    node = ToolNode([weather])
    graph = StateGraph()
    graph.add_node("model", Agent(FunctionModel(script), tool_node=node))
    graph.add_node("tools", node)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "model")
    state = await run(graph.compile(), "go")
    assert roles(state.context) == ["user", "assistant", "tool", "assistant"]
    assert outputs(state.context) == {"w": "sunny in Oslo"}
    assert state.context[-1].text() == "sunny, then"


def test_react_agent_and_tools_condition_are_exported_from_prebuilt() -> None:
    import tenxgraph.prebuilt as prebuilt

    assert set(prebuilt.__all__) >= {"ReactAgent", "tools_condition"}
    assert prebuilt.ReactAgent is ReactAgent
    assert prebuilt.tools_condition is tools_condition
