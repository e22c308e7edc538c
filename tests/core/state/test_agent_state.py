"""AgentState: defaults, subclassing, field reducers, delegating helpers."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import Field

from tenxgraph.core.state import (
    AgentState,
    ExecutionState,
    ExecutionStatus,
    Message,
    StopRequestStatus,
    add_messages,
    append_items,
    replace_value,
)
from tenxgraph.utils.constants import START


def test_fresh_state_defaults() -> None:
    state = AgentState()
    assert state.context == []
    assert state.context_summary is None
    assert isinstance(state.execution_meta, ExecutionState)
    assert state.execution_meta.current_node == START == "__start__"
    assert state.execution_meta.step == 0
    assert state.execution_meta.status == ExecutionStatus.RUNNING


def test_fresh_states_do_not_share_mutable_defaults() -> None:
    first, second = AgentState(), AgentState()
    first.context.append(Message.text_message("x"))
    first.advance_step()
    assert second.context == []
    assert second.execution_meta.step == 0


def test_context_parses_message_dicts() -> None:
    state = AgentState.model_validate(
        {"context": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    )
    assert isinstance(state.context[0], Message)
    assert state.context[0].text() == "hi"


class MyState(AgentState):
    user_id: str = ""
    session_data: dict[str, Any] = Field(default_factory=dict)
    selected_city: str = ""
    visited: Annotated[list[str], append_items] = Field(default_factory=list)
    score: Annotated[int, replace_value] = 0


def test_subclass_adds_fields_and_keeps_the_built_ins() -> None:
    state = MyState(user_id="u1", selected_city="Paris")
    assert (state.user_id, state.selected_city, state.session_data) == ("u1", "Paris", {})
    assert state.context == []
    assert state.execution_meta.current_node == START
    assert {"user_id", "session_data", "selected_city", "context", "execution_meta"} <= set(
        MyState.model_fields
    )
    assert isinstance(state, AgentState)


def test_agent_state_field_reducers() -> None:
    assert AgentState.field_reducers() == {"context": add_messages}


def test_subclass_field_reducers_include_annotated_reducers_only() -> None:
    reducers = MyState.field_reducers()
    assert reducers == {"context": add_messages, "visited": append_items, "score": replace_value}
    assert "user_id" not in reducers
    assert "session_data" not in reducers


def test_field_reducers_are_per_class() -> None:
    class Other(AgentState):
        notes: Annotated[list[str], append_items] = Field(default_factory=list)
        plain: list[str] = Field(default_factory=list)

    assert Other.field_reducers() == {"context": add_messages, "notes": append_items}
    assert AgentState.field_reducers() == {"context": add_messages}
    assert "notes" not in MyState.field_reducers()


def test_field_reducers_ignore_non_callable_and_type_metadata() -> None:
    class Constrained(AgentState):
        name: Annotated[str, Field(min_length=0), "a doc string"] = ""
        count: Annotated[int, int] = 0

    assert Constrained.field_reducers() == {"context": add_messages}


def test_subclass_overriding_context_without_reducer_has_none() -> None:
    class Replaced(AgentState):
        context: list[Message] = Field(default_factory=list)

    assert "context" not in Replaced.field_reducers()


# -- helpers delegating to execution_meta ---------------------------------------------------


def test_is_running_and_complete() -> None:
    state = AgentState()
    assert state.is_running() is True
    state.complete()
    assert state.execution_meta.status == ExecutionStatus.COMPLETED
    assert state.is_running() is False


@pytest.mark.parametrize(
    "status", [ExecutionStatus.INTERRUPTED_BEFORE, ExecutionStatus.INTERRUPTED_AFTER]
)
def test_set_interrupt_is_interrupted_clear_interrupt(status: ExecutionStatus) -> None:
    state = AgentState()
    assert state.is_interrupted() is False
    state.set_interrupt("review", "human review", status, {"draft": "x"})
    assert state.is_interrupted() is True
    meta = state.execution_meta
    assert (meta.interrupted_node, meta.interrupt_reason, meta.status) == (
        "review",
        "human review",
        status,
    )
    assert meta.interrupt_data == {"draft": "x"}
    state.clear_interrupt()
    assert state.is_interrupted() is False
    assert state.is_running() is True
    assert meta.interrupted_node is None


def test_set_interrupt_default_status_is_interrupted_before() -> None:
    state = AgentState()
    state.set_interrupt("n", "r")
    assert state.execution_meta.status == ExecutionStatus.INTERRUPTED_BEFORE


def test_set_interrupt_with_non_interrupt_status_raises() -> None:
    state = AgentState()
    with pytest.raises(ValueError, match="interrupted status"):
        state.set_interrupt("n", "r", ExecutionStatus.COMPLETED)
    assert state.is_running()


def test_is_stopped_requested() -> None:
    state = AgentState()
    assert state.is_stopped_requested() is False
    state.execution_meta.stop_current_execution = StopRequestStatus.STOP_REQUESTED
    assert state.is_stopped_requested() is True


def test_advance_step_and_set_current_node() -> None:
    state = AgentState()
    state.advance_step()
    state.set_current_node("MAIN")
    assert (state.execution_meta.step, state.execution_meta.current_node) == (1, "MAIN")


def test_error() -> None:
    state = AgentState()
    state.error("provider down")
    assert state.execution_meta.status == ExecutionStatus.ERROR
    assert state.execution_meta.internal_data["error"] == "provider down"
    assert state.is_running() is False


def test_subclass_state_round_trips_through_json() -> None:
    state = MyState(user_id="u", visited=["a"], context=[Message.text_message("hi")])
    state.set_interrupt("n", "r")
    assert MyState.model_validate_json(state.model_dump_json()) == state
