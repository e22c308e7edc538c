"""BaseContextManager (abstract) and MessageContextManager (trim by user turns)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenxgraph.core.state import (
    AgentState,
    BaseContextManager,
    Message,
    MessageContextManager,
)
from tests._helpers import call, msg, result, same_objects

# -- BaseContextManager -----------------------------------------------------------------------


def test_subclass_missing_trim_context_cannot_be_instantiated() -> None:
    class OnlyAsync(BaseContextManager[AgentState]):
        async def atrim_context(self, state: AgentState) -> AgentState:
            return state

    with pytest.raises(TypeError, match="trim_context"):
        OnlyAsync()  # type: ignore[abstract]


def test_subclass_missing_atrim_context_cannot_be_instantiated() -> None:
    class OnlySync(BaseContextManager[AgentState]):
        def trim_context(self, state: AgentState) -> AgentState:
            return state

    with pytest.raises(TypeError, match="atrim_context"):
        OnlySync()  # type: ignore[abstract]


async def test_complete_subclass_can_be_instantiated_and_used() -> None:
    class KeepLast(BaseContextManager[AgentState]):
        def trim_context(self, state: AgentState) -> AgentState:
            return state.model_copy(update={"context": state.context[-1:]})

        async def atrim_context(self, state: AgentState) -> AgentState:
            return self.trim_context(state)

    state = AgentState(context=[msg("user"), msg("assistant")])
    assert len((await KeepLast().atrim_context(state)).context) == 1
    with pytest.raises(TypeError):
        BaseContextManager()  # type: ignore[abstract]


# -- MessageContextManager --------------------------------------------------------------------


@pytest.mark.parametrize("max_messages", [0, -1, -10])
def test_max_messages_below_one_is_rejected(max_messages: int) -> None:
    with pytest.raises(ValueError, match="max_messages"):
        MessageContextManager(max_messages=max_messages)


def test_defaults() -> None:
    manager = MessageContextManager()
    assert manager.max_messages == 10
    assert manager.remove_tool_msgs is False
    assert MessageContextManager(max_messages=1).max_messages == 1


def test_nothing_to_trim_returns_the_same_state() -> None:
    context = [msg("system"), msg("user"), msg("assistant"), msg("user"), msg("assistant")]
    state = AgentState(context=context)
    snapshot = list(state.context)
    assert MessageContextManager(max_messages=2).trim_context(state) is state
    assert same_objects(state.context, snapshot)
    empty = AgentState()
    assert MessageContextManager(max_messages=1).trim_context(empty) is empty


def test_keeps_system_first_and_last_user_turns() -> None:
    sys, u1, a1, u2, a2, u3, a3 = (
        msg("system"),
        msg("user"),
        msg("assistant"),
        msg("user"),
        msg("assistant"),
        msg("user"),
        msg("assistant"),
    )
    state = AgentState(context=[sys, u1, a1, u2, a2, u3, a3])
    trimmed = MessageContextManager(max_messages=2).trim_context(state)
    assert same_objects(trimmed.context, [sys, u2, a2, u3, a3])


def test_keeps_the_first_message_even_when_it_is_not_a_system_message() -> None:
    u1, a1, u2, a2, u3, a3 = (msg(r) for r in ["user", "assistant"] * 3)
    state = AgentState(context=[u1, a1, u2, a2, u3, a3])
    trimmed = MessageContextManager(max_messages=1).trim_context(state)
    assert same_objects(trimmed.context, [u1, u3, a3])


def test_keeps_system_messages_from_the_trimmed_part() -> None:
    u1, a1, sys, u2, a2, u3 = (
        msg("user"),
        msg("assistant"),
        msg("system"),
        msg("user"),
        msg("assistant"),
        msg("user"),
    )
    state = AgentState(context=[u1, a1, sys, u2, a2, u3])
    trimmed = MessageContextManager(max_messages=1).trim_context(state)
    assert same_objects(trimmed.context, [u1, sys, u3])


def test_a_user_turn_keeps_everything_after_it() -> None:
    u1, u2 = msg("user"), msg("user")
    tail = [call("c1"), result("c1"), msg("assistant"), msg("system"), msg("assistant")]
    state = AgentState(context=[u1, msg("assistant"), u2, *tail])
    trimmed = MessageContextManager(max_messages=1).trim_context(state)
    assert same_objects(trimmed.context, [u1, u2, *tail])


def test_never_splits_a_tool_call_from_its_results() -> None:
    u1, u2 = msg("user"), msg("user")
    old = [call("c1", "c2"), result("c1"), result("c2"), msg("assistant")]
    recent = [call("c3"), result("c3"), msg("assistant")]
    state = AgentState(context=[u1, *old, u2, *recent])
    trimmed = MessageContextManager(max_messages=1).trim_context(state)
    assert same_objects(trimmed.context, [u1, u2, *recent])


def test_a_first_message_that_calls_tools_keeps_its_results() -> None:
    first, first_result = call("c0"), result("c0")
    u1, a1, u2, a2 = msg("user"), msg("assistant"), msg("user"), msg("assistant")
    state = AgentState(context=[first, first_result, u1, a1, u2, a2])
    trimmed = MessageContextManager(max_messages=1).trim_context(state)
    assert same_objects(trimmed.context, [first, first_result, u2, a2])


def test_trimming_does_not_modify_the_input_state() -> None:
    class Custom(AgentState):
        city: str = "Paris"

    context = [msg("user"), msg("assistant"), msg("user"), msg("assistant")]
    state = Custom(context=context, context_summary="earlier")
    snapshot = list(state.context)
    trimmed = MessageContextManager(max_messages=1).trim_context(state)
    assert trimmed is not state
    assert same_objects(state.context, snapshot)
    assert len(trimmed.context) == 3
    assert type(trimmed) is Custom
    assert (trimmed.city, trimmed.context_summary) == ("Paris", "earlier")


def test_remove_tool_msgs_drops_finished_tool_exchanges() -> None:
    u1, answer = msg("user"), msg("assistant")
    state = AgentState(context=[u1, call("c1"), result("c1"), answer])
    manager = MessageContextManager(max_messages=10, remove_tool_msgs=True)
    trimmed = manager.trim_context(state)
    assert same_objects(trimmed.context, [u1, answer])
    assert len(state.context) == 4


def test_remove_tool_msgs_keeps_unfinished_exchanges() -> None:
    u1, pending, done = msg("user"), call("c1"), result("c1")
    state = AgentState(context=[u1, pending, done])
    manager = MessageContextManager(max_messages=10, remove_tool_msgs=True)
    assert manager.trim_context(state) is state


def test_remove_tool_msgs_after_trimming() -> None:
    u1, u2, answer = msg("user"), msg("user"), msg("assistant")
    context = [
        u1,
        call("c1"),
        result("c1"),
        msg("assistant"),
        u2,
        call("c2"),
        result("c2"),
        answer,
    ]
    manager = MessageContextManager(max_messages=1, remove_tool_msgs=True)
    trimmed = manager.trim_context(AgentState(context=context))
    assert same_objects(trimmed.context, [u1, u2, answer])


def test_remove_tool_msgs_false_keeps_tool_exchanges() -> None:
    context = [msg("user"), call("c1"), result("c1"), msg("assistant")]
    state = AgentState(context=context)
    assert MessageContextManager(max_messages=10).trim_context(state) is state


@pytest.mark.parametrize("remove_tool_msgs", [False, True])
@pytest.mark.parametrize("max_messages", [1, 2, 5])
async def test_atrim_context_matches_trim_context(
    max_messages: int, remove_tool_msgs: bool
) -> None:
    context = [msg("system"), msg("user")]
    for i in range(6):
        context += [msg("user"), call(f"c{i}"), result(f"c{i}"), msg("assistant")]
    state = AgentState(context=context)
    manager = MessageContextManager(max_messages=max_messages, remove_tool_msgs=remove_tool_msgs)
    sync = manager.trim_context(state)
    async_ = await manager.atrim_context(state)
    assert same_objects(async_.context, sync.context)
    assert len(sync.context) < len(state.context)


# -- the invariants, over generated well-formed histories -------------------------------------


_call_ids = itertools.count()  # tool call ids unique across every generated history


def _exchange(draw: st.DrawFn) -> list[Message]:
    call_ids = [f"c{next(_call_ids)}" for _ in range(draw(st.integers(1, 3)))]
    answered = draw(st.lists(st.sampled_from(call_ids), unique=True, max_size=len(call_ids)))
    return [call(*call_ids), *(result(c) for c in answered)]


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    messages: list[Message] = []
    for kind in draw(
        st.lists(st.sampled_from(["user", "assistant", "system", "tools"]), max_size=25)
    ):
        messages += _exchange(draw) if kind == "tools" else [msg(kind)]
    return messages


def _tool_groups(messages: list[Message]) -> list[list[int]]:
    """Index groups: an assistant message asking for tools and the tool messages after it."""
    groups: list[list[int]] = []
    for i, message in enumerate(messages):
        if message.role == "assistant" and message.has_tool_calls():
            groups.append([i])
        elif message.role == "tool" and groups and groups[-1][-1] == i - 1:
            groups[-1].append(i)
    return groups


@settings(max_examples=150, deadline=None)
@given(messages=histories(), max_messages=st.integers(1, 6))
def test_trim_invariants(messages: list[Message], max_messages: int) -> None:
    kept = MessageContextManager(max_messages=max_messages).trim_messages(messages)
    positions = [next(i for i, m in enumerate(messages) if m is k) for k in kept]
    assert positions == sorted(set(positions)), "kept messages stay in order, once each"
    kept_set = set(positions)
    if messages:
        assert 0 in kept_set
    assert all(i in kept_set for i, m in enumerate(messages) if m.role == "system")
    user_turns = [i for i, m in enumerate(messages) if m.role == "user"]
    if len(user_turns) > max_messages:
        cut = user_turns[-max_messages]
        assert set(range(cut, len(messages))) <= kept_set
        assert sum(1 for i in kept_set if messages[i].role == "user") <= max_messages + 1
    else:
        assert kept_set == set(range(len(messages)))
    for group in _tool_groups(messages):
        assert all(i in kept_set for i in group) or not any(i in kept_set for i in group)
