"""What a store accepts reads back equal: typed values of every kind, and the checks' edges."""

from __future__ import annotations

import enum
import typing
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest
from pydantic import BaseModel, ConfigDict, Field

from tenxgraph.core.exceptions import SerializationError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message, ToolResultBlock
from tenxgraph.core.state import message_block as blocks
from tenxgraph.storage.checkpointer import BaseCheckpointer
from tenxgraph.storage.checkpointer._storable import (
    MAX_DEPTH,
    json_deeper_than,
    message_problem,
)
from tenxgraph.storage.checkpointer.base import (
    THREAD_ID_MAX_LENGTH,
    decode_state,
    encode_header,
    valid_thread_id,
)
from tenxgraph.utils.constants import END, START


class Level(enum.StrEnum):
    LOW = "low"


class Size(enum.IntEnum):
    BIG = 2


class Colour(enum.Enum):
    RED = "red"


class Point(BaseModel):
    x: float
    y: float = 0.0


class Typed(AgentState):
    when: datetime = datetime(2026, 1, 1, tzinfo=UTC)
    day: date = date(2026, 1, 1)
    wait: timedelta = timedelta(seconds=1)
    tags: set[str] = Field(default_factory=set)
    frozen: frozenset[int] = frozenset()
    pair: tuple[int, str] = (0, "")
    blob: bytes = b""
    amount: Decimal = Decimal("0")
    uid: UUID = UUID(int=0)
    points: list[Point] = Field(default_factory=list)
    by_id: dict[int, str] = Field(default_factory=dict)
    level: Level = Level.LOW
    colour: Colour = Colour.RED
    maybe: float | None = None
    loose: Any = None


async def test_typed_values_of_every_kind_read_back_equal(checkpointer: BaseCheckpointer) -> None:
    state = Typed(
        context=[Message.text_message("a")],
        when=datetime(2026, 5, 6, 7, 8, 9, 123456, tzinfo=UTC),
        day=date(2026, 5, 6),
        wait=timedelta(hours=3, microseconds=7),
        tags={"a", "b"},
        frozen=frozenset({1, 2}),
        pair=(7, "x"),
        blob=b"bytes",
        amount=Decimal("12.3400"),
        uid=UUID(int=99),
        points=[Point(x=1.5, y=-0.0), Point(x=1e308)],
        by_id={1: "one", 2: "two"},
        maybe=0.1,
        loose={"level": Level.LOW, "size": Size.BIG, "big": 2**100, "nested": [[], {}, [None]]},
    )
    state.execution_meta.thread_id = "t"
    await checkpointer.asave("t", expected_version=None, state=state, new_messages=state.context)
    snapshot = await checkpointer.aload("t", Typed)
    assert snapshot is not None
    assert snapshot.state == state


async def test_a_model_that_is_not_the_declared_class_is_refused(
    checkpointer: BaseCheckpointer,
) -> None:
    class Point3(Point):
        z: float = 0.0

    state = Typed(points=[Point3(x=1, z=2)])
    with pytest.raises(
        SerializationError,
        match=r"field 'points\.0': a Point3 would read back as the declared Point",
    ):
        await checkpointer.asave("t", expected_version=None, state=state, new_messages=[])


async def test_nan_inside_a_model_of_the_users_own_config_is_refused(
    checkpointer: BaseCheckpointer,
) -> None:
    state = Typed(points=[Point(x=1.0)])
    state.points[0].x = float("nan")  # Point's own config allows NaN; storage does not
    with pytest.raises(SerializationError, match=r"field 'points\.0\.x': nan is not a JSON number"):
        await checkpointer.asave("t", expected_version=None, state=state, new_messages=[])


class Loose(AgentState):
    model_config = ConfigDict(extra="allow")


async def test_extra_fields_read_back_equal_or_are_refused_by_name(
    checkpointer: BaseCheckpointer,
) -> None:
    fine = Loose(note={"k": [1, "two"]})
    await checkpointer.asave("t", expected_version=None, state=fine, new_messages=[])
    snapshot = await checkpointer.aload("t", Loose)
    assert snapshot is not None
    assert snapshot.state.__pydantic_extra__ == {"note": {"k": [1, "two"]}}
    with pytest.raises(SerializationError, match=r"field 'note\.k'.*a set"):
        await checkpointer.asave(
            "t", expected_version=1, state=Loose(note={"k": {1}}), new_messages=[]
        )


async def test_a_models_parsed_content_is_stored_as_its_json_and_reads_back_as_a_dict(
    checkpointer: BaseCheckpointer,
) -> None:
    answer = Message(role="assistant", content="{}", parsed_content=Point(x=2.5))
    state = AgentState(context=[answer])
    await checkpointer.asave("t", expected_version=None, state=state, new_messages=[answer])
    snapshot = await checkpointer.aload("t", AgentState)
    assert snapshot is not None
    assert snapshot.state.context[0].parsed_content == {"x": 2.5, "y": 0.0}
    broken = Message(role="assistant", content="{}", parsed_content=Point(x=float("inf")))
    with pytest.raises(SerializationError, match=r"field 'parsed_content\.x'"):
        await checkpointer.asave("u", expected_version=None, state=state, new_messages=[broken])


# -- the checks' own edges ---------------------------------------------------------------------


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_depth_is_counted_in_containers_and_brackets_inside_strings_do_not_count() -> None:
    assert not json_deeper_than(nested(MAX_DEPTH), MAX_DEPTH)
    assert json_deeper_than(nested(MAX_DEPTH + 1), MAX_DEPTH)
    assert not json_deeper_than('{"a":"' + "[" * 500 + '"}', MAX_DEPTH)
    assert not json_deeper_than("[" + ",".join(["[[1]]"] * 500) + "]", MAX_DEPTH)


async def test_a_value_at_the_depth_limit_is_stored_and_one_level_more_is_not(
    checkpointer: BaseCheckpointer,
) -> None:
    def value(levels: int) -> Any:
        inner: Any = 1
        for _ in range(levels):
            inner = [inner]
        return inner

    # the header is level 1, the field's value level 2
    fits = Typed(loose=value(MAX_DEPTH - 1))
    await checkpointer.asave("t", expected_version=None, state=fits, new_messages=[])
    snapshot = await checkpointer.aload("t", Typed)
    assert snapshot is not None
    assert snapshot.state.loose == fits.loose
    with pytest.raises(SerializationError, match=f"deeper than {MAX_DEPTH} levels"):
        await checkpointer.asave(
            "t", expected_version=1, state=Typed(loose=value(MAX_DEPTH)), new_messages=[]
        )


def _loose_or_float(annotation: Any) -> bool:
    if annotation is Any or annotation is float:
        return True
    return any(_loose_or_float(arg) for arg in typing.get_args(annotation))


def test_every_loosely_typed_or_float_field_of_a_message_is_checked() -> None:
    """A field added to Message or a block must be added to message_problem's tables too."""
    from tenxgraph.storage.checkpointer import _storable

    covered = {
        (Message, name) for name in (*_storable._MESSAGE_LOOSE, "parsed_content", "timestamp")
    }
    covered |= {(cls, slot) for cls, slot in _storable._BLOCK_LOOSE.items()}
    covered.add((blocks.ImageBlock, "bbox"))
    models = [Message, *typing.get_args(typing.get_args(blocks.ContentBlock)[0])]
    found = {
        (model, name)
        for model in models
        for name, info in model.model_fields.items()
        if _loose_or_float(info.annotation)
    }
    assert found <= covered, sorted(str(x) for x in found - covered)


def test_a_plain_text_message_has_nothing_to_refuse() -> None:
    assert message_problem(Message.text_message("hello")) is None
    assert message_problem(Message(role="tool", content=[ToolResultBlock(call_id="c")])) is None


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("user-42", "user-42"),
        (42, "42"),
        (0, "0"),
        (-7, "-7"),
        (Size.BIG, "2"),
        (Level.LOW, "low"),
        ("é" * THREAD_ID_MAX_LENGTH, "é" * THREAD_ID_MAX_LENGTH),
        ("用户 42", "用户 42"),
        ("a\u00a0b", "a\u00a0b"),  # a no-break space is not a control character
        ("👩\u200d💻", "👩\u200d💻"),  # nor is an emoji's zero-width joiner
    ],
)
def test_thread_ids_accepted_and_how_they_are_stored(given: Any, expected: str) -> None:
    found = valid_thread_id(given)
    assert found == expected
    assert type(found) is str


async def test_a_run_without_a_thread_id_starts_a_new_thread(
    checkpointer: BaseCheckpointer,
) -> None:
    graph = StateGraph()
    graph.add_node("answer", lambda state: "hello")
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    app = graph.compile(checkpointer=checkpointer)
    await app.ainvoke({"messages": [Message.text_message("hi")]}, {})
    await app.ainvoke({"messages": [Message.text_message("hi")]}, {"thread_id": None})
    threads = await checkpointer.alist_threads()
    assert len(threads) == 2
    assert all(len(UUID(t).hex) == 32 for t in threads)


# -- reading ---------------------------------------------------------------------------------


def test_each_row_is_parsed_on_its_own_and_a_bad_one_is_named() -> None:
    rows = [Message.text_message(t).model_dump_json() for t in ("a", "b", "c")]
    header = encode_header(AgentState(), "t")
    state = decode_state(AgentState, "t", header, [r.encode() for r in rows])
    assert [m.text() for m in state.context] == ["a", "b", "c"]
    rows[2] = rows[2].replace('"role":"user"', '"role":"robot"')
    with pytest.raises(SerializationError, match=r"message 2.*'context\.2\.role'"):
        decode_state(AgentState, "t", header, rows)
    with pytest.raises(SerializationError, match=r"'context\.1'"):
        decode_state(AgentState, "t", header, [rows[0], rows[0] + "," + rows[1]])


def test_a_state_with_extra_fields_reads_unknown_header_keys_as_extras_but_never_context() -> None:
    state = decode_state(Loose, "t", '{"note":1,"execution_meta":{"current_node":"x"}}', [])
    assert state.__pydantic_extra__ == {"note": 1}
    with pytest.raises(SerializationError, match="key 'context'"):
        decode_state(Loose, "t", '{"context":[],"execution_meta":{"current_node":"x"}}', [])


# -- the header's fast path: plain values of plain types are not read back ----------------------


class Plain(AgentState):
    count: int = 0
    name: str = ""
    ratio: float = 0.5
    flag: bool = False
    maybe: int | None = None
    mode: typing.Literal["a", "b"] = "a"
    tags: typing.Annotated[list[str], lambda left, right: [*left, *right]] = Field(
        default_factory=list
    )
    scores: dict[str, int] = Field(default_factory=dict)


class WithAny(AgentState):
    count: int = 0
    data: Any = None


def test_plain_fields_have_exact_checks_and_loose_ones_none() -> None:
    from tenxgraph.storage.checkpointer._storable import exact_checks, own_fields

    checks = exact_checks(Plain, own_fields(Plain))
    assert checks is not None
    assert [name for name, _ in checks] == list(own_fields(Plain))
    assert exact_checks(WithAny, own_fields(WithAny)) is None  # an Any field is always read back


def test_a_plain_state_is_not_read_back_but_a_value_that_does_not_fit_its_type_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fast path looks at the values too: a reducer's output is not validated, so a
    float in an int field still goes through the read-back (and is refused)."""
    state = Plain(count=3, tags=["x"], scores={"a": 1}, maybe=None)
    read_back: list[str] = []
    original = Plain.model_validate_json

    def counting(text: str | bytes, **kwargs: Any) -> Any:
        read_back.append("header")
        return original(text, **kwargs)

    monkeypatch.setattr(Plain, "model_validate_json", counting)
    encode_header(state, "t")
    assert read_back == []  # nothing to read back: every value is exactly its declared type
    state.__dict__["count"] = 2.5  # as an unvalidated reducer could leave it
    with pytest.raises(SerializationError, match="'count'"):
        encode_header(state, "t")
    assert read_back == ["header"]
