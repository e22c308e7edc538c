"""The state header written at every step: small, and read back to the same state."""

from __future__ import annotations

import json

import pytest
from pydantic import ConfigDict

from tenxgraph.core.state import AgentState
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
