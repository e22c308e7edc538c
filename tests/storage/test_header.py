"""The state header written at every step: small, and read back to the same state."""

from __future__ import annotations

import json

import pytest
from pydantic import ConfigDict

from tenxgraph.core.state import AgentState
from tenxgraph.core.state.execution_state import ExecutionStatus, StopRequestStatus
from tenxgraph.core.state.usage import Usage
from tenxgraph.storage.checkpointer.base import decode_state, encode_header


class WithFields(AgentState):
    count: int = 0
    notes: list[str] = []


class Loose(AgentState):
    model_config = ConfigDict(extra="allow")


def state_of(cls: type[AgentState], **values: object) -> AgentState:
    state = cls(**values)
    state.execution_meta.thread_id = "t-1"
    state.execution_meta.step = 4
    state.execution_meta.internal_data["next"] = ["agent"]
    return state


@pytest.mark.parametrize(
    "state",
    [
        state_of(AgentState),
        state_of(AgentState, context_summary="earlier: the user wants a refund"),
        state_of(WithFields, count=3, notes=["a"]),
        state_of(WithFields, context_summary="s"),
        state_of(Loose, extra_field={"kept": True}),
    ],
    ids=["plain", "summary", "own-fields", "own-fields-summary", "extra-fields"],
)
def test_a_header_reads_back_to_the_same_state(state: AgentState) -> None:
    header = encode_header(state, "t-1")
    back = decode_state(type(state), "t-1", header, [])
    back.execution_meta.thread_id = "t-1"  # the row's id, left out of the header
    assert back.model_dump() == state.model_dump()


def test_a_plain_state_header_holds_only_what_differs_from_the_defaults() -> None:
    header = json.loads(encode_header(state_of(AgentState), "t-1"))
    assert header == {
        "execution_meta": {
            "current_node": "__start__",
            "step": 4,
            "internal_data": {"next": ["agent"]},
        }
    }


def _metas() -> list[AgentState]:
    states = []
    for step, status, node in [(0, "running", "__start__"), (7, "completed", 'n"ode\u00e9')]:
        for usage in [
            Usage(),
            Usage(3, 5, 1, 0, 2, 2, 0.00001234, 0, 4),
            Usage(1, 0, unpriced_calls=1),
        ]:
            for thread in ["t-1", "other thread"]:
                state = AgentState()
                meta = state.execution_meta
                meta.current_node, meta.step, meta.thread_id = node, step, thread
                meta.status = ExecutionStatus(status)
                meta.usage = usage
                states.append(state)
    paused = AgentState()
    paused.execution_meta.thread_id = "t-1"
    paused.execution_meta.set_interrupt("review", "before")
    paused.execution_meta.interrupt_data = None
    paused.execution_meta.stop_current_execution = StopRequestStatus.STOP_REQUESTED
    paused.execution_meta.internal_data.update({"next": ["a", "b"], "deferred": [], "n": 1.5})
    return [*states, paused]


@pytest.mark.parametrize("listed", [False, True])
def test_the_plain_header_is_written_as_pydantic_writes_it(listed: bool) -> None:
    # a plain AgentState's header is put together by hand (it is written at every step): it
    # must be what the serializer writes, and read back to the same state
    for state in _metas():
        meta = state.execution_meta
        left_out = {"step", "status", "current_node"} if listed else set()
        if meta.thread_id == "t-1":
            left_out.add("thread_id")
        expected = meta.__pydantic_serializer__.to_json(
            meta, exclude_defaults=True, exclude=left_out
        ).decode()
        header = encode_header(state, "t-1", listed=listed)
        assert header == (
            "" if listed and expected == "{}" else '{"execution_meta":' + expected + "}"
        )
        if not listed:
            back = decode_state(AgentState, "t-1", header, [])
            back.execution_meta.thread_id = meta.thread_id
            assert back.model_dump() == state.model_dump()


def test_a_header_with_a_value_the_hand_written_path_does_not_know_is_still_written() -> None:
    state = state_of(AgentState)
    state.execution_meta.interrupt_data = {"question": "ok?"}
    state.execution_meta.usage = Usage(priced_cost=float("nan"), model_calls=1)
    header = json.loads(encode_header(state, "t-1"))
    assert header["execution_meta"]["interrupt_data"] == {"question": "ok?"}
    back = decode_state(AgentState, "t-1", json.dumps(header), [])
    assert back.execution_meta.usage == Usage()  # an unreadable tally counts as nothing
