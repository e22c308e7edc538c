"""Nodes: how they are called, and what the engine makes of what they return."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any

import pytest
from pydantic import Field

from tenxgraph.core.exceptions import NodeError
from tenxgraph.core.state import AgentState, Message, ToolResult, append_items
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import Command
from tests.core.graph._support import ai, inp, linear, texts


def append(left: list[str], right: list[str]) -> list[str]:
    return [*left, *right]


def add(left: int, right: int) -> int:
    return left + right


class Notes(AgentState):
    note: str = ""
    count: int = 0
    log: Annotated[list[str], append] = Field(default_factory=list)
    total: Annotated[int, add] = 0
    seen: Annotated[list[dict[str, Any]], append_items] = Field(default_factory=list)
    data: dict[str, Any] = Field(default_factory=dict)


async def full(app: Any, data: dict[str, Any] | None = None, **config: Any) -> Any:
    result = await app.ainvoke(data or inp("hi"), config or None, response_granularity="full")
    return result


# -- calling conventions --------------------------------------------------------------------


def by_state(state: AgentState) -> str:
    return f"state:{len(state.context)}"


def by_config(config: dict[str, Any]) -> str:
    return f"config:{config['marker']}"


def by_both(state: AgentState, config: dict[str, Any]) -> str:
    return f"both:{len(state.context)}:{config['marker']}"


def by_both_reversed(config: dict[str, Any], state: AgentState) -> str:
    return f"both:{len(state.context)}:{config['marker']}"


def positional(anything: AgentState) -> str:
    return f"positional:{len(anything.context)}"


def keyword_only(*, snapshot: AgentState) -> str:
    return f"keyword:{len(snapshot.context)}"


def no_params() -> str:
    return "none"


async def async_by_state(state: AgentState) -> str:
    return f"state:{len(state.context)}"


async def async_by_both(state: AgentState, config: dict[str, Any]) -> str:
    return f"both:{len(state.context)}:{config['marker']}"


async def async_positional(anything: AgentState) -> str:
    return f"positional:{len(anything.context)}"


async def async_keyword_only(*, snapshot: AgentState) -> str:
    return f"keyword:{len(snapshot.context)}"


class CallableNode:
    def __call__(self, state: AgentState) -> str:
        return f"callable:{len(state.context)}"


class AsyncCallableNode:
    async def __call__(self, state: AgentState, config: dict[str, Any]) -> str:
        return f"async callable:{config['marker']}"


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (by_state, "state:1"),
        (by_config, "config:m"),
        (by_both, "both:1:m"),
        (by_both_reversed, "both:1:m"),
        (positional, "positional:1"),
        (keyword_only, "keyword:1"),
        (no_params, "none"),
        (async_by_state, "state:1"),
        (async_by_both, "both:1:m"),
        (async_positional, "positional:1"),
        (async_keyword_only, "keyword:1"),
        (CallableNode(), "callable:1"),
        (AsyncCallableNode(), "async callable:m"),
        (lambda s: f"lambda:{len(s.context)}", "lambda:1"),
    ],
)
async def test_node_calling_conventions(node: Any, expected: str) -> None:
    app = linear(("node", node))
    result = await app.ainvoke(inp("hi"), {"marker": "m"})
    assert texts(result["messages"]) == ["hi", expected]


async def test_sync_nodes_run_in_a_worker_thread_and_async_ones_on_the_loop() -> None:
    threads: dict[str, threading.Thread] = {}

    def sync_node(state: AgentState) -> None:
        threads["sync"] = threading.current_thread()

    async def async_node(state: AgentState) -> None:
        threads["async"] = threading.current_thread()

    await linear(sync_node, async_node).ainvoke(inp("hi"))
    loop_thread = threading.current_thread()
    assert threads["async"] is loop_thread
    assert threads["sync"] is not loop_thread


async def test_sync_node_does_not_block_the_event_loop() -> None:
    release = threading.Event()
    entered = threading.Event()

    def blocking(state: AgentState) -> str:
        entered.set()
        assert release.wait(5)
        return "unblocked"

    task = asyncio.create_task(linear(blocking).ainvoke(inp("hi")))
    # the loop keeps running while the sync node waits in its thread
    await asyncio.to_thread(entered.wait, 5)
    assert not task.done()
    release.set()
    result = await task
    assert texts(result["messages"])[-1] == "unblocked"


# -- return values --------------------------------------------------------------------------


async def test_returning_a_message_appends_it() -> None:
    message = ai("hello")
    result = await full(linear(lambda s: message))
    assert result["state"].context[-1].message_id == message.message_id
    assert texts(result["messages"]) == ["hi", "hello"]


async def test_returning_a_list_of_messages_appends_them_in_order() -> None:
    result = await full(linear(lambda s: [ai("one"), ai("two"), ai("three")]))
    assert texts(result["state"].context) == ["hi", "one", "two", "three"]


async def test_returning_a_str_appends_an_assistant_message() -> None:
    result = await full(linear(lambda s: "plain text"))
    last = result["state"].context[-1]
    assert (last.role, last.text()) == ("assistant", "plain text")


async def test_returning_none_changes_nothing_but_the_step() -> None:
    result = await full(linear(lambda s: None, state=Notes))
    state = result["state"]
    assert texts(state.context) == ["hi"]
    assert (state.note, state.count, state.log) == ("", 0, [])
    assert texts(result["messages"]) == ["hi"]


async def test_returning_a_dict_updates_the_named_fields_only() -> None:
    result = await full(linear(lambda s: {"note": "n", "count": 3}, state=Notes))
    state = result["state"]
    assert (state.note, state.count, state.data) == ("n", 3, {})
    assert texts(state.context) == ["hi"]


async def test_dict_with_context_adds_messages() -> None:
    result = await full(linear(lambda s: {"context": [ai("via context")]}, state=Notes))
    assert texts(result["state"].context) == ["hi", "via context"]


async def test_dict_with_an_unknown_key_is_a_node_error_naming_it() -> None:
    app = linear(("bad", lambda s: {"colour": "red"}), state=Notes)
    with pytest.raises(NodeError, match="colour") as info:
        await app.ainvoke(inp("hi"))
    assert "bad" in str(info.value)


async def test_dict_with_messages_key_hints_at_context() -> None:
    app = linear(("bad", lambda s: {"messages": [ai("x")]}))
    with pytest.raises(NodeError, match="messages") as info:
        await app.ainvoke(inp("hi"))
    assert "context" in str(info.value)


async def test_dict_setting_execution_meta_is_a_node_error() -> None:
    app = linear(("bad", lambda s: {"execution_meta": {}}))
    with pytest.raises(NodeError, match="execution_meta"):
        await app.ainvoke(inp("hi"))


async def test_state_mutated_in_place_and_returned() -> None:
    reply = ai("in place")

    def mutate(state: Notes) -> Notes:
        state.note = "assigned"
        state.context.append(reply)
        return state

    app = linear(mutate, state=Notes, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    result = await app.ainvoke(inp("hi"), config, response_granularity="full")
    assert result["state"].note == "assigned"
    assert texts(result["state"].context) == ["hi", "in place"]
    assert texts(result["messages"]) == ["hi", "in place"]
    stored = await app.aget_state(config)
    assert stored is not None
    assert texts(stored.context) == ["hi", "in place"]  # stored once
    assert stored.note == "assigned"


async def test_state_mutated_in_place_without_returning_it() -> None:
    def mutate(state: Notes) -> None:
        state.count = 5
        state.context.append(ai("appended"))

    app = linear(mutate, state=Notes, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    result = await app.ainvoke(inp("hi"), config, response_granularity="full")
    assert result["state"].count == 5
    assert texts(result["messages"]) == ["hi", "appended"]
    stored = await app.aget_state(config)
    assert stored is not None
    assert texts(stored.context) == ["hi", "appended"]
    assert stored.count == 5


async def test_context_rebound_in_place_is_stored_once() -> None:
    def rebind(state: AgentState) -> None:
        state.context = [*state.context, ai("rebound")]

    app = linear(rebind, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    result = await app.ainvoke(inp("hi"), config)
    assert texts(result["messages"]) == ["hi", "rebound"]
    stored = await app.aget_state(config)
    assert stored is not None
    assert texts(stored.context) == ["hi", "rebound"]


async def test_returning_a_model_copy_with_updates() -> None:
    def copy(state: Notes) -> Notes:
        return state.model_copy(update={"note": "copied", "count": 2})

    result = await full(linear(copy, state=Notes))
    assert (result["state"].note, result["state"].count) == ("copied", 2)
    assert texts(result["state"].context) == ["hi"]


async def test_returning_a_model_copy_with_new_context() -> None:
    def copy(state: Notes) -> Notes:
        return state.model_copy(update={"context": [*state.context, ai("added")]})

    app = linear(copy, state=Notes, checkpointer=InMemoryCheckpointer())
    result = await app.ainvoke(inp("hi"), {"thread_id": "t"})
    assert texts(result["messages"]) == ["hi", "added"]
    stored = await app.aget_state({"thread_id": "t"})
    assert stored is not None
    assert texts(stored.context) == ["hi", "added"]


async def test_command_update_is_applied() -> None:
    def node(state: Notes) -> Command:
        return Command(update={"note": "by command", "context": [ai("c")]})

    result = await full(linear(node, state=Notes))
    assert result["state"].note == "by command"
    assert texts(result["state"].context) == ["hi", "c"]


async def test_command_update_may_be_a_message_or_str() -> None:
    app = linear(("a", lambda s: Command(update=ai("msg"))), ("b", lambda s: Command(update="s")))
    result = await app.ainvoke(inp("hi"))
    assert texts(result["messages"]) == ["hi", "msg", "s"]


async def test_tool_result_adds_its_message_and_updates_state() -> None:
    def tool(state: Notes) -> ToolResult:
        return ToolResult(
            message=Message.tool_message("42"), state={"note": "from tool", "count": 1}
        )

    result = await full(linear(tool, state=Notes))
    state = result["state"]
    assert state.context[-1].role == "tool"
    assert state.context[-1].text() == "42"
    assert (state.note, state.count) == ("from tool", 1)


async def test_tool_result_state_goes_through_reducers() -> None:
    def tool(state: Notes) -> ToolResult:
        return ToolResult(message="done", state={"log": ["t"], "total": 2})

    app = linear(("seed", lambda s: {"log": ["s"], "total": 1}), tool, state=Notes)
    state = (await full(app))["state"]
    assert (state.log, state.total) == (["s", "t"], 3)
    assert texts(state.context) == ["hi", "done"]


async def test_tool_result_without_message_only_updates_state() -> None:
    result = await full(linear(lambda s: ToolResult(state={"count": 9}), state=Notes))
    assert result["state"].count == 9
    assert texts(result["state"].context) == ["hi"]


@pytest.mark.parametrize("value", [42, 3.5, object(), b"bytes"])
async def test_unsupported_return_type_is_node_002(value: Any) -> None:
    app = linear(("odd", lambda s: value))
    with pytest.raises(NodeError) as info:
        await app.ainvoke(inp("hi"))
    assert info.value.error_code == "NODE_002"
    assert "odd" in str(info.value)
    assert type(value).__name__ in str(info.value)


async def test_list_holding_a_non_message_is_node_002() -> None:
    app = linear(("odd", lambda s: [ai("ok"), 5]))
    with pytest.raises(NodeError) as info:
        await app.ainvoke(inp("hi"))
    assert info.value.error_code == "NODE_002"


async def test_returning_another_state_class_is_node_002() -> None:
    app = linear(("odd", lambda s: AgentState()), state=Notes)
    with pytest.raises(NodeError) as info:
        await app.ainvoke(inp("hi"))
    assert info.value.error_code == "NODE_002"


# -- reducers -------------------------------------------------------------------------------


async def test_reducer_fields_merge_every_update() -> None:
    app = linear(
        ("a", lambda s: {"log": ["a"], "total": 1}),
        ("b", lambda s: {"log": ["b"], "total": 2}),
        ("c", lambda s: ToolResult(state={"log": ["c"], "total": 3})),
        state=Notes,
    )
    result = await full(app)
    assert result["state"].log == ["a", "b", "c"]
    assert result["state"].total == 6


async def test_reducers_merge_with_the_value_from_earlier_runs() -> None:
    app = linear(("a", lambda s: {"log": ["x"]}), state=Notes, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    await app.ainvoke(inp("1"), config)
    result = await app.ainvoke(inp("2"), config, response_granularity="full")
    assert result["state"].log == ["x", "x"]


async def test_append_items_reducer_skips_known_ids() -> None:
    app = linear(
        ("a", lambda s: {"seen": [{"id": 1}, {"id": 2}]}),
        ("b", lambda s: {"seen": [{"id": 2}, {"id": 3}]}),
        state=Notes,
    )
    result = await full(app)
    assert [item["id"] for item in result["state"].seen] == [1, 2, 3]


async def test_fields_without_reducer_are_replaced() -> None:
    app = linear(
        ("a", lambda s: {"note": "first", "data": {"a": 1}}),
        ("b", lambda s: {"note": "second", "data": {"b": 2}}),
        state=Notes,
    )
    result = await full(app)
    assert (result["state"].note, result["state"].data) == ("second", {"b": 2})


async def test_reducer_update_next_to_a_plain_field_update_is_kept() -> None:
    app = linear(("a", lambda s: {"note": "n", "log": ["a"], "total": 4}), state=Notes)
    result = await full(app)
    assert result["state"].note == "n"
    assert result["state"].log == ["a"]
    assert result["state"].total == 4


async def test_reducer_update_next_to_an_in_place_assignment_is_kept() -> None:
    def node(state: Notes) -> dict[str, Any]:
        state.note = "in place"
        return {"log": ["a"]}

    result = await full(linear(node, state=Notes))
    assert result["state"].note == "in place"
    assert result["state"].log == ["a"]


async def test_reducer_update_before_a_plain_field_update_is_kept() -> None:
    app = linear(("a", lambda s: {"log": ["a"], "note": "n"}), state=Notes)
    result = await full(app)
    assert (result["state"].log, result["state"].note) == (["a"], "n")


async def test_invalid_value_for_a_typed_field_is_a_node_error_and_changes_nothing() -> None:
    def bad(state: Notes) -> dict[str, Any]:
        return {"note": "would be set", "count": "not a number", "context": [ai("lost")]}

    app = linear(
        ("ok", lambda s: {"note": "kept"}), bad, state=Notes, checkpointer=InMemoryCheckpointer()
    )
    config = {"thread_id": "t"}
    with pytest.raises(NodeError, match="count") as info:
        await app.ainvoke(inp("hi"), config)
    assert info.value.context.get("field") == "count"
    stored = await app.aget_state(config)
    assert stored is not None
    assert stored.note == "kept"
    assert stored.count == 0
    assert texts(stored.context) == ["hi"]


async def test_invalid_in_place_assignment_is_a_node_error_naming_the_field() -> None:
    def bad(state: Notes) -> None:
        state.count = "many"  # type: ignore[assignment]

    with pytest.raises(NodeError, match="count"):
        await linear(bad, state=Notes).ainvoke(inp("hi"))


async def test_valid_value_is_coerced_by_the_field_type() -> None:
    result = await full(linear(lambda s: {"count": "12"}, state=Notes))
    assert result["state"].count == 12
