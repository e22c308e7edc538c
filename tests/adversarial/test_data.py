"""Never write what cannot be read back (issue 15), on memory, SQLite and PostgreSQL.

A value whose JSON would read back as something else (NaN, a set or a datetime in a loosely
typed field...) or that nests too deep is refused before anything is written, naming the field;
the thread stays as it was and takes the next turn. Thread ids are checked before any write.
Stored rows are parsed one by one: a hostile message row cannot reach the header or the row next
to it, and an unknown key in a stored header is an error.
"""

from __future__ import annotations

import enum
import itertools
import json
import math
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, ValidationError

from tenxgraph.core.exceptions import NodeError, SerializationError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.graph.compiled_graph import CompiledGraph
from tenxgraph.core.state import (
    AgentState,
    ErrorBlock,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from tenxgraph.storage.checkpointer import BaseCheckpointer
from tenxgraph.utils.constants import END, START
from tests.storage.conftest import Backend

# a thread's key (its messages and checkpoints name it by that), from its id
_KEY = "thread_key = (SELECT thread_key FROM tx_threads WHERE thread_id = ?)"


class Data(AgentState):
    score: float = 0.0
    data: Any = None
    notes: dict[str, Any] = Field(default_factory=dict)


class Point(BaseModel):
    x: int


class Colour(enum.Enum):
    RED = "red"


@dataclass
class Pair:
    a: int
    b: int


def user(text: str, **fields: Any) -> dict[str, Any]:
    return {"messages": [Message(role="user", content=text, **fields)]}


def texts(state: AgentState | None) -> list[str]:
    assert state is not None
    return [m.text() for m in state.context]


def deep(levels: int) -> dict[str, Any]:
    top: dict[str, Any] = {}
    inner = top
    for _ in range(levels - 1):
        inner["a"] = {}
        inner = inner["a"]
    return top


class Echo:
    """A node answering "echo <last text>"; `misbehave` is returned once instead (or, when it is
    a function, called with the state)."""

    def __init__(self) -> None:
        self.misbehave: Any = None

    def __call__(self, state: Data) -> Any:
        update, self.misbehave = self.misbehave, None
        if update is None:
            return f"echo {state.context[-1].text()}"
        return update(state) if callable(update) else update


def app_on(checkpointer: BaseCheckpointer, node: Echo) -> CompiledGraph:
    async def step(state: Data) -> Any:
        return node(state)

    graph = StateGraph(Data)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    return graph.compile(checkpointer=checkpointer)


async def started(checkpointer: BaseCheckpointer, thread: str) -> tuple[CompiledGraph, Echo]:
    node = Echo()
    app = app_on(checkpointer, node)
    await app.ainvoke(user("hi"), {"thread_id": thread})
    return app, node


async def still_usable(app: CompiledGraph, thread: str, history: list[str]) -> None:
    """The thread loads with `history`, a new instance of the store reads it too, and it takes
    a new turn."""
    config = {"thread_id": thread}
    assert texts(await app.aget_state(config)) == history
    assert app.checkpointer is not None
    snapshot = await app.checkpointer.aload(thread, Data)
    assert snapshot is not None
    assert texts(snapshot.state) == history
    result = await app.ainvoke(user("again"), config)
    assert result["messages"][-1].text() == "echo again"
    assert texts(await app.aget_state(config))[-2:] == ["again", "echo again"]


# -- NaN and infinity: refused at the boundary, never stored as null ----------------------------


async def test_nan_set_through_input_state_is_refused_naming_the_field(
    checkpointer: BaseCheckpointer,
) -> None:
    app, _ = await started(checkpointer, "t")
    with pytest.raises(NodeError, match=r"'score'.*finite number"):
        await app.ainvoke({**user("bad"), "state": {"score": math.nan}}, {"thread_id": "t"})
    await still_usable(app, "t", ["hi", "echo hi"])


async def test_infinity_returned_by_a_node_is_refused_naming_the_field(
    checkpointer: BaseCheckpointer,
) -> None:
    app, node = await started(checkpointer, "t")
    node.misbehave = {"score": math.inf}
    with pytest.raises(NodeError, match=r"'score'.*finite number"):
        await app.ainvoke(user("bad"), {"thread_id": "t"})
    state = await app.aget_state({"thread_id": "t"})
    assert isinstance(state, Data)
    assert state.score == 0.0
    await still_usable(app, "t", ["hi", "echo hi", "bad"])


async def test_nan_in_a_state_changed_in_place_by_a_node_is_refused(
    checkpointer: BaseCheckpointer,
) -> None:
    app, node = await started(checkpointer, "t")

    def in_place(state: Data) -> Data:
        state.notes["x"] = math.nan  # changed inside the dict: only the save can see it
        return state

    node.misbehave = in_place
    with pytest.raises(SerializationError, match=r"field 'notes\.x'.*nan is not a JSON number"):
        await app.ainvoke(user("bad"), {"thread_id": "t"})
    await still_usable(app, "t", ["hi", "echo hi", "bad"])


async def test_nan_nested_in_a_loosely_typed_field_is_refused_naming_its_path(
    checkpointer: BaseCheckpointer,
) -> None:
    app, node = await started(checkpointer, "t")
    node.misbehave = {"notes": {"weights": [1.0, math.nan]}}
    with pytest.raises(SerializationError, match=r"field 'notes\.weights\.1'.*nan") as caught:
        await app.ainvoke(user("bad"), {"thread_id": "t"})
    assert caught.value.context == {"thread_id": "t", "field": "notes.weights.1"}
    await still_usable(app, "t", ["hi", "echo hi", "bad"])


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"metadata": {"score": math.nan}}, "metadata.score"),
        ({"raw": {"usage": {"cost": math.inf}}}, "raw.usage.cost"),
        (
            {"content": [ToolResultBlock(call_id="c1", output={"value": -math.inf})]},
            "content.0.output.value",
        ),
        ({"content": [ErrorBlock(message="m", data={"x": [math.nan]})]}, "content.0.data.x.0"),
        (
            {
                "content": [
                    TextBlock(text="t"),
                    ToolCallBlock(id="c", name="f", args={"n": math.nan}),
                ]
            },
            "content.1.args.n",
        ),
    ],
    ids=["metadata", "raw", "tool-output", "error-data", "tool-args"],
)
async def test_nan_in_a_message_is_refused_and_nothing_is_written(
    checkpointer: BaseCheckpointer, fields: dict[str, Any], where: str
) -> None:
    app, _ = await started(checkpointer, "t")
    fields.setdefault("content", "bad")
    message = Message(role="user", **fields)
    with pytest.raises(SerializationError, match=rf"field '{where}'") as caught:
        await app.ainvoke({"messages": [message]}, {"thread_id": "t"})
    assert caught.value.context["field"] == where
    assert "Nothing was written" in str(caught.value)
    assert await checkpointer.aversion("t") == 2  # the first turn's two saves, nothing more
    await still_usable(app, "t", ["hi", "echo hi"])


async def test_a_node_answering_with_nan_in_its_message_is_refused(
    checkpointer: BaseCheckpointer,
) -> None:
    app, node = await started(checkpointer, "t")
    node.misbehave = Message(role="assistant", content="x", metadata={"confidence": math.nan})
    with pytest.raises(SerializationError, match=r"field 'metadata.confidence'"):
        await app.ainvoke(user("bad"), {"thread_id": "t"})
    await still_usable(app, "t", ["hi", "echo hi", "bad"])


# -- values JSON would read back as something else -------------------------------------------

LOSSY = [
    pytest.param({1, 2}, "a set", id="set"),
    pytest.param(frozenset({"a"}), "a frozenset", id="frozenset"),
    pytest.param((1, 2), "a tuple", id="tuple"),
    pytest.param(datetime(2026, 1, 2, 3, 4, tzinfo=UTC), "a datetime", id="datetime"),
    pytest.param(date(2026, 1, 2), "a date", id="date"),
    pytest.param(b"bytes", "a bytes", id="bytes"),
    pytest.param(Decimal("1.10"), "a Decimal", id="decimal"),
    pytest.param(UUID(int=7), "a UUID", id="uuid"),
    pytest.param(Point(x=1), "a Point model", id="model"),
    pytest.param(Pair(1, 2), "Pair", id="dataclass"),
    pytest.param(Colour.RED, "Colour.RED", id="enum"),
    pytest.param({1: "a"}, "dict key 1", id="int-key"),
    pytest.param(math.nan, "nan", id="nan"),
    pytest.param(object(), "object", id="object"),
]


@pytest.mark.parametrize(("value", "named"), LOSSY)
async def test_a_loosely_typed_field_refuses_what_would_read_back_different(
    checkpointer: BaseCheckpointer, value: Any, named: str
) -> None:
    first = Data(context=[Message.text_message("a")], data={"kept": 1})
    await checkpointer.asave("t", expected_version=None, state=first, new_messages=first.context)
    bad = Data(context=first.context, data={"inner": [0, value]})
    with pytest.raises(SerializationError, match=r"field 'data\.inner\.1") as caught:
        await checkpointer.asave("t", expected_version=1, state=bad, new_messages=[])
    assert named in str(caught.value)
    assert await checkpointer.aversion("t") == 1
    snapshot = await checkpointer.aload("t", Data)
    assert snapshot is not None
    assert snapshot.state.data == {"kept": 1}
    ok = Data(context=first.context, data={"inner": [0, 1]})
    assert await checkpointer.asave("t", expected_version=1, state=ok, new_messages=[]) == 2


@pytest.mark.parametrize(("value", "named"), LOSSY)
async def test_message_metadata_refuses_what_would_read_back_different(
    checkpointer: BaseCheckpointer, value: Any, named: str
) -> None:
    message = Message(role="user", content="x", metadata={"k": {"v": value}})
    state = Data(context=[message])
    with pytest.raises(SerializationError, match=r"field 'metadata\.k\.v") as caught:
        await checkpointer.asave("t", expected_version=None, state=state, new_messages=[message])
    assert named in str(caught.value)
    assert await checkpointer.aversion("t") is None
    assert await checkpointer.alist_threads() == []


async def test_a_run_never_keeps_in_memory_what_storage_would_give_back_different(
    checkpointer: BaseCheckpointer,
) -> None:
    app, node = await started(checkpointer, "t")
    node.misbehave = {"data": {"tags": {"a", "b"}, "at": datetime(2026, 1, 1, tzinfo=UTC)}}
    with pytest.raises(SerializationError, match=r"field 'data.tags'.*set"):
        await app.ainvoke(user("bad"), {"thread_id": "t"})
    # the app kept nothing the store does not hold: both give the same state
    await still_usable(app, "t", ["hi", "echo hi", "bad"])
    kept = await app.ainvoke(user("more"), {"thread_id": "t"}, response_granularity="full")
    stored = await app.aget_state({"thread_id": "t"})
    assert kept["state"] == stored


async def test_a_resume_answer_that_would_read_back_different_is_refused(
    checkpointer: BaseCheckpointer,
) -> None:
    from tenxgraph.utils import interrupt

    def ask(state: Data) -> str:
        answer = interrupt("pick")
        return f"picked {sorted(answer)}"

    graph = StateGraph(Data)
    graph.add_node("ask", ask)
    graph.add_edge(START, "ask")
    app = graph.compile(checkpointer=checkpointer)
    config = {"thread_id": "t"}
    await app.ainvoke(user("go"), config)
    with pytest.raises(SerializationError, match=r"execution_meta.internal_data.*a set"):
        await app.ainvoke({"resume": {"b", "a"}}, config)
    done = await app.ainvoke({"resume": ["b", "a"]}, config)
    assert done["messages"][-1].text() == "picked ['a', 'b']"


# -- depth: a clear error naming the field and the limit, never a RecursionError ---------------


async def test_a_5000_deep_value_returned_by_a_node_is_refused_naming_the_limit(
    checkpointer: BaseCheckpointer,
) -> None:
    app, node = await started(checkpointer, "t")
    node.misbehave = {"data": deep(5000)}
    with pytest.raises(SerializationError, match=r"field 'data\.a\.a.*deeper than 100 levels"):
        await app.ainvoke(user("bad"), {"thread_id": "t"})
    await still_usable(app, "t", ["hi", "echo hi", "bad"])


@pytest.mark.parametrize("levels", [101, 5000])
async def test_a_deep_value_in_an_input_message_is_refused_naming_the_limit(
    checkpointer: BaseCheckpointer, levels: int
) -> None:
    app, _ = await started(checkpointer, "t")
    # past Python's own recursion limit, copying the input already refuses it (ValueError)
    refused = (SerializationError, ValueError)
    with pytest.raises(refused, match=r"'metadata\.deep\.a.*deeper than 100 levels"):
        await app.ainvoke(user("bad", metadata={"deep": deep(levels)}), {"thread_id": "t"})
    await still_usable(app, "t", ["hi", "echo hi"])


async def test_a_deep_value_through_input_state_is_refused_naming_the_limit(
    checkpointer: BaseCheckpointer,
) -> None:
    app, _ = await started(checkpointer, "t")
    with pytest.raises(SerializationError, match=r"field 'notes\.x\.a.*deeper than 100 levels"):
        await app.ainvoke(
            {**user("bad"), "state": {"notes": {"x": deep(5000)}}}, {"thread_id": "t"}
        )
    await still_usable(app, "t", ["hi", "echo hi"])


async def test_a_hostile_deep_header_is_a_serialization_error(sql_backend: Backend) -> None:
    store = sql_backend.store
    state = Data(context=[Message.text_message("a")])
    await store.asave("t", expected_version=None, state=state, new_messages=state.context)
    hostile = '{"data":' + "[" * 5000 + "]" * 5000 + ',"execution_meta":{"current_node":"x"}}'
    await sql_backend.sql(f"UPDATE tx_checkpoints SET header = ? WHERE {_KEY}", hostile, "t")
    with pytest.raises(SerializationError, match=r"'t'.*the JSON reader allows, about 200 levels"):
        await store.aload("t", Data)


# -- thread ids --------------------------------------------------------------------------------

BAD_IDS = [
    pytest.param("", "must not be empty", id="empty"),
    pytest.param(["a"], "must be a str", id="list"),
    pytest.param(1.5, "must be a str", id="float"),
    pytest.param(True, "must be a str", id="bool"),
    pytest.param(b"t", "must be a str", id="bytes"),
    pytest.param("a\x00b", "control character", id="nul"),
    pytest.param("a\nb", "control character", id="newline"),
    pytest.param("a\ud800", "unpaired surrogate", id="surrogate"),
    pytest.param("x" * 256, "the limit is 255", id="256-chars"),
    pytest.param("x" * 1_000_000, "the limit is 255", id="1MB"),
]


@pytest.mark.parametrize(("thread_id", "why"), BAD_IDS)
async def test_a_run_refuses_a_bad_thread_id_before_writing_anything(
    checkpointer: BaseCheckpointer, thread_id: Any, why: str
) -> None:
    app = app_on(checkpointer, Echo())
    with pytest.raises(ValueError, match=why):
        await app.ainvoke(user("hi"), {"thread_id": thread_id})
    with pytest.raises(ValueError, match=why):
        await app.aget_state({"thread_id": thread_id})
    assert await checkpointer.alist_threads() == []


@pytest.mark.parametrize(("thread_id", "why"), BAD_IDS)
async def test_every_store_method_refuses_a_bad_thread_id(
    checkpointer: BaseCheckpointer, thread_id: Any, why: str
) -> None:
    state = Data(context=[Message.text_message("a")])
    calls = [
        lambda: checkpointer.aversion(thread_id),
        lambda: checkpointer.aload(thread_id, Data),
        lambda: checkpointer.asave(
            thread_id, expected_version=None, state=state, new_messages=state.context
        ),
        lambda: checkpointer.ahistory(thread_id),
        lambda: checkpointer.adelete_thread(thread_id),
        lambda: checkpointer.aput_tool_result(thread_id, "m", "c", {"ok": True}),
        lambda: checkpointer.aget_tool_result(thread_id, "m", "c"),
        lambda: checkpointer.arequest_stop(thread_id),
        lambda: checkpointer.ais_stop_requested(thread_id),
        lambda: checkpointer.aclear_stop_request(thread_id),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=why):
            await call()
    assert await checkpointer.alist_threads() == []


async def test_an_int_thread_id_is_its_decimal_string_and_zero_is_no_exception(
    checkpointer: BaseCheckpointer,
) -> None:
    app = app_on(checkpointer, Echo())
    await app.ainvoke(user("one"), {"thread_id": 0})
    await app.ainvoke(user("two"), {"thread_id": "0"})
    assert texts(await app.aget_state({"thread_id": 0})) == ["one", "echo one", "two", "echo two"]
    assert await checkpointer.alist_threads() == ["0"]


async def test_a_thread_id_of_255_characters_works(checkpointer: BaseCheckpointer) -> None:
    app = app_on(checkpointer, Echo())
    longest = "é" * 255  # characters, not bytes
    with pytest.raises(ValueError, match=r"256 characters long; the limit is 255"):
        await app.ainvoke(user("hi"), {"thread_id": longest + "x"})
    await app.ainvoke(user("hi"), {"thread_id": longest})
    assert texts(await app.aget_state({"thread_id": longest})) == ["hi", "echo hi"]


# -- stored rows: each parsed on its own -----------------------------------------------------


async def saved_pair(store: BaseCheckpointer) -> list[Message]:
    messages = [Message.text_message("first"), Message.text_message("second", "assistant")]
    state = Data(context=messages)
    await store.asave("t", expected_version=None, state=state, new_messages=messages)
    return messages


async def test_a_message_row_cannot_reach_the_header(sql_backend: Backend) -> None:
    store = sql_backend.store
    messages = await saved_pair(store)
    hostile = messages[1].model_dump_json() + '],"context_summary":"INJECTED","_":['
    await sql_backend.sql(f"UPDATE tx_messages SET body = ? WHERE {_KEY} AND seq = 1", hostile, "t")
    with pytest.raises(SerializationError, match=r"'t'.*message 1.*'context.1'") as caught:
        await store.aload("t", Data)
    assert caught.value.context == {"thread_id": "t", "field": "context.1"}


async def test_rows_cannot_trade_content_even_when_the_count_still_fits(
    sql_backend: Backend,
) -> None:
    store = sql_backend.store
    messages = [Message.text_message(t) for t in ("a", "b", "c")]
    state = Data(context=messages)
    await store.asave("t", expected_version=None, state=state, new_messages=messages)
    # joined with commas, these three rows would still make three messages, shifted
    injected = Message.text_message("INJECTED").model_dump_json()
    first = messages[0].model_dump_json() + "," + injected
    second = messages[1].model_dump_json()[:-1] + ',"metadata":{"x":1'
    third = '"y":2}}'
    for seq, body in enumerate([first, second, third]):
        await sql_backend.sql(
            f"UPDATE tx_messages SET body = ? WHERE {_KEY} AND seq = ?", body, "t", seq
        )
    with pytest.raises(SerializationError, match=r"'context.0'"):
        await store.aload("t", Data)


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ('"injected":1', "injected"),
        ('"context":[]', "context"),
        ('"execution_meta":{"current_node":"x","sneaky":1}', "execution_meta.sneaky"),
    ],
    ids=["top-level", "context", "execution-meta"],
)
async def test_an_unknown_key_in_a_stored_header_is_an_error_naming_it(
    sql_backend: Backend, extra: str, key: str
) -> None:
    store = sql_backend.store
    await saved_pair(store)
    header = json.dumps({"score": 1.5})[:-1] + "," + extra + "}"
    await sql_backend.sql(f"UPDATE tx_checkpoints SET header = ? WHERE {_KEY}", header, "t")
    with pytest.raises(SerializationError, match=rf"'t'.*key '{key}'") as caught:
        await store.aload("t", Data)
    assert caught.value.context == {"thread_id": "t", "field": key}


# -- the property: accepted means read back equal; refused means untouched and usable ---------

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
)
odd_leaves = (
    st.sampled_from([math.nan, math.inf, -math.inf, Colour.RED, b"b", (1, "x"), Point(x=2)])
    | st.sets(st.integers(0, 9), max_size=2)
    | st.datetimes()
    | st.decimals(allow_nan=False, allow_infinity=False, places=2)
)
json_values = st.recursive(
    json_leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
any_values = st.recursive(
    json_leaves | odd_leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=4) | st.integers(0, 3), inner, max_size=3)
    ),
    max_leaves=6,
)
values = json_values | any_values
PROPERTY = settings(
    max_examples=30,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_threads = itertools.count()


@PROPERTY
@given(
    data=values,
    notes=st.dictionaries(st.text(max_size=4), values, max_size=2),
    metadata=st.dictionaries(st.text(max_size=4), values, max_size=2),
    output=values,
    score=st.floats(),
)
async def test_what_a_store_accepts_reads_back_equal_and_what_it_refuses_changes_nothing(
    checkpointer: BaseCheckpointer,
    data: Any,
    notes: dict[str, Any],
    metadata: dict[str, Any],
    output: Any,
    score: float,
) -> None:
    thread = f"p{next(_threads)}"
    first = Data(context=[Message.text_message("first")], data={"v": 1})
    first.execution_meta.thread_id = thread
    await checkpointer.asave(thread, expected_version=None, state=first, new_messages=first.context)
    try:
        candidate = Data(context=first.context, data=data, notes=notes, score=score)
    except ValidationError:  # refused by the API: only a non-finite float field can be
        assert not math.isfinite(score)
        candidate = Data(context=first.context, data=data, notes=notes)
    candidate.execution_meta.thread_id = thread
    message = Message(
        role="tool",
        content=[ToolResultBlock(call_id="c", output=output)],
        metadata=metadata,
    )
    candidate.context = [*first.context, message]
    try:
        await checkpointer.asave(
            thread, expected_version=1, state=candidate, new_messages=[message]
        )
    except SerializationError:
        event("refused")
        assert await checkpointer.aversion(thread) == 1
        snapshot = await checkpointer.aload(thread, Data)
        assert snapshot is not None
        assert snapshot.state == first
        after = Data(context=[*first.context, Message.text_message("next")], data=[1])
        after.execution_meta.thread_id = thread
        await checkpointer.asave(
            thread, expected_version=1, state=after, new_messages=after.context[1:]
        )
        snapshot = await checkpointer.aload(thread, Data)
        assert snapshot is not None
        assert snapshot.state == after
    else:
        event("accepted")
        snapshot = await checkpointer.aload(thread, Data)
        assert snapshot is not None
        assert snapshot.state == candidate
