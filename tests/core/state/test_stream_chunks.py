"""StreamChunk and StreamEvent."""

from __future__ import annotations

import json
import time

import pytest

from tenxgraph.core.state import AgentState, Message, StreamChunk, StreamEvent


def test_stream_event_values() -> None:
    assert [e.value for e in StreamEvent] == ["state", "message", "error", "updates", "custom"]


def test_defaults() -> None:
    chunk = StreamChunk()
    assert chunk.event == "message"
    assert (chunk.message, chunk.state, chunk.data) == (None, None, None)
    assert (chunk.thread_id, chunk.run_id, chunk.metadata) == (None, None, None)
    assert isinstance(chunk.timestamp, float)


@pytest.mark.parametrize("event", list(StreamEvent))
def test_event_is_stored_as_its_string_value(event: StreamEvent) -> None:
    for given in (event, event.value):
        chunk = StreamChunk(event=given)
        assert type(chunk.event) is str
        assert chunk.event == event.value
        assert type(chunk.model_dump()["event"]) is str


def test_default_event_is_stored_as_its_string_value() -> None:
    chunk = StreamChunk()
    assert type(chunk.event) is str
    assert chunk.event == "message"
    assert (
        chunk.model_dump() == StreamChunk(event="message", timestamp=chunk.timestamp).model_dump()
    )
    assert type(chunk.model_dump()["event"]) is str


def test_unknown_event_is_rejected() -> None:
    with pytest.raises(ValueError, match="event"):
        StreamChunk(event="progress")  # type: ignore[arg-type]


def test_each_chunk_gets_its_own_timestamp() -> None:
    first = StreamChunk()
    between = time.time()
    second = StreamChunk()
    assert first is not second
    assert first.timestamp <= between <= second.timestamp


def test_chunk_timestamp_is_taken_when_the_chunk_is_made() -> None:
    before = time.time()
    chunk = StreamChunk(event=StreamEvent.UPDATES, data={"status": "node_invoked"})
    after = time.time()
    assert before <= chunk.timestamp <= after


def test_chunk_carries_a_message_and_data() -> None:
    message = Message.text_message("hi", "assistant")
    chunk = StreamChunk(
        message=message, data={"status": "x"}, thread_id="t", run_id="r", metadata={"k": 1}
    )
    assert chunk.message is message
    assert (chunk.data, chunk.thread_id, chunk.run_id, chunk.metadata) == (
        {"status": "x"},
        "t",
        "r",
        {"k": 1},
    )


class CityState(AgentState):
    selected_city: str = ""
    visits: int = 0


def test_subclass_state_in_a_chunk_serializes_its_subclass_fields() -> None:
    state = CityState(selected_city="Paris", visits=3)
    chunk = StreamChunk(event=StreamEvent.STATE, state=state)
    assert chunk.state is state
    dumped = chunk.model_dump()["state"]
    assert dumped["selected_city"] == "Paris"
    assert dumped["visits"] == 3
    from_json = json.loads(chunk.model_dump_json())["state"]
    assert from_json["selected_city"] == "Paris"
    assert from_json["visits"] == 3
    assert CityState.model_validate(from_json) == state


def test_chunk_round_trips_through_json() -> None:
    chunk = StreamChunk(
        event=StreamEvent.MESSAGE,
        message=Message.text_message("hi", "assistant"),
        state=AgentState(context=[Message.text_message("q")]),
        data={"a": [1, 2]},
    )
    assert StreamChunk.model_validate_json(chunk.model_dump_json()) == chunk
