"""Running a graph: the input, the config, and the result at each response granularity."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import Field

from tenxgraph.core.exceptions import GraphError, GraphRecursionError, NodeTimeoutError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message, TokenUsages
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import DEFAULT_NODE_TIMEOUT_SECONDS, DEFAULT_RECURSION_LIMIT, Command
from tenxgraph.utils.constants import END, START, ResponseGranularity
from tests.core.graph._support import ai, inp, linear, texts, user


class Profile(AgentState):
    name: str = "anon"
    age: int = 0
    tags: list[str] = Field(default_factory=list)


def echo(state: AgentState) -> str:
    return f"echo: {state.context[-1].text()}"


# -- input ----------------------------------------------------------------------------------


async def test_input_state_sets_custom_fields_and_omitted_ones_keep_their_value() -> None:
    seen: list[tuple[str, int, list[str]]] = []

    def look(state: Profile) -> None:
        seen.append((state.name, state.age, list(state.tags)))

    app = linear(look, state=Profile, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    await app.ainvoke(inp("hi", name="Ada", age=36), config)
    await app.ainvoke(inp("again", age=37), config)
    assert seen == [("Ada", 36, []), ("Ada", 37, [])]


async def test_input_state_on_a_new_thread_keeps_the_other_defaults() -> None:
    result = await linear(echo, state=Profile).ainvoke(
        inp("hi", tags=["x"]), response_granularity="full"
    )
    state = result["state"]
    assert (state.name, state.age, state.tags) == ("anon", 0, ["x"])


@pytest.mark.parametrize("field", ["context", "context_summary", "execution_meta"])
async def test_input_state_cannot_set_runtime_fields(field: str) -> None:
    app = linear(echo, state=Profile)
    with pytest.raises(ValueError, match=field):
        await app.ainvoke(inp("hi", **{field: None}))


async def test_input_state_with_an_unknown_field_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="nickname"):
        await linear(echo, state=Profile).ainvoke(inp("hi", nickname="x"))


async def test_unknown_input_key_is_a_value_error() -> None:
    data = {"messages": [user("hi")], "context": []}
    with pytest.raises(ValueError, match="context"):
        await linear(echo).ainvoke(data)


@pytest.mark.parametrize("data", [{}, {"messages": []}, None, {"state": {"name": "x"}}])
async def test_new_thread_without_messages_is_a_value_error(data: Any) -> None:
    with pytest.raises(ValueError, match="messages"):
        await linear(echo, state=Profile).ainvoke(data)


async def test_existing_thread_may_continue_without_new_messages() -> None:
    seen: list[str] = []

    def look(state: Profile) -> None:
        seen.append(state.name)

    app = linear(look, state=Profile, checkpointer=InMemoryCheckpointer())
    await app.ainvoke(inp("hi"), {"thread_id": "t"})
    await app.ainvoke({"state": {"name": "later"}}, {"thread_id": "t"})
    assert seen == ["anon", "later"]


async def test_invalid_value_in_input_state_names_the_field() -> None:
    ran: list[int] = []
    app = linear(lambda state: ran.append(1), state=Profile)  # type: ignore[arg-type]
    with pytest.raises((ValueError, GraphError), match="age"):
        await app.ainvoke(inp("hi", age="not a number"))
    assert ran == []


async def test_messages_given_as_dicts_are_validated_into_messages() -> None:
    seen: list[Any] = []

    def look(state: AgentState) -> None:
        seen.extend(state.context)

    data = {"messages": [{"role": "user", "content": "as a dict"}]}
    result = await linear(look).ainvoke(data)
    assert len(seen) == 1
    assert isinstance(seen[0], Message)
    assert seen[0].text() == "as a dict"
    assert isinstance(result["messages"][0], Message)


async def test_invalid_message_dict_is_rejected() -> None:
    with pytest.raises(ValueError, match="role"):
        await linear(echo).ainvoke({"messages": [{"role": "robot", "content": "x"}]})


# -- config ---------------------------------------------------------------------------------


async def test_thread_and_run_ids_are_generated_when_absent() -> None:
    configs: list[dict[str, Any]] = []

    def look(state: AgentState, config: dict[str, Any]) -> None:
        configs.append(config)

    app = linear(look)
    await app.ainvoke(inp("one"))
    await app.ainvoke(inp("two"))
    first, second = configs
    for config in configs:
        assert isinstance(config["thread_id"], str)
        assert config["thread_id"]
        assert isinstance(config["run_id"], str)
        assert config["run_id"]
    assert first["thread_id"] != second["thread_id"]
    assert first["run_id"] != second["run_id"]


async def test_given_thread_and_run_ids_and_unknown_keys_reach_the_node() -> None:
    configs: list[dict[str, Any]] = []

    def look(config: dict[str, Any]) -> None:
        configs.append(config)

    config = {"thread_id": "t-1", "run_id": "r-1", "user_id": "u-9", "llm": "fake", "n": 3}
    await linear(look).ainvoke(inp("hi"), config)
    (seen,) = configs
    assert seen["thread_id"] == "t-1"
    assert seen["run_id"] == "r-1"
    assert (seen["user_id"], seen["llm"], seen["n"]) == ("u-9", "fake", 3)


def counting_loop(limit_of_visits: int | None) -> tuple[StateGraph, list[int]]:
    """A node that routes back to itself until it ran `limit_of_visits` times."""
    visits: list[int] = []

    def spin(state: AgentState) -> Command:
        visits.append(1)
        if limit_of_visits is not None and len(visits) >= limit_of_visits:
            return Command(goto=END)
        return Command(goto="spin")

    graph = StateGraph()
    graph.add_node(spin)
    graph.add_edge(START, "spin")
    return graph, visits


async def test_default_recursion_limit_is_25_steps() -> None:
    assert DEFAULT_RECURSION_LIMIT == 25
    graph, visits = counting_loop(25)
    await graph.compile().ainvoke(inp("hi"))
    assert len(visits) == 25

    graph, visits = counting_loop(26)
    with pytest.raises(GraphRecursionError):
        await graph.compile().ainvoke(inp("hi"))
    assert len(visits) == 25


async def test_recursion_error_has_its_code_and_says_how_to_raise_the_limit() -> None:
    graph, visits = counting_loop(None)
    with pytest.raises(GraphRecursionError) as info:
        await graph.compile().ainvoke(inp("hi"), {"recursion_limit": 4})
    assert len(visits) == 4
    assert info.value.error_code == "RECURSION_001"
    assert "recursion_limit" in str(info.value)
    assert "4" in str(info.value)


async def test_a_higher_recursion_limit_lets_longer_runs_finish() -> None:
    graph, visits = counting_loop(40)
    await graph.compile().ainvoke(inp("hi"), {"recursion_limit": 40})
    assert len(visits) == 40


@pytest.mark.parametrize("limit", [0, -1, "10", 2.5, True])
async def test_invalid_recursion_limit_is_a_value_error(limit: Any) -> None:
    with pytest.raises(ValueError, match="recursion_limit"):
        await linear(echo).ainvoke(inp("hi"), {"recursion_limit": limit})


@pytest.mark.parametrize("seconds", ["5", [1]])
async def test_invalid_node_timeout_is_a_value_error(seconds: Any) -> None:
    with pytest.raises(ValueError, match="node_timeout"):
        await linear(echo).ainvoke(inp("hi"), {"node_timeout": seconds})


async def test_default_node_timeout_is_900_seconds() -> None:
    configs: list[dict[str, Any]] = []
    await linear(lambda config: configs.append(config)).ainvoke(inp("hi"))  # type: ignore[arg-type]
    assert DEFAULT_NODE_TIMEOUT_SECONDS == 900
    assert configs[0]["node_timeout"] == 900


async def brief_nap(state: AgentState) -> str:
    await asyncio.sleep(0.02)
    return "rested"


async def test_tiny_node_timeout_stops_a_slower_node() -> None:
    with pytest.raises(NodeTimeoutError):
        await linear(brief_nap).ainvoke(inp("hi"), {"node_timeout": 0.001})


@pytest.mark.parametrize("disabled", [None, 0])
async def test_node_timeout_none_or_zero_disables_the_limit(disabled: Any) -> None:
    result = await linear(brief_nap).ainvoke(inp("hi"), {"node_timeout": disabled})
    assert texts(result["messages"]) == ["hi", "rested"]


# -- the result -----------------------------------------------------------------------------


def two_replies(state: AgentState) -> list[Message]:
    return [ai("first"), ai("second")]


def closing(state: AgentState) -> str:
    return "closing"


async def test_low_result_is_last_user_message_then_run_messages() -> None:
    app = linear(two_replies, closing)
    system = Message.text_message("be nice", "system")
    data = {"messages": [system, user("earlier"), user("latest")]}
    result = await app.ainvoke(data)
    assert set(result) == {"messages", "token_usage"}
    assert texts(result["messages"]) == ["latest", "first", "second", "closing"]
    assert result["messages"][0] is data["messages"][2]


async def test_low_is_the_default_and_accepts_the_enum_and_string() -> None:
    app = linear(closing)
    for granularity in (ResponseGranularity.LOW, "low"):
        result = await app.ainvoke(inp("hi"), response_granularity=granularity)
        assert set(result) == {"messages", "token_usage"}
    assert set(await app.ainvoke(inp("hi"))) == {"messages", "token_usage"}


async def test_second_invoke_on_a_thread_returns_only_its_own_turn() -> None:
    app = linear(echo, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    await app.ainvoke(inp("one"), config)
    result = await app.ainvoke(inp("two"), config)
    assert texts(result["messages"]) == ["two", "echo: two"]


@pytest.mark.parametrize("granularity", [ResponseGranularity.PARTIAL, "partial"])
async def test_partial_result_adds_whole_context_and_summary(granularity: Any) -> None:
    def summarise(state: AgentState) -> dict[str, Any]:
        return {"context_summary": f"{len(state.context)} messages so far"}

    app = linear(echo, summarise, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    await app.ainvoke(inp("one"), config)
    result = await app.ainvoke(inp("two"), config, response_granularity=granularity)
    assert set(result) == {"messages", "token_usage", "context", "summary"}
    assert texts(result["messages"]) == ["two", "echo: two"]
    assert texts(result["context"]) == ["one", "echo: one", "two", "echo: two"]
    assert result["summary"] == "4 messages so far"


@pytest.mark.parametrize("granularity", [ResponseGranularity.FULL, "full"])
async def test_full_result_has_the_final_state(granularity: Any) -> None:
    def rename(state: Profile) -> dict[str, Any]:
        return {"name": "final"}

    result = await linear(echo, rename, state=Profile).ainvoke(
        inp("hi"), response_granularity=granularity
    )
    assert set(result) == {"state", "messages", "token_usage"}
    state = result["state"]
    assert isinstance(state, Profile)
    assert state.name == "final"
    assert texts(state.context) == ["hi", "echo: hi"]
    assert state.execution_meta.status == "completed"
    assert texts(result["messages"]) == ["hi", "echo: hi"]


def usage(prompt: int, completion: int, reasoning: int = 0) -> TokenUsages:
    return TokenUsages(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        reasoning_tokens=reasoning,
    )


async def test_token_usage_sums_the_runs_messages() -> None:
    def model_a(state: AgentState) -> Message:
        message = ai("a")
        message.usages = usage(10, 5, 2)
        return message

    def model_b(state: AgentState) -> list[Message]:
        with_usage = ai("b")
        with_usage.usages = usage(7, 3, 1)
        return [with_usage, ai("no usage")]

    app = linear(model_a, model_b, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    first = await app.ainvoke(inp("hi"), config)
    assert first["token_usage"] == {
        "total_input_tokens": 17,
        "total_output_tokens": 8,
        "total_reasoning_tokens": 3,
        "total_tokens": 25,
        "total_cache_read_tokens": 0,
        "total_cache_write_tokens": 0,
        "model_calls": 2,  # the answers that carry a usage
        "cost": None,  # made by nodes of their own: no price known, so no total either
        "unpriced_calls": 2,
    }
    # a later run counts only its own messages
    second = await app.ainvoke(inp("again"), config)
    assert second["token_usage"] == first["token_usage"]


async def test_token_usage_is_zero_without_usages() -> None:
    result = await linear(closing).ainvoke(inp("hi"))
    assert result["token_usage"] == {
        "total_input_tokens": 0,
        "total_output_tokens": 0,
        "total_reasoning_tokens": 0,
        "total_tokens": 0,
        "total_cache_read_tokens": 0,
        "total_cache_write_tokens": 0,
        "model_calls": 0,
        "cost": 0.0,
        "unpriced_calls": 0,
    }
